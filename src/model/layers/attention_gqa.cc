// MHA / GQA / MQA attention in the Llama layout (one code path; they differ only in n_head_kv).
//
// Symbols: q = W_q x + b_q [n_head_q, head_dim]; k = W_k x + b_k, v = W_v x + b_v
// [n_head_kv, head_dim]; RoPE (rotate-half pairing) on q and k; query head h reads kv head
// h / (n_head_q / n_head_kv); scale 1/sqrt(head_dim). Cache row: [k heads ; v heads].
#include <cmath>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/layers/layer_context.h"
#include "model/model.h"
#include "model/weights.h"

namespace mlarun {

namespace {

// y [n, w.rows] += bias for every token (nothing without a bias).
void AddBias(const WeightMatrix& w, const F32Vector& bias, int64_t n, float* y) {
  if (bias.empty()) return;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < w.rows; ++i) y[t * w.rows + i] += bias.values[static_cast<size_t>(i)];
  }
}

}  // namespace

void GqaAttention(const LayerContext& ctx, const GqaWeights& w, const float* x, float* out) {
  const ModelConfig& c = ctx.config;
  const int64_t n = ctx.n_tokens();
  const int n_head = c.num_attention_heads;
  const int n_head_kv = c.num_key_value_heads;
  const int hd = c.head_dim;
  const ScratchArena::Frame frame(ctx.scratch);
  const std::span<float> q = ctx.scratch.Alloc<float>(static_cast<size_t>(n * n_head * hd));
  // Cache rows [n, K heads ; V heads].
  const int kv_width = n_head_kv * hd;
  const std::span<float> k = ctx.scratch.Alloc<float>(static_cast<size_t>(n * kv_width));
  const std::span<float> v = ctx.scratch.Alloc<float>(static_cast<size_t>(n * kv_width));
  // The three projections of x in one parallel region (one hand-off, x prepared once).
  const MatMulJob projections[] = {{&w.q_proj, 0, w.q_proj.rows, x, n, q.data()},
                                   {&w.k_proj, 0, w.k_proj.rows, x, n, k.data()},
                                   {&w.v_proj, 0, w.v_proj.rows, x, n, v.data()}};
  MatMulBatch(ctx.exec, projections);
  AddBias(w.q_proj, w.q_bias, n, q.data());
  AddBias(w.k_proj, w.k_bias, n, k.data());
  AddBias(w.v_proj, w.v_bias, n, v.data());
  const std::span<float> rows = ctx.scratch.Alloc<float>(static_cast<size_t>(n * 2 * kv_width));
  ForEachRow(ctx.exec, n, [&](int64_t t) {
    const RopeAngles angles = ctx.Angles(t);
    ctx.exec.k.rope(q.data() + t * n_head * hd, n_head, hd, angles);
    float* row = rows.data() + t * 2 * kv_width;
    std::copy_n(k.data() + t * kv_width, kv_width, row);
    std::copy_n(v.data() + t * kv_width, kv_width, row + kv_width);
    ctx.exec.k.rope(row, n_head_kv, hd, angles);
  });
  WriteCacheRows(ctx, rows.data());

  const AttentionSpec spec{.n_head_q = n_head,
                           .n_head_kv = n_head_kv,
                           .head_dim_qk = hd,
                           .head_dim_v = hd,
                           .v_aliases_k = false,
                           .window = ctx.cache.window(),
                           .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)))};
  const KvRows cache_rows = ctx.cache.LayerRows(ctx.layer);
  const std::span<float> o = ctx.scratch.Alloc<float>(static_cast<size_t>(n * n_head * hd));
  {
    const AttentionMeterScope attention_meter(ctx.exec);
    if (n * n_head_kv < ctx.exec.pool.size()) {
      // Few (query, kv head) items (MQA decode): split the context over the threads instead.
      for (int64_t t = 0; t < n; ++t) {
        AttendParallel(
            ctx.exec, spec, cache_rows,
            {.q = q.data() + t * n_head * hd, .spans = ctx.spans[static_cast<size_t>(t)]},
            o.data() + t * n_head * hd);
      }
    } else {
      ctx.exec.pool.ParallelFor(n * n_head_kv, [&](int64_t item, int) {
        const int64_t t = item / n_head_kv;
        const int g = static_cast<int>(item % n_head_kv);
        Attend(ctx.exec.k, spec, cache_rows,
               {.q = q.data() + t * n_head * hd,
                .spans = ctx.spans[static_cast<size_t>(t)],
                .kv_head_begin = g,
                .kv_head_end = g + 1},
               o.data() + t * n_head * hd);
      });
    }
  }
  MatMul(ctx.exec, w.o_proj, o.data(), n, out);
}

}  // namespace mlarun
