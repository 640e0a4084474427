// Fixed-size KV blocks shared by all sequences (as in vLLM's PagedAttention). A block holds
// `block_size` token rows for every layer; block ids are the same across layers. Blocks are
// reference counted so prefixes can be shared. The pool reserves virtual memory for its byte
// budget up front; pages become resident only when a block is first written.
//
// Storage is layer-major: each layer has its own region of n_blocks blocks of its rows, so a
// sequence's consecutive blocks (what a fresh pool hands out) are one contiguous run of a layer's
// rows, which the decode attention streams. With a block's layers side by side instead (each
// layer's 64 rows, then the next layer's), BM_AbsorbedMlaDecode over 4,640 rows with the rows
// evicted from the caches, as between two decode steps, took 11-16% longer with int8 rows and
// 8-17% with bf16 rows (`avx512bf16_4_layers_per_block`, 3 alternating runs; 2026-12-06, Zen 5 VM).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/attention.h"  // KvRows
#include "kv/kv_layout.h"

namespace mlarun {

struct BlockPoolOptions {
  int block_size = 64;               // tokens per block
  size_t budget_bytes = 1ull << 30;  // upper bound on block storage
};

struct BlockPoolStats {
  int64_t blocks_total = 0;   // capacity under the budget
  int64_t blocks_in_use = 0;  // refcount > 0
  int64_t peak_blocks_in_use = 0;
  size_t bytes_per_block = 0;
};

class BlockPool {
 public:
  // Throws Error naming `--kv-budget` if the budget cannot hold a single block.
  BlockPool(const KvLayout& layout, const BlockPoolOptions& options);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Returns a free block with refcount 1, or -1 when the pool is exhausted.
  int32_t Allocate();
  void Retain(int32_t block);
  // Drops one reference; the block returns to the free list at zero.
  void Release(int32_t block);
  int RefCount(int32_t block) const { return ref_counts_[static_cast<size_t>(block)]; }
  int64_t FreeBlocks() const { return static_cast<int64_t>(free_list_.size()); }

  int block_size() const { return options_.block_size; }
  const KvLayout& layout() const { return layout_; }
  BlockPoolStats stats() const;

  // Rows of `layer` for the attention kernel.
  KvRows LayerRows(int layer) const;
  // Returns the storage of row `row` of `block` in `layer`.
  uint8_t* Row(int layer, int32_t block, int row) const;

 private:
  KvLayout layout_;
  BlockPoolOptions options_;
  std::vector<size_t> layer_offsets_;      // [n_layers] byte offset of the layer's region
  std::vector<size_t> layer_block_bytes_;  // [n_layers] bytes of a block's rows of the layer
  size_t block_bytes_ = 0;                 // all layers' rows of a block
  int64_t n_blocks_ = 0;
  uint8_t* storage_ = nullptr;   // [n_layers][n_blocks, layer_block_bytes]
  std::vector<int> ref_counts_;  // [n_blocks]
  std::vector<int32_t> free_list_;
  int64_t in_use_ = 0;
  int64_t peak_in_use_ = 0;
};

}  // namespace mlarun
