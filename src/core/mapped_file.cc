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
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace mlarun {

namespace {

constexpr size_t kHugePage = size_t{2} << 20;

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
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error(path + ": cannot stat: " + std::strerror(errno));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0 && load == FileLoad::kMmap) {
    void* mapped = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapped == MAP_FAILED) {
      ::close(fd);
      throw Error(path + ": cannot mmap: " + std::strerror(errno));
    }
    region_ = static_cast<uint8_t*>(mapped);
    region_size_ = size_;
    data_ = region_;
    ::madvise(region_, region_size_, MADV_HUGEPAGE);
  } else if (size_ > 0) {
    // A 2 MiB-aligned anonymous region (over-allocated, then trimmed) so that huge pages can
    // back all of it.
    const size_t rounded = (size_ + kHugePage - 1) / kHugePage * kHugePage;
    void* mapped = ::mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) {
      ::close(fd);
      throw Error(path + ": cannot allocate " + std::to_string(size_) +
                  " bytes to load the file: " + std::strerror(errno));
    }
    auto* raw = static_cast<uint8_t*>(mapped);
    const auto address = reinterpret_cast<uintptr_t>(raw);
    uint8_t* aligned = raw + ((kHugePage - address % kHugePage) % kHugePage);
    if (aligned > raw) ::munmap(raw, static_cast<size_t>(aligned - raw));
    const size_t tail = static_cast<size_t>(raw + rounded + kHugePage - (aligned + rounded));
    if (tail > 0) ::munmap(aligned + rounded, tail);
    region_ = aligned;
    region_size_ = rounded;
    ::madvise(region_, region_size_, MADV_HUGEPAGE);  // a hint; without THP the copy still works
    try {
      ReadAll(fd, path, region_, size_);
    } catch (...) {
      ::munmap(region_, region_size_);
      ::close(fd);
      throw;
    }
    ::mprotect(region_, region_size_, PROT_READ);
    data_ = region_;
  }
  ::close(fd);
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(other.data_),
      size_(other.size_),
      region_(other.region_),
      region_size_(other.region_size_) {
  other.data_ = nullptr;
  other.size_ = 0;
  other.region_ = nullptr;
  other.region_size_ = 0;
}

MappedFile::~MappedFile() {
  if (region_ != nullptr) ::munmap(region_, region_size_);
}

std::string ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteStringToFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot create: " + std::strerror(errno));
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (!out) throw Error(path + ": write failed");
}

}  // namespace mlarun
