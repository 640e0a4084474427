// Anonymous memory backed by 2 MiB pages where the kernel allows it (2 MiB-aligned, madvise
// MADV_HUGEPAGE): for buffers that are streamed at memory bandwidth (copied weights, the
// bandwidth probe). With 4 KiB pages such streams miss the TLB every 4 KiB and the hardware
// prefetchers stop at every page boundary (measured: int8 decode 49-54 vs 75-80 tok/s).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mlarun {

class HugePageBuffer {
 public:
  HugePageBuffer() = default;
  // Maps `bytes` (rounded up to 2 MiB) of zero-filled read-write memory; throws Error on failure.
  explicit HugePageBuffer(size_t bytes);
  ~HugePageBuffer();
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }  // the rounded size
  // Makes the whole buffer read-only (writes then fault).
  void MakeReadOnly();

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mlarun
