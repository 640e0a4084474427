// Read-only memory-mapped files (weights are used in place, never copied).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mlarun {

class MappedFile {
 public:
  // Maps `path` read-only; throws Error naming the file if it cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole (small) file into a string; throws Error naming the file on failure.
std::string ReadFileToString(const std::string& path);
// Writes `contents` to `path`; throws Error naming the file on failure.
void WriteStringToFile(const std::string& path, const std::string& contents);

}  // namespace mlarun
