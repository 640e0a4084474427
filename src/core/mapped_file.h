// Read-only views of whole files: memory-mapped in place (the default: instant, shares the page
// cache), or copied once into anonymous memory backed by 2 MiB pages where the kernel allows it.
// The copy costs a read of the file at load but makes streaming the weights faster: page-cache
// pages are 4 KiB, so reading weights scattered over many small matrices (MoE experts) misses
// the TLB and the hardware prefetchers stop at every page boundary.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/huge_pages.h"

namespace mlarun {

enum class FileLoad {
  kMmap,  // map the file in place
  kCopy,  // read it into private anonymous memory (madvise MADV_HUGEPAGE), then make it read-only
};

class MappedFile {
 public:
  // Maps or copies `path` read-only; throws Error naming the file if it cannot be opened, mapped
  // or read.
  explicit MappedFile(const std::string& path, FileLoad load = FileLoad::kMmap);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) = delete;

  const uint8_t* data() const { return data_; }
  // Mapped files only (no-op for copies or ranges outside the file): unmaps the whole pages of
  // [begin, begin + bytes) from this process (MADV_DONTNEED; they stay in the reclaimable page
  // cache and are read back if touched again). For tensors that were copied elsewhere.
  void ReleasePages(const uint8_t* begin, size_t bytes) const;
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  HugePageBuffer copy_;  // FileLoad::kCopy: holds the bytes (data_ points into it)
};

// Reads a whole (small) file into a string; throws Error naming the file on failure.
std::string ReadFileToString(const std::string& path);
// Writes `contents` to `path`; throws Error naming the file on failure.
void WriteStringToFile(const std::string& path, const std::string& contents);

}  // namespace mlarun
