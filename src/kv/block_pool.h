// Fixed-size KV blocks shared by all sequences (as in vLLM's PagedAttention). A block holds
// `block_size` token rows for every layer; block ids are the same across layers. Blocks are
// reference counted so prefixes can be shared. The pool reserves virtual memory for its byte
// budget up front; pages become resident only when a block is first written.
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
  std::vector<size_t> layer_offsets_;  // [n_layers] byte offset of the layer inside a block
  size_t block_bytes_ = 0;
  int64_t n_blocks_ = 0;
  uint8_t* storage_ = nullptr;   // [n_blocks, block_bytes]
  std::vector<int> ref_counts_;  // [n_blocks]
  std::vector<int32_t> free_list_;
  int64_t in_use_ = 0;
  int64_t peak_in_use_ = 0;
};

}  // namespace mlarun
