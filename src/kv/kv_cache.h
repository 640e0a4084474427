// Per-sequence paged KV cache over one shared BlockPool: block tables, the bounded-memory policies
// (window / sinks / compress, see kv_policy.h) and the list of rows each query may see.
//
// A forward pass over new tokens of a sequence does, per layer: WriteRow for each new token,
// UpdateSummaries, then attention over VisibleSpans(pos); after all layers, Commit. Reserve must
// precede the pass so running out of blocks is detected before any state changes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention.h"  // KvSpan, KvRows
#include "kv/block_pool.h"
#include "kv/kv_policy.h"

namespace mlarun {

struct KvCacheOptions {
  int block_size = 64;
  size_t budget_bytes = 1ull << 30;
  KvPolicy policy;
  int model_window = 0;  // the model's own sliding window (config), 0 = none
};

class KvCache {
 public:
  KvCache(const KvLayout& layout, const KvCacheOptions& options);

  // Returns a handle for a new, empty sequence.
  int32_t AddSequence();
  // Releases every block the sequence holds; the handle becomes invalid.
  void RemoveSequence(int32_t seq);
  // Returns a new sequence holding the first `n_tokens` committed rows of `source`: whole blocks
  // are shared by reference count, a partially used last block is copied (copy-on-write).
  // Returns -1 if the pool lacks a block for the copy. Only for sequences without recycling
  // (full policy and no model window).
  int32_t ForkSequence(int32_t source, int64_t n_tokens);
  // Returns a new sequence whose first `n_tokens` rows are those of pool blocks `blocks` (logical
  // order): whole blocks are shared by reference count, a partially used last block is copied
  // (copy-on-write). Returns -1 if the pool lacks a block for the copy. Full policy and no model
  // window only (used by the prefix cache).
  int32_t AddSequenceFromBlocks(std::span<const int32_t> blocks, int64_t n_tokens);
  // Pool blocks of `seq` in logical order (-1 for recycled ones).
  std::span<const int32_t> SequenceBlocks(int32_t seq) const { return Get(seq).blocks; }
  // Committed tokens of `seq` (the next token's position).
  int64_t Length(int32_t seq) const;

  // Allocates the blocks `n_new` more tokens need (raw rows and summaries). Returns false and
  // allocates nothing when the pool has too few free blocks.
  bool Reserve(int32_t seq, int64_t n_new);
  // Stores the float values [ValuesPerRow] of token `pos` in `layer`.
  void WriteRow(int32_t seq, int layer, int64_t pos, const float* values);
  // Computes `layer`'s summary rows for groups complete for queries before `n_written`.
  void UpdateSummaries(int32_t seq, int layer, int64_t n_written);
  // Appends the spans a query at `pos` sees, in a fixed order, to `out`.
  void VisibleSpans(int32_t seq, int64_t pos, std::vector<KvSpan>* out) const;
  // Declares `n` new tokens written in all layers and frees blocks no later query needs.
  void Commit(int32_t seq, int64_t n);

  KvRows LayerRows(int layer) const { return pool_.LayerRows(layer); }
  const BlockPool& pool() const { return pool_; }
  // The pool, for owners of extra block references (the prefix cache).
  BlockPool& mutable_pool() { return pool_; }
  const KvPolicy& policy() const { return policy_; }
  // The effective sliding window (policy and model combined), 0 = none.
  int window() const { return window_; }
  size_t BytesPerToken() const { return pool_.layout().BytesPerToken(); }
  // Bytes of the rows held for all sequences (raw tokens + summaries), exactly.
  size_t UsedBytes() const;
  // Bytes of the blocks in use (rows rounded up to whole blocks).
  size_t AllocatedBytes() const;

 private:
  struct Sequence {
    bool active = false;
    int64_t length = 0;
    std::vector<int32_t> blocks;          // logical block -> pool block, -1 once freed
    std::vector<int32_t> summary_blocks;  // summary g lives in summary_blocks[g / block_size]
    int64_t n_summaries = 0;              // summaries valid in every layer
  };

  // Complete summary groups visible to a query at `pos`.
  int64_t CompleteGroups(int64_t pos) const;
  // First raw position still needed by queries at >= `next_pos` (sinks aside).
  int64_t FirstNeededPosition(const Sequence& s, int64_t next_pos) const;
  void AppendRange(const Sequence& s, int64_t begin, int64_t end, std::vector<KvSpan>* out) const;
  Sequence& Get(int32_t seq);
  const Sequence& Get(int32_t seq) const;

  BlockPool pool_;
  KvPolicy policy_;
  int window_ = 0;
  int block_size_ = 0;
  std::vector<Sequence> sequences_;
};

}  // namespace mlarun
