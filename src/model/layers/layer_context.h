// What every per-layer function of the forward pass receives: the batch, its positions' RoPE
// values, the spans each token sees, the cache, the thread pool and the scratch arena.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/kernel_table.h"
#include "kernels/ops.h"
#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/layers/rope.h"

namespace mlarun {

struct BatchToken;
enum class MlaPath;

// The tokens of one sequence inside a batch.
struct SequenceSlice {
  int32_t seq = 0;
  std::vector<int32_t> token_indices;  // indices into the batch, increasing positions
  int64_t n_written = 0;               // cache length once the batch's tokens are written
  bool use_naive_mla = false;
};

struct LayerContext {
  Exec& exec;
  ScratchArena& scratch;  // temporaries: open a ScratchArena::Frame, then Alloc
  KvCache& cache;
  const ModelConfig& config;
  int layer = 0;
  std::span<const BatchToken> batch;
  std::span<const SequenceSlice> sequences;
  const std::vector<std::vector<KvSpan>>& spans;  // [n_tokens] visible rows per token
  const float* cos = nullptr;                     // [n_tokens, rope.n_pairs()]
  const float* sin = nullptr;                     // [n_tokens, rope.n_pairs()]
  const RopeTable& rope;
  float attention_scale = 1.0f;

  int64_t n_tokens() const { return static_cast<int64_t>(batch.size()); }
  // Token t's RoPE rotation (for exec.k.rope).
  RopeAngles Angles(int64_t t) const {
    const int pairs = rope.n_pairs();
    return {
        .cos = cos + t * pairs, .sin = sin + t * pairs, .n_pairs = pairs, .layout = rope.layout};
  }
};

struct MlaWeights;
struct GqaWeights;
struct MlpWeights;
struct MoeWeights;
struct ExpertStats;

// Each writes `out` [n_tokens, hidden] from the normalised hidden states `x` [n_tokens, hidden].
void MlaAttention(const LayerContext& ctx, const MlaWeights& w, const float* x, float* out);
void GqaAttention(const LayerContext& ctx, const GqaWeights& w, const float* x, float* out);
void DenseMlp(const LayerContext& ctx, const MlpWeights& w, const float* x, float* out);
void MoeFeedForward(const LayerContext& ctx, const MoeWeights& w, const float* x, float* out,
                    std::vector<int64_t>* expert_counts);

// Writes the cache rows of the batch's tokens (values [n_tokens, ValuesPerRow]) and brings the
// layer's compressed summaries up to date.
void WriteCacheRows(const LayerContext& ctx, const float* rows);

// Calls fn(t) for every t in [0, n), one row's work (a token's norms, RoPE, residual adds and
// routing; MoE gathers and sums): split over the pool's threads from kParallelRowsMin rows on (a
// prefill chunk, whose serial row work would leave the other threads waiting), on the calling
// thread below (decode, where handing off costs more than the work). Each t is done entirely by
// one thread, so results do not depend on the split.
constexpr int64_t kParallelRowsMin = 8;
template <typename Fn>
void ForEachRow(Exec& exec, int64_t n, Fn&& fn) {
  if (n < kParallelRowsMin || exec.pool.size() == 1) {
    for (int64_t t = 0; t < n; ++t) fn(t);
    return;
  }
  exec.pool.ParallelForRange(n, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t t = begin; t < end; ++t) fn(t);
  });
}

}  // namespace mlarun
