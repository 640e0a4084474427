// Block pool storage and reference counting.
#include "kv/block_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <string>

#include "core/error.h"

namespace mlarun {

namespace {
constexpr size_t kLayerAlign = 64;  // each block's rows of a layer start on a cache line
}

BlockPool::BlockPool(const KvLayout& layout, const BlockPoolOptions& options)
    : layout_(layout), options_(options) {
  if (options.block_size <= 0) throw Error("--kv-block-size must be positive");
  for (const KvRowFormat& f : layout_.layers) {
    const size_t bytes = f.RowBytes() * static_cast<size_t>(options.block_size);
    layer_block_bytes_.push_back((bytes + kLayerAlign - 1) / kLayerAlign * kLayerAlign);
    block_bytes_ += layer_block_bytes_.back();
  }
  if (block_bytes_ == 0) throw Error("KV layout has no layers");
  n_blocks_ = static_cast<int64_t>(options.budget_bytes / block_bytes_);
  if (n_blocks_ < 1) {
    throw Error("--kv-budget " + std::to_string(options.budget_bytes) +
                " bytes cannot hold one KV block of " + std::to_string(block_bytes_) + " bytes");
  }
  size_t region = 0;
  for (const size_t bytes : layer_block_bytes_) {
    layer_offsets_.push_back(region);
    region += static_cast<size_t>(n_blocks_) * bytes;
  }
  const size_t total = static_cast<size_t>(n_blocks_) * block_bytes_;
  void* mapped = ::mmap(nullptr, total, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) {
    throw Error("--kv-budget: cannot reserve " + std::to_string(total) + " bytes");
  }
  storage_ = static_cast<uint8_t*>(mapped);
  ref_counts_.assign(static_cast<size_t>(n_blocks_), 0);
  free_list_.reserve(static_cast<size_t>(n_blocks_));
  // LIFO free list, lowest ids first out: recycled blocks are reused while they are resident.
  for (int64_t b = n_blocks_ - 1; b >= 0; --b) free_list_.push_back(static_cast<int32_t>(b));
}

BlockPool::~BlockPool() {
  if (storage_ != nullptr) ::munmap(storage_, static_cast<size_t>(n_blocks_) * block_bytes_);
}

int32_t BlockPool::Allocate() {
  if (free_list_.empty()) return -1;
  const int32_t block = free_list_.back();
  free_list_.pop_back();
  ref_counts_[static_cast<size_t>(block)] = 1;
  peak_in_use_ = std::max(peak_in_use_, ++in_use_);
  return block;
}

void BlockPool::Retain(int32_t block) { ++ref_counts_[static_cast<size_t>(block)]; }

void BlockPool::Release(int32_t block) {
  int& count = ref_counts_[static_cast<size_t>(block)];
  if (--count == 0) {
    free_list_.push_back(block);
    --in_use_;
  }
}

BlockPoolStats BlockPool::stats() const {
  return {.blocks_total = n_blocks_,
          .blocks_in_use = in_use_,
          .peak_blocks_in_use = peak_in_use_,
          .bytes_per_block = block_bytes_};
}

KvRows BlockPool::LayerRows(int layer) const {
  return {.base = storage_ + layer_offsets_[static_cast<size_t>(layer)],
          .block_stride = layer_block_bytes_[static_cast<size_t>(layer)],
          .format = layout_.layers[static_cast<size_t>(layer)]};
}

uint8_t* BlockPool::Row(int layer, int32_t block, int row) const {
  return storage_ + layer_offsets_[static_cast<size_t>(layer)] +
         static_cast<size_t>(block) * layer_block_bytes_[static_cast<size_t>(layer)] +
         static_cast<size_t>(row) * layout_.layers[static_cast<size_t>(layer)].RowBytes();
}

}  // namespace mlarun
