// Naive MLA prefill (DeepSeek-V2, arXiv 2405.04434, section 2.1) as tiled GEMMs: the context's
// latent rows are expanded once per layer into per-head keys and values (512 positions at a
// time), then each tile of a head's queries computes S = Q_h K_h^T, a causal softmax per query
// and O = P V_h (FlashAttention-style tiling without the online rescale: a tile's scores fit in
// memory).
//
// Symbols: n_ctx = cached positions [0, n_written); per head h:
//   K_h [n_ctx, nope + rope] = [W_uk_h c_kv ; k_pe],  V_h [n_ctx, v] = W_uv_h c_kv,
//   Q_h [n_q, nope + rope],  S = scale Q_h K_h^T,  P = softmax(S) (causal),  O_h = P V_h.
// Two kernels: float32 GEMMs (exact tables), or bf16 pair GEMMs (`--isa fast`) with K, V, the
// queries and the probabilities rounded to bf16 and everything else in float32.
#include "model/layers/attention_mla_prefill.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/matmul.h"
#include "model/model.h"
#include "model/weights.h"

namespace mlarun {
namespace {

// Queries per work item: enough rows for the GEMMs to reuse each panel of K and V.
constexpr int64_t kQueryTile = 128;
// Positions per block when the keys are transposed.
constexpr int64_t kPositionBlock = 64;
// Positions expanded and laid out at a time (even; a 512-token prefill chunk from position 0 is
// one).
constexpr int64_t kExpandChunk = 512;

struct Dims {
  int n_head, nope, rope, dk, dv, latent, kv_width;
};

Dims DimsOf(const ModelConfig& c) {
  const int nope = c.qk_nope_head_dim;
  return {.n_head = c.num_attention_heads,
          .nope = nope,
          .rope = c.qk_rope_head_dim,
          .dk = nope + c.qk_rope_head_dim,
          .dv = c.v_head_dim,
          .latent = c.kv_lora_rank,
          .kv_width = c.num_attention_heads * (nope + c.v_head_dim)};
}

// Decodes the cached rows of positions [p0, p1) in order: c_kv [p1 - p0, latent] and
// k_pe [p1 - p0, rope].
void DecodeRows(const LayerContext& ctx, const Dims& d, const SequenceSlice& slice, int64_t p0,
                int64_t p1, float* c_kv, float* k_pe) {
  const int block_size = ctx.cache.pool().block_size();
  const KvRows cache_rows = ctx.cache.LayerRows(ctx.layer);
  const std::span<const int32_t> blocks = ctx.cache.SequenceBlocks(slice.seq);
  ctx.exec.pool.ParallelForRange(p1 - p0, 64, [&](int64_t i0, int64_t i1, int) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(d.latent) + static_cast<size_t>(d.rope));
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t p = p0 + i;
      DecodeKvRow(cache_rows.format,
                  cache_rows.Row(blocks[static_cast<size_t>(p / block_size)],
                                 static_cast<int32_t>(p % block_size)),
                  row.data());
      std::copy_n(row.data(), d.latent, c_kv + i * d.latent);
      std::copy_n(row.data() + d.latent, d.rope, k_pe + i * d.rope);
    }
  });
}

// One chunk of the context expanded by kv_b_proj: positions [p0, p0 + n) with
// kv [n, n_head, nope + v] and k_pe [n, rope].
struct ExpandedChunk {
  int64_t p0 = 0;
  int64_t n = 0;
  const float* kv = nullptr;
  const float* k_pe = nullptr;
};

// Decodes and expands the context kExpandChunk positions at a time and calls lay_out(chunk) for
// each, so that a chunk's float32 expansion stays in L3 while it is laid out, and the arena holds
// one chunk of it, not the whole context's [n_ctx, n_head (nope + v)] floats. The products are
// the whole context's, bitwise (a position's result does not depend on its batch,
// kernel_table.h) except where the AMX tables take a last chunk of fewer than
// bf16_tiles_min_tokens positions by their row kernel. bench-v2-lite bf16 prefill of 512 tokens
// (Zen 5 VM, 2026-12-05): the expansion's products and the bf16 layout 127 + 34 -> 115 + 23 ms a
// prefill @4096; with and without chunks alternating prefill by prefill in one process, medians of
// 6 pairs, +0.7 to +3.0% @4096 (5 runs); separate processes @16384 228 -> 273 and 261 -> 292
// tok/s; peak memory 74 MB less @4096, 301 MB less @16384.
template <typename LayOut>
void ForEachExpandedChunk(const LayerContext& ctx, const MlaWeights& w, const Dims& d,
                          const SequenceSlice& slice, LayOut&& lay_out) {
  const int64_t n_ctx = slice.n_written;
  const int64_t chunk = std::min(n_ctx, kExpandChunk);
  const std::span<float> c_kv = ctx.scratch.Alloc<float>(static_cast<size_t>(chunk * d.latent));
  const std::span<float> k_pe = ctx.scratch.Alloc<float>(static_cast<size_t>(chunk * d.rope));
  const std::span<float> kv = ctx.scratch.Alloc<float>(static_cast<size_t>(chunk * d.kv_width));
  for (int64_t p0 = 0; p0 < n_ctx; p0 += chunk) {
    const int64_t n = std::min(chunk, n_ctx - p0);
    DecodeRows(ctx, d, slice, p0, p0 + n, c_kv.data(), k_pe.data());
    MatMul(ctx.exec, w.kv_b_proj, c_kv.data(), n, kv.data());
    lay_out(ExpandedChunk{.p0 = p0, .n = n, .kv = kv.data(), .k_pe = k_pe.data()});
  }
}

// One work item: queries [q0, q0 + nq) of the slice, head `head`, seeing positions [0, visible).
struct QueryTile {
  int64_t head = 0;
  int64_t q0 = 0;
  int64_t nq = 0;
  int64_t visible = 0;
};

int64_t PositionOf(const LayerContext& ctx, const SequenceSlice& slice, int64_t i) {
  return ctx.batch[static_cast<size_t>(slice.token_indices[static_cast<size_t>(i)])].pos;
}

int64_t TileCount(const SequenceSlice& slice) {
  return (static_cast<int64_t>(slice.token_indices.size()) + kQueryTile - 1) / kQueryTile;
}

QueryTile TileOf(const LayerContext& ctx, const SequenceSlice& slice, int64_t item) {
  const int64_t n_tiles = TileCount(slice);
  const int64_t n_queries = static_cast<int64_t>(slice.token_indices.size());
  QueryTile tile{.head = item / n_tiles, .q0 = (item % n_tiles) * kQueryTile};
  tile.nq = std::min(kQueryTile, n_queries - tile.q0);
  tile.visible = PositionOf(ctx, slice, tile.q0 + tile.nq - 1) + 1;  // up to the last query
  return tile;
}

// Query row i of a tile: [nope + rope] values of head tile.head.
const float* QueryRow(const LayerContext& ctx, const Dims& d, const float* q,
                      const SequenceSlice& slice, const QueryTile& tile, int64_t i) {
  const int64_t t = slice.token_indices[static_cast<size_t>(tile.q0 + i)];
  return q + (t * d.n_head + tile.head) * d.dk;
}

float* OutputRow(const Dims& d, float* o, const SequenceSlice& slice, const QueryTile& tile,
                 int64_t i) {
  const int64_t t = slice.token_indices[static_cast<size_t>(tile.q0 + i)];
  return o + (t * d.n_head + tile.head) * d.dv;
}

// Exact float32 tiles: K_h^T [n_head][dk, n_ctx] and V_h [n_head][n_ctx, dv] in the layouts the
// GEMM kernel reads (a row of B is a vector); softmax with double sums in a fixed order.
void TilesF32(const LayerContext& ctx, const MlaWeights& w, const Dims& d, const float* q,
              const SequenceSlice& slice, float* o) {
  const int64_t n_ctx = slice.n_written;
  const std::span<float> keys_t =
      ctx.scratch.Alloc<float>(static_cast<size_t>(int64_t{d.n_head} * d.dk * n_ctx));
  const std::span<float> values =
      ctx.scratch.Alloc<float>(static_cast<size_t>(int64_t{d.n_head} * n_ctx * d.dv));
  ForEachExpandedChunk(ctx, w, d, slice, [&](const ExpandedChunk& e) {
    ctx.exec.pool.ParallelFor(d.n_head, [&](int64_t h, int) {
      const int64_t head_offset = h * (d.nope + d.dv);
      float* kt_h = keys_t.data() + h * d.dk * n_ctx + e.p0;
      float* v_h = values.data() + (h * n_ctx + e.p0) * d.dv;
      for (int64_t b0 = 0; b0 < e.n; b0 += kPositionBlock) {
        const int64_t b1 = std::min(e.n, b0 + kPositionBlock);
        for (int c = 0; c < d.dk; ++c) {
          float* dst = kt_h + c * n_ctx;
          for (int64_t i = b0; i < b1; ++i) {
            dst[i] = c < d.nope ? e.kv[i * d.kv_width + head_offset + c]
                                : e.k_pe[i * d.rope + c - d.nope];
          }
        }
      }
      for (int64_t i = 0; i < e.n; ++i) {
        std::copy_n(e.kv + i * d.kv_width + head_offset + d.nope, d.dv, v_h + i * d.dv);
      }
    });
  });
  ctx.exec.pool.ParallelFor(d.n_head * TileCount(slice), [&](int64_t item, int) {
    const QueryTile tile = TileOf(ctx, slice, item);
    const int64_t nq = tile.nq;
    const int64_t visible = tile.visible;
    thread_local std::vector<float> q_tile, scores, probs, out;
    q_tile.resize(static_cast<size_t>(nq * d.dk));
    for (int64_t i = 0; i < nq; ++i)
      std::copy_n(QueryRow(ctx, d, q, slice, tile, i), d.dk, q_tile.data() + i * d.dk);
    scores.resize(static_cast<size_t>(nq * visible));
    ctx.exec.k.gemm(nq, visible, d.dk, q_tile.data(), d.dk,
                    keys_t.data() + tile.head * d.dk * n_ctx, n_ctx, scores.data(), visible);
    probs.resize(static_cast<size_t>(nq * visible));
    for (int64_t i = 0; i < nq; ++i) {
      const int64_t pos = PositionOf(ctx, slice, tile.q0 + i);
      const float* s_row = scores.data() + i * visible;
      float* p_row = probs.data() + i * visible;
      float max_score = -INFINITY;
      for (int64_t j = 0; j <= pos; ++j)
        max_score = std::max(max_score, s_row[j] * ctx.attention_scale);
      for (int64_t j = 0; j <= pos; ++j) p_row[j] = s_row[j] * ctx.attention_scale - max_score;
      ctx.exec.k.exp(p_row, pos + 1);  // vectorised (the scalar std::exp was ~10% of prefill)
      // Four double partial sums, combined in a fixed order.
      double partial[4] = {0.0, 0.0, 0.0, 0.0};
      int64_t j = 0;
      for (; j + 4 <= pos + 1; j += 4) {
        for (int u = 0; u < 4; ++u) partial[u] += p_row[j + u];
      }
      for (; j <= pos; ++j) partial[0] += p_row[j];
      const double sum = (partial[0] + partial[1]) + (partial[2] + partial[3]);
      ctx.exec.k.scale(static_cast<float>(1.0 / sum), p_row, pos + 1);
      std::fill(p_row + pos + 1, p_row + visible, 0.0f);  // causal mask (P V runs to `visible`)
    }
    out.resize(static_cast<size_t>(nq * d.dv));
    ctx.exec.k.gemm(nq, d.dv, visible, probs.data(), visible,
                    values.data() + tile.head * n_ctx * d.dv, d.dv, out.data(), d.dv);
    for (int64_t i = 0; i < nq; ++i)
      std::copy_n(out.data() + i * d.dv, d.dv, OutputRow(d, o, slice, tile, i));
  });
}

// The keys and values of the bf16 tiles (`--isa fast`): K_h as pair words [n_head][dk_pairs, n_ctx]
// (word (c, p) holds K_h[p, 2c] and K_h[p, 2c + 1]), V_h as [n_head][ceil(n_ctx / 2), dv] (word
// (j, c) holds V_h[2j, c] and V_h[2j + 1, c]), odd ends padded with 0.
struct Bf16KeysValues {
  int64_t n_ctx = 0;
  int64_t dk_pairs = 0;
  int64_t ctx_pairs = 0;
  std::span<const uint32_t> keys;
  std::span<const uint32_t> values;
};

// The context's keys and values in the bf16 tiles' layout, a chunk at a time.
Bf16KeysValues LayOutBf16(const LayerContext& ctx, const MlaWeights& w, const Dims& d,
                          const SequenceSlice& slice) {
  const KernelTable& k = ctx.exec.k;
  const int64_t n_ctx = slice.n_written;
  const int64_t dk_pairs = (d.dk + 1) / 2;
  const int64_t ctx_pairs = (n_ctx + 1) / 2;
  const std::span<uint32_t> keys =
      ctx.scratch.Alloc<uint32_t>(static_cast<size_t>(d.n_head * dk_pairs * n_ctx));
  const std::span<uint32_t> values =
      ctx.scratch.Alloc<uint32_t>(static_cast<size_t>(d.n_head * ctx_pairs * d.dv));
  ForEachExpandedChunk(ctx, w, d, slice, [&](const ExpandedChunk& e) {
    ctx.exec.pool.ParallelFor(d.n_head, [&](int64_t h, int) {
      const int64_t head_offset = h * (d.nope + d.dv);
      uint32_t* keys_h = keys.data() + h * dk_pairs * n_ctx + e.p0;
      uint32_t* values_h = values.data() + (h * ctx_pairs + e.p0 / 2) * d.dv;
      // The rope part is even (config.cc), so with an even nope part no pair straddles the two
      // and both are laid out in place; else each block of positions is first gathered as
      // [nope ; rope].
      if (d.nope % 2 == 0) {
        Bf16PairColumnsWith(k, e.kv + head_offset, d.kv_width, e.n, d.nope / 2, keys_h, n_ctx);
        Bf16PairColumnsWith(k, e.k_pe, d.rope, e.n, d.rope / 2, keys_h + d.nope / 2 * n_ctx, n_ctx);
      } else {
        thread_local std::vector<float> block;  // [kPositionBlock, 2 dk_pairs], 0 past dk
        block.assign(static_cast<size_t>(kPositionBlock * 2 * dk_pairs), 0.0f);
        for (int64_t b0 = 0; b0 < e.n; b0 += kPositionBlock) {
          const int64_t nb = std::min(e.n - b0, kPositionBlock);
          for (int64_t i = 0; i < nb; ++i) {
            float* row = block.data() + i * 2 * dk_pairs;
            std::copy_n(e.kv + (b0 + i) * d.kv_width + head_offset, d.nope, row);
            std::copy_n(e.k_pe + (b0 + i) * d.rope, d.rope, row + d.nope);
          }
          Bf16PairColumnsWith(k, block.data(), 2 * dk_pairs, nb, dk_pairs, keys_h + b0, n_ctx);
        }
      }
      for (int64_t j = 0; 2 * j < e.n; ++j) {  // p0 and the chunk are even: pairs stay in one
        const float* even = e.kv + 2 * j * d.kv_width + head_offset + d.nope;
        Bf16PairRowsWith(k, even, 2 * j + 1 < e.n ? even + d.kv_width : nullptr, d.dv,
                         values_h + j * d.dv);
      }
    });
  });
  return {
      .n_ctx = n_ctx, .dk_pairs = dk_pairs, .ctx_pairs = ctx_pairs, .keys = keys, .values = values};
}

// bf16 tiles (`--isa fast`) over LayOutBf16's keys and values. Per query row: float32 scores, max
// and exp sum (kernel-table order), bf16 probabilities; O is normalised after P V.
void TilesBf16(const LayerContext& ctx, const Dims& d, const float* q, const SequenceSlice& slice,
               const Bf16KeysValues& e, float* o) {
  const KernelTable& k = ctx.exec.k;
  const int64_t n_ctx = e.n_ctx;
  const int64_t dk_pairs = e.dk_pairs;
  const int64_t ctx_pairs = e.ctx_pairs;
  const std::span<const uint32_t> keys = e.keys;
  const std::span<const uint32_t> values = e.values;
  ctx.exec.pool.ParallelFor(d.n_head * TileCount(slice), [&](int64_t item, int) {
    const QueryTile tile = TileOf(ctx, slice, item);
    const int64_t nq = tile.nq;
    const int64_t visible = tile.visible;
    const int64_t visible_pairs = (visible + 1) / 2;
    thread_local std::vector<uint16_t> q_tile, probs;
    thread_local std::vector<float> scores, zeros, inv_sum, out;
    q_tile.assign(static_cast<size_t>(nq * 2 * dk_pairs), 0);
    for (int64_t i = 0; i < nq; ++i)
      k.round_to_bf16(QueryRow(ctx, d, q, slice, tile, i), d.dk, q_tile.data() + i * 2 * dk_pairs);
    scores.resize(static_cast<size_t>(nq * visible));
    k.gemm_bf16_pairs(nq, visible, dk_pairs, reinterpret_cast<const uint32_t*>(q_tile.data()),
                      dk_pairs, keys.data() + tile.head * dk_pairs * n_ctx, n_ctx, scores.data(),
                      visible);
    zeros.assign(static_cast<size_t>(visible), 0.0f);
    probs.resize(static_cast<size_t>(nq * 2 * visible_pairs));
    inv_sum.resize(static_cast<size_t>(nq));
    for (int64_t i = 0; i < nq; ++i) {
      const int64_t n = PositionOf(ctx, slice, tile.q0 + i) + 1;  // causal: positions [0, n)
      float* s_row = scores.data() + i * visible;
      uint16_t* p_row = probs.data() + i * 2 * visible_pairs;
      const float max_score = k.scale_bias_max(s_row, ctx.attention_scale, zeros.data(), n);
      inv_sum[static_cast<size_t>(i)] = 1.0f / k.exp_shift_sum(s_row, max_score, n);
      k.round_to_bf16(s_row, n, p_row);
      std::fill(p_row + n, p_row + 2 * visible_pairs, uint16_t{0});
    }
    out.resize(static_cast<size_t>(nq * d.dv));
    k.gemm_bf16_pairs(nq, d.dv, visible_pairs, reinterpret_cast<const uint32_t*>(probs.data()),
                      visible_pairs, values.data() + tile.head * ctx_pairs * d.dv, d.dv, out.data(),
                      d.dv);
    for (int64_t i = 0; i < nq; ++i) {
      const float* src = out.data() + i * d.dv;
      float* dst = OutputRow(d, o, slice, tile, i);
      const float inv = inv_sum[static_cast<size_t>(i)];
      for (int c = 0; c < d.dv; ++c) dst[c] = src[c] * inv;
    }
  });
}

}  // namespace

void AttendNaiveFull(const LayerContext& ctx, const MlaWeights& w, const float* q,
                     const SequenceSlice& slice, float* o) {
  // The large temporaries live in the scratch arena (no fresh pages, no zero-fill per layer).
  const ScratchArena::Frame frame(ctx.scratch);
  const Dims d = DimsOf(ctx.config);
  if (ctx.exec.k.gemm_bf16_pairs != nullptr && ctx.exec.k.round_to_bf16 != nullptr) {
    TilesBf16(ctx, d, q, slice, LayOutBf16(ctx, w, d, slice), o);
  } else {
    TilesF32(ctx, w, d, q, slice, o);
  }
}

}  // namespace mlarun
