#include "core/scratch_arena.h"

#include <algorithm>

namespace mlarun {

namespace {
constexpr size_t kAlign = 64;
constexpr size_t kMinChunkBytes = size_t{4} << 20;
size_t RoundUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

ScratchArena::Frame::Frame(ScratchArena& arena)
    : arena_(arena), chunk_(arena.chunk_), used_(arena.used_) {
  ++arena_.depth_;
}

ScratchArena::Frame::~Frame() {
  ScratchArena& a = arena_;
  // live_ counts the bytes of every chunk from chunk_ on that the frame used, so recompute it
  // from the position restored below.
  a.chunk_ = chunk_;
  a.used_ = used_;
  size_t live = used_;
  for (size_t c = 0; c < chunk_; ++c) live += a.chunks_[c].size();
  a.live_ = live;
  if (--a.depth_ == 0 && a.chunks_.size() > 1) {
    // Everything is released and the peak needed several chunks: replace them by one chunk of the
    // peak size, so later passes of the same shape bump through a single block.
    const size_t peak = a.peak_;
    a.chunks_.clear();
    a.chunks_.emplace_back(peak);
    a.chunk_ = 0;
    a.used_ = 0;
    a.live_ = 0;
  }
}

void* ScratchArena::AllocBytes(size_t bytes) {
  bytes = RoundUp(std::max<size_t>(bytes, 1));
  while (true) {
    if (chunk_ < chunks_.size() && chunks_[chunk_].size() - used_ >= bytes) {
      void* p = chunks_[chunk_].data() + used_;
      used_ += bytes;
      live_ += bytes;
      peak_ = std::max(peak_, live_);
      return p;
    }
    if (chunk_ < chunks_.size()) {
      // The rest of this chunk is skipped; it counts as in use until the frame ends.
      live_ += chunks_[chunk_].size() - used_;
      ++chunk_;
      used_ = 0;
      if (chunk_ < chunks_.size() && chunks_[chunk_].size() >= bytes) continue;
    }
    // No later chunk fits: insert a new one here.
    const size_t size = std::max(bytes, kMinChunkBytes);
    chunks_.emplace(chunks_.begin() + static_cast<std::ptrdiff_t>(chunk_), size);
    used_ = 0;
  }
}

size_t ScratchArena::capacity() const {
  size_t total = 0;
  for (const HugePageBuffer& c : chunks_) total += c.size();
  return total;
}

}  // namespace mlarun
