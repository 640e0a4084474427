// Multi-head Latent Attention (DeepSeek-V2, arXiv 2405.04434, section 2.1), two equivalent paths.
//
// Symbols (per token t, head h):
//   c_q    = RMSNorm(W_dq x)               [q_lora_rank]          (or no q LoRA: q = W_q x)
//   q      = W_uq c_q                      [n_head_q, nope + rope] -> q_nope [nope], q_pe [rope]
//   c_kv   = RMSNorm(W_dkv x)              [kv_lora_rank]         cached
//   k_pe   = RoPE(W_kr x)                  [rope], one head shared by all heads, cached
//   W_uk_h [nope, kv_lora_rank], W_uv_h [v, kv_lora_rank]  (rows of kv_b_proj)
// naive:    k_h = [W_uk_h c_kv ; k_pe], v_h = W_uv_h c_kv; MHA with head dims 192 / 128
// absorbed: q_abs_h = [W_uk_h^T q_nope_h ; q_pe_h] (576);  scores = q_abs_h . [c_kv ; k_pe];
//           o_lat_h = sum p c_kv (512);  o_h = W_uv_h o_lat_h   -- MQA 576 / 512, V aliases K
// Both use scale = mscale^2 / sqrt(nope + rope) (the 192-wide dot product it stands for).
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/layers/attention_mla_prefill.h"
#include "model/layers/layer_context.h"
#include "model/model.h"
#include "model/weights.h"

namespace mlarun {

namespace {

constexpr float kLoraNormEps = 1e-6f;  // q_a_layernorm / kv_a_layernorm (DeepseekV2RMSNorm default)

// Finishes q [n_tokens, n_head_q, nope + rope] from x's first query projection: with a q LoRA,
// c_q = W_dq x (normed here, then q = W_uq c_q); without, q = W_q x itself (c_q null). Applies
// RoPE to q_pe.
void FinishQuery(const LayerContext& ctx, const MlaWeights& w, float* c_q, float* q) {
  const ModelConfig& c = ctx.config;
  const int64_t n = ctx.n_tokens();
  if (c_q != nullptr) {
    ForEachRow(ctx.exec, n, [&](int64_t t) {
      float* row = c_q + t * c.q_lora_rank;
      ctx.exec.k.rms_norm(row, w.q_a_layernorm.data(), c.q_lora_rank, kLoraNormEps, row);
    });
    MatMul(ctx.exec, w.q_b_proj, c_q, n, q);
  }
  const int qk = c.QkHeadDim();
  ForEachRow(ctx.exec, n, [&](int64_t t) {
    ctx.exec.k.rope(q + t * c.num_attention_heads * qk + c.qk_nope_head_dim, c.num_attention_heads,
                    qk, ctx.Angles(t));
  });
}

// Finishes the cache rows [n_tokens, kv_lora_rank + rope] in place, from W_dkv x ; W_kr x to
// [RMSNorm(c_kv) ; RoPE(k_pe)].
void FinishLatentRows(const LayerContext& ctx, const MlaWeights& w, float* rows) {
  const ModelConfig& c = ctx.config;
  const int width = c.kv_lora_rank + c.qk_rope_head_dim;
  ForEachRow(ctx.exec, ctx.n_tokens(), [&](int64_t t) {
    float* row = rows + t * width;
    ctx.exec.k.rms_norm(row, w.kv_a_layernorm.data(), c.kv_lora_rank, kLoraNormEps, row);
    ctx.exec.k.rope(row + c.kv_lora_rank, 1, 0, ctx.Angles(t));
  });
}

// Absorbed path for the tokens `indices`: writes their rows of o [n_tokens, n_head_q, v].
void AttendAbsorbed(const LayerContext& ctx, const MlaWeights& w, const float* q,
                    std::span<const int32_t> indices, float* o) {
  const ModelConfig& c = ctx.config;
  const int n_head = c.num_attention_heads;
  const int nope = c.qk_nope_head_dim;
  const int qk = c.QkHeadDim();
  const int latent = c.kv_lora_rank;
  const int width = latent + c.qk_rope_head_dim;
  const int dv = c.v_head_dim;
  const int64_t n = static_cast<int64_t>(indices.size());
  // q_abs [n, n_head, latent + rope]: per head, q_nope [n, nope] times W_uk^T (all heads' products
  // in one parallel region).
  const ScratchArena::Frame frame(ctx.scratch);
  const std::span<float> q_abs = ctx.scratch.Alloc<float>(static_cast<size_t>(n * n_head * width));
  const int64_t per_head = n * std::max({nope, latent, dv});
  // [n_head, n, nope|latent] and [n_head, n, latent|v]
  const std::span<float> gathered =
      ctx.scratch.Alloc<float>(static_cast<size_t>(n_head * per_head));
  const std::span<float> product = ctx.scratch.Alloc<float>(static_cast<size_t>(n_head * per_head));
  std::vector<MatMulJob> jobs;
  for (int h = 0; h < n_head; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      const float* q_head =
          q + (static_cast<int64_t>(indices[static_cast<size_t>(i)]) * n_head + h) * qk;
      std::copy_n(q_head, nope, gathered.data() + h * per_head + i * nope);
      std::copy(q_head + nope, q_head + qk, q_abs.data() + (i * n_head + h) * width + latent);
    }
    const WeightMatrix& w_uk_t = w.w_uk_t[static_cast<size_t>(h)];
    jobs.push_back({&w_uk_t, 0, w_uk_t.rows, gathered.data() + h * per_head, n,
                    product.data() + h * per_head});
  }
  MatMulBatch(ctx.exec, jobs);
  for (int h = 0; h < n_head; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(product.data() + h * per_head + i * latent, latent,
                  q_abs.data() + (i * n_head + h) * width);
    }
  }
  const AttentionSpec spec{.n_head_q = n_head,
                           .n_head_kv = 1,
                           .head_dim_qk = width,
                           .head_dim_v = latent,
                           .v_aliases_k = true,
                           .window = ctx.cache.window(),
                           .scale = ctx.attention_scale};
  const KvRows rows = ctx.cache.LayerRows(ctx.layer);
  const std::span<float> o_latent =  // [n, n_head, latent]
      ctx.scratch.Alloc<float>(static_cast<size_t>(n * n_head * latent));
  auto args_of = [&](int64_t i) {
    return AttendArgs{.q = q_abs.data() + i * n_head * width,
                      .spans = ctx.spans[static_cast<size_t>(indices[static_cast<size_t>(i)])]};
  };
  if (n < ctx.exec.pool.size()) {
    // Few queries (decode): split each one's context over the threads (same result as below).
    for (int64_t i = 0; i < n; ++i) {
      AttendParallel(ctx.exec, spec, rows, args_of(i), o_latent.data() + i * n_head * latent);
    }
  } else {
    ctx.exec.pool.ParallelFor(n, [&](int64_t i, int) {
      Attend(ctx.exec.k, spec, rows, args_of(i), o_latent.data() + i * n_head * latent);
    });
  }
  // o_h = W_uv_h o_lat_h with W_uv_h = rows [h * (nope + v) + nope, + v) of kv_b_proj, or rows
  // [h * v, + v) of the split file's attn_v_b.
  jobs.clear();
  for (int h = 0; h < n_head; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(o_latent.data() + (i * n_head + h) * latent, latent,
                  gathered.data() + h * per_head + i * latent);
    }
    const bool split = !w.w_uv.empty();
    const int64_t row_begin =
        static_cast<int64_t>(h) * (split ? dv : nope + dv) + (split ? 0 : nope);
    jobs.push_back({split ? &w.w_uv : &w.kv_b_proj, row_begin, row_begin + dv,
                    gathered.data() + h * per_head, n, product.data() + h * per_head});
  }
  MatMulBatch(ctx.exec, jobs);
  for (int h = 0; h < n_head; ++h) {
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(product.data() + h * per_head + i * dv, dv,
                  o + (static_cast<int64_t>(indices[static_cast<size_t>(i)]) * n_head + h) * dv);
    }
  }
}

// Naive path for one sequence: expands every cached row its tokens see into per-head K/V rows
// (f32, MHA layout) and runs the same attention core with n_head_kv = n_head_q.
void AttendNaive(const LayerContext& ctx, const MlaWeights& w, const float* q,
                 const SequenceSlice& slice, float* o) {
  const ModelConfig& c = ctx.config;
  const int n_head = c.num_attention_heads;
  const int nope = c.qk_nope_head_dim;
  const int rope = c.qk_rope_head_dim;
  const int dv = c.v_head_dim;
  const int latent = c.kv_lora_rank;
  const int block_size = ctx.cache.pool().block_size();
  const KvRows cache_rows = ctx.cache.LayerRows(ctx.layer);

  // Rows referenced per cache block (the prefix [0, max_row) of each block is expanded).
  std::map<int32_t, int32_t> rows_used;
  for (int32_t t : slice.token_indices) {
    for (const KvSpan& s : ctx.spans[static_cast<size_t>(t)]) {
      int32_t& used = rows_used[s.block];
      used = std::max(used, s.row_begin + s.n_rows);
    }
  }
  std::map<int32_t, int32_t> temp_block;  // cache block -> expanded block index
  int64_t n_rows = 0;
  for (const auto& [block, used] : rows_used) {
    temp_block[block] = static_cast<int32_t>(temp_block.size());
    n_rows += block_size;
  }
  // Decode the cached latent rows: [n_temp_blocks * block_size, latent + rope].
  const int width = latent + rope;
  std::vector<float> latent_rows(static_cast<size_t>(n_rows * width), 0.0f);
  for (const auto& [block, used] : rows_used) {
    float* dst = latent_rows.data() + static_cast<int64_t>(temp_block[block]) * block_size * width;
    for (int32_t r = 0; r < used; ++r) {
      DecodeKvRow(cache_rows.format, cache_rows.Row(block, r), dst + int64_t{r} * width);
    }
  }
  // kv = W_ukv c_kv for every row: [n_rows, n_head, nope + v].
  std::vector<float> c_kv(static_cast<size_t>(n_rows * latent));
  for (int64_t r = 0; r < n_rows; ++r) {
    std::copy_n(latent_rows.data() + r * width, latent, c_kv.data() + r * latent);
  }
  const int kv_width = n_head * (nope + dv);
  std::vector<float> kv(static_cast<size_t>(n_rows * kv_width));
  MatMul(ctx.exec, w.kv_b_proj, c_kv.data(), n_rows, kv.data());
  // Expanded rows in the MHA cache-row layout: [K heads (nope + rope)..., V heads (v)...].
  const KvRowFormat format{.dtype = DType::kF32,
                           .n_head_kv = n_head,
                           .head_dim_k = nope + rope,
                           .head_dim_v = dv,
                           .v_aliases_k = false};
  const int row_values = format.ValuesPerRow();
  std::vector<float> expanded(static_cast<size_t>(n_rows * row_values));
  for (int64_t r = 0; r < n_rows; ++r) {
    float* dst = expanded.data() + r * row_values;
    const float* src = kv.data() + r * kv_width;
    const float* k_pe = latent_rows.data() + r * width + latent;
    for (int64_t h = 0; h < n_head; ++h) {
      std::copy_n(src + h * (nope + dv), nope, dst + h * (nope + rope));
      std::copy_n(k_pe, rope, dst + h * (nope + rope) + nope);
      std::copy_n(src + h * (nope + dv) + nope, dv,
                  dst + static_cast<int64_t>(n_head) * (nope + rope) + h * dv);
    }
  }
  const KvRows rows{.base = reinterpret_cast<const uint8_t*>(expanded.data()),
                    .block_stride = static_cast<size_t>(block_size) * format.RowBytes(),
                    .format = format};
  const AttentionSpec spec{.n_head_q = n_head,
                           .n_head_kv = n_head,
                           .head_dim_qk = nope + rope,
                           .head_dim_v = dv,
                           .v_aliases_k = false,
                           .window = ctx.cache.window(),
                           .scale = ctx.attention_scale};
  const int64_t n_queries = static_cast<int64_t>(slice.token_indices.size());
  ctx.exec.pool.ParallelFor(n_queries * n_head, [&](int64_t item, int) {
    const int32_t t = slice.token_indices[static_cast<size_t>(item / n_head)];
    const int head = static_cast<int>(item % n_head);
    thread_local std::vector<KvSpan> spans;
    spans = ctx.spans[static_cast<size_t>(t)];
    for (KvSpan& s : spans) s.block = temp_block.at(s.block);
    Attend(ctx.exec.k, spec, rows,
           {.q = q + static_cast<int64_t>(t) * n_head * (nope + rope),
            .spans = spans,
            .kv_head_begin = head,
            .kv_head_end = head + 1},
           o + static_cast<int64_t>(t) * n_head * dv);
  });
}

}  // namespace

void MlaAttention(const LayerContext& ctx, const MlaWeights& w, const float* x, float* out) {
  const ModelConfig& c = ctx.config;
  const int64_t n = ctx.n_tokens();
  const ScratchArena::Frame frame(ctx.scratch);
  // q [n, n_head, nope + rope], latent rows [n, latent + rope], o [n, n_head, v].
  const std::span<float> q =
      ctx.scratch.Alloc<float>(static_cast<size_t>(n * c.num_attention_heads * c.QkHeadDim()));
  const std::span<float> rows =
      ctx.scratch.Alloc<float>(static_cast<size_t>(n * (c.kv_lora_rank + c.qk_rope_head_dim)));
  // x's two projections, the query's first (W_q, or W_dq into c_q) and the latent rows', in one
  // parallel region: one hand-off and one preparation (Q8 quantisation) of x for both.
  const bool q_lora = c.q_lora_rank > 0;
  const WeightMatrix& w_q = q_lora ? w.q_a_proj : w.q_proj;
  const std::span<float> c_q =
      q_lora ? ctx.scratch.Alloc<float>(static_cast<size_t>(n * c.q_lora_rank))
             : std::span<float>();
  const MatMulJob projections[] = {
      {&w_q, 0, w_q.rows, x, n, q_lora ? c_q.data() : q.data()},
      {&w.kv_a_proj_with_mqa, 0, w.kv_a_proj_with_mqa.rows, x, n, rows.data()}};
  MatMulBatch(ctx.exec, projections);
  FinishQuery(ctx, w, q_lora ? c_q.data() : nullptr, q.data());
  FinishLatentRows(ctx, w, rows.data());
  WriteCacheRows(ctx, rows.data());

  const std::span<float> o =
      ctx.scratch.Alloc<float>(static_cast<size_t>(n * c.num_attention_heads * c.v_head_dim));
  {
    const AttentionMeterScope attention_meter(ctx.exec);
    // The absorbed-path tokens of all sequences go together (each token sees its own spans), so a
    // decode step of many sequences applies W_uk / W_uv in one batched product per layer.
    std::vector<int32_t> absorbed;
    for (const SequenceSlice& slice : ctx.sequences) {
      if (slice.use_naive_mla && ctx.cache.window() == 0) {
        AttendNaiveFull(ctx, w, q.data(), slice, o.data());
      } else if (slice.use_naive_mla) {
        AttendNaive(ctx, w, q.data(), slice, o.data());
      } else {
        absorbed.insert(absorbed.end(), slice.token_indices.begin(), slice.token_indices.end());
      }
    }
    if (!absorbed.empty()) AttendAbsorbed(ctx, w, q.data(), absorbed, o.data());
  }
  MatMul(ctx.exec, w.o_proj, o.data(), n, out);
}

}  // namespace mlarun
