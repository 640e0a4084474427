// POSIX mmap wrapper and small whole-file helpers.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.h"

namespace mlarun {

namespace {

// Reads the `size` bytes of `fd` into `dst`; throws Error naming `path` on failure.
void ReadAll(int fd, const std::string& path, uint8_t* dst, size_t size) {
  size_t done = 0;
  while (done < size) {
    const size_t chunk = std::min(size - done, size_t{64} << 20);
    const ssize_t n = ::pread(fd, dst + done, chunk, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error(path + ": read failed at byte " + std::to_string(done) + ": " +
                  (n == 0 ? std::string("unexpected end of file") : std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

MappedFile::MappedFile(const std::string& path, FileLoad load) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(path + ": cannot stat: " + std::strerror(errno));
  size_ = static_cast<size_t>(st.st_size);
  if (size_ == 0) return;
  if (load == FileLoad::kMmap) {
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) throw Error(path + ": cannot mmap: " + std::strerror(errno));
    data_ = static_cast<const uint8_t*>(mapped);
    // Page-cache folios created from now on may be 2 MiB ones (helps only when the file is not
    // cached yet; FileLoad::kCopy does not depend on the cache's state).
    ::madvise(const_cast<uint8_t*>(data_), size_, MADV_HUGEPAGE);
    return;
  }
  try {
    copy_ = HugePageBuffer(size_);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
  ReadAll(fd, path, copy_.data(), size_);
  copy_.MakeReadOnly();
  data_ = copy_.data();
}

void MappedFile::ReleasePages(const uint8_t* begin, size_t bytes) const {
  if (data_ == nullptr || copy_.data() != nullptr) return;
  const auto base = reinterpret_cast<uintptr_t>(data_);
  const auto address = reinterpret_cast<uintptr_t>(begin);
  if (address < base || address + bytes > base + size_) return;
  // Whole pages inside the range only (the mapping starts on a page): neighbours stay mapped.
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t offset = address - base;
  const size_t first = (offset + page - 1) / page * page;
  const size_t last = (offset + bytes) / page * page;
  if (last > first) ::madvise(const_cast<uint8_t*>(data_) + first, last - first, MADV_DONTNEED);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      copy_(std::move(other.copy_)) {}

MappedFile::~MappedFile() {
  if (data_ != nullptr && copy_.data() == nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

std::string ReadFileToString(const std::string& path) {
  // An ifstream opens a directory and then reads nothing: it would pass for an empty file.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw Error(path + ": read failed");
  return buffer.str();
}

void WriteStringToFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot create: " + std::strerror(errno));
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (!out) throw Error(path + ": write failed");
}

}  // namespace mlarun
