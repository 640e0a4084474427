#include "core/huge_pages.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"

namespace mlarun {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

HugePageBuffer::HugePageBuffer(size_t bytes) {
  if (bytes == 0) return;
  const size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Over-allocate by one huge page and trim both ends to a 2 MiB-aligned region.
  void* mapped = ::mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) {
    throw Error("cannot allocate " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
  }
  auto* raw = static_cast<uint8_t*>(mapped);
  const auto address = reinterpret_cast<uintptr_t>(raw);
  uint8_t* aligned = raw + (kHugePage - address % kHugePage) % kHugePage;
  if (aligned > raw) ::munmap(raw, static_cast<size_t>(aligned - raw));
  uint8_t* const end = raw + rounded + kHugePage;
  if (end > aligned + rounded)
    ::munmap(aligned + rounded, static_cast<size_t>(end - (aligned + rounded)));
  data_ = aligned;
  size_ = rounded;
  ::madvise(data_, size_, MADV_HUGEPAGE);  // a hint: without THP the buffer still works
}

HugePageBuffer::~HugePageBuffer() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(data_, size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void HugePageBuffer::MakeReadOnly() {
  if (data_ != nullptr) ::mprotect(data_, size_, PROT_READ);
}

}  // namespace mlarun
