// Scratch memory for the temporaries of a forward pass (expanded MLA keys and values, score
// tiles), reused from one call to the next: a bump allocator over retained huge-page chunks. Its
// storage is neither zero-filled again nor returned to the system between calls, so a long prefill
// chunk does not pay for fresh pages (page faults plus the zeroing of std::vector) on every layer.
//
// Allocate only from the thread that owns the arena (never inside ParallelFor items); the
// returned storage may be written by any thread.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>
#include <vector>

#include "core/huge_pages.h"

namespace mlarun {

class ScratchArena {
 public:
  ScratchArena() = default;
  ScratchArena(const ScratchArena&) = delete;
  ScratchArena& operator=(const ScratchArena&) = delete;

  // Returns uninitialised room for `n` values of T (64-byte aligned), valid until the innermost
  // enclosing Frame ends.
  template <typename T>
  std::span<T> Alloc(size_t n) {
    static_assert(std::is_trivially_default_constructible_v<T>);
    return {static_cast<T*>(AllocBytes(n * sizeof(T))), n};
  }

  // Releases, when it ends, everything allocated since it began.
  class Frame {
   public:
    explicit Frame(ScratchArena& arena);
    ~Frame();
    Frame(const Frame&) = delete;
    Frame& operator=(const Frame&) = delete;

   private:
    ScratchArena& arena_;
    size_t chunk_;
    size_t used_;
  };

  // Bytes held (the sum of the retained chunks).
  size_t capacity() const;

 private:
  void* AllocBytes(size_t bytes);

  std::vector<HugePageBuffer> chunks_;  // 2 MiB-aligned, zero-filled only when first mapped
  size_t chunk_ = 0;                    // the chunk allocations come from
  size_t used_ = 0;                     // bytes used in chunks_[chunk_]
  size_t depth_ = 0;                    // open frames
  size_t peak_ = 0;  // most bytes in use at once since the arena was last consolidated
  size_t live_ = 0;  // bytes in use (incl. what was skipped at chunk ends)
};

}  // namespace mlarun
