// Products of packed Q8 weights (quant.h: 16-row groups of int8 quads, float16 block scales)
// with Q8-quantised activations. Included by simd_impl.h inside a translation unit compiled for
// the ISA, after F, kW and ForEachTokenTile; V supplies the integer dot products (VNNI's
// vpdpbusd, or AVX2's sign-split maddubs) and their Q8 traits.
//
// Symbols: g a group of 16 rows, b a block of 32 columns, k a quad of 4 columns, t a token.
//   isum[g, t] = sum_k w_quad[g, b, k] . x_quad[t, b, k]   (exact int32)
//   y[16 g + i, t] = sum_b float(isum[g, t][i]) * (w_scale[16 g + i, b] * x_scale[t, b])

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/token_tiles.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace mlarun::SIMD_NAMESPACE {

// Packed Q8 tiles (layout in quant.h). A group of 16 rows is kParts vectors of kW lanes, lane i
// of part p being row 16 g + p kW + i. Per block of 32 columns each (part, token) pair sums its
// 8 quads exactly in int32 (V::DotPacked), then adds float(isum) * (w_scale * x_scale) with one
// fused multiply-add: every output is the same sequence of operations as the scalar reference,
// whatever the tile, row range or batch (bitwise equal to it, and batch invariant).
constexpr int kParts = kQ8GroupRows / kW;
constexpr int64_t kPackedQuadBytes = int64_t{4} * kQ8GroupRows;             // 64
constexpr int64_t kPackedBlockBytes = kQ8QuadsPerBlock * kPackedQuadBytes;  // 512
// The first token tile of a block of rows (all of a product of up to 4 tokens: decode, and the
// experts of batched decode) prefetches each group's stream 4 KB ahead: in a simulated MoE decode
// step (12 random 3 MB experts per batch) this and 64-row work items took the packed GEMV from
// 20-23 to 28-32 GB/s on 2 threads (Intel Xeon VM, 2026-11-30; the hardware prefetchers restart
// at every 4 KiB page). Not for single tokens on AMD's AVX-512 cores (kernels_avx512.cc).
// Prefetching in the first tile of larger products too (2026-12-01, AMD EPYC, BM_MatMul and
// BM_ExpertBatch): 16 tokens 688 -> 750 GFLOP/s, experts with 5 tokens 30 -> 34 GB/s, 512 tokens
// unchanged.
constexpr int64_t kPackedPrefetchBytes = 4096;

// How a token tile prefetches weights: not at all, 4 KB ahead into L1 (the tile that brings a row
// block in from memory), or the next row block into L2 (a later tile, while the block is in L2).
enum class Q8Prefetch { kNone, kAhead, kNextBlock };

// acc[g * kParts + p][t] = rows of part p of group g . token t0 + t, for g < MG, t < NT.
// kNextBlock prefetches `next_block` bytes past each quad.
template <int MG, int NT, Q8Prefetch kPrefetch>
inline void PackedTileQ8(const uint8_t* const* w, const uint16_t* const* w_scales,
                         const Q8Activations& x, int64_t t0, int64_t next_block,
                         F (&acc)[MG * kParts][NT]) {
  for (int v = 0; v < MG * kParts; ++v) {
    for (int t = 0; t < NT; ++t) acc[v][t] = V::Zero();
  }
  const int64_t n_blocks = x.padded_cols / kQ8Block;
  typename V::Q8Row x_rows[NT];
  const float* x_scales[NT];
  for (int t = 0; t < NT; ++t) {
    x_rows[t] = V::Q8RowOf(x, t0 + t);
    x_scales[t] = x.Scales(t0 + t);
  }
  for (int64_t b = 0; b < n_blocks; ++b) {
    typename V::Q isum[MG * kParts][NT];
    for (int t = 0; t < NT; ++t) {
      const typename V::Q init = V::PackedInit(x_rows[t], b);
      for (int v = 0; v < MG * kParts; ++v) isum[v][t] = init;
    }
    for (int k = 0; k < kQ8QuadsPerBlock; ++k) {
      typename V::Q8Quad xq[NT];
      for (int t = 0; t < NT; ++t) {
        xq[t] = V::BroadcastQuad(x_rows[t], b * kQ8Block + int64_t{4} * k);
      }
      for (int g = 0; g < MG; ++g) {
        const uint8_t* quad = w[g] + b * kPackedBlockBytes + k * kPackedQuadBytes;
        if constexpr (kPrefetch == Q8Prefetch::kAhead) {
          _mm_prefetch(reinterpret_cast<const char*>(quad + kPackedPrefetchBytes), _MM_HINT_T0);
        } else if constexpr (kPrefetch == Q8Prefetch::kNextBlock) {
          _mm_prefetch(reinterpret_cast<const char*>(quad + next_block), _MM_HINT_T1);
        }
        for (int p = 0; p < kParts; ++p) {
          const typename V::Q wv = V::LoadPacked(quad + static_cast<int64_t>(p) * kW * 4);
          for (int t = 0; t < NT; ++t)
            isum[g * kParts + p][t] = V::DotPacked(isum[g * kParts + p][t], wv, xq[t]);
        }
      }
    }
    for (int g = 0; g < MG; ++g) {
      for (int p = 0; p < kParts; ++p) {
        const F ws = V::LoadF16(w_scales[g] + b * kQ8GroupRows + static_cast<int64_t>(p) * kW);
        for (int t = 0; t < NT; ++t) {
          acc[g * kParts + p][t] =
              V::Fma(V::ToFloat(isum[g * kParts + p][t]), V::Mul(ws, V::Set1(x_scales[t][b])),
                     acc[g * kParts + p][t]);
        }
      }
    }
  }
}

// Groups [g0, g0 + MG) against tokens [t0, t0 + NT); writes the rows within [row_begin, row_end).
template <int MG, int NT, Q8Prefetch kPrefetch>
inline void PackedGroupsQ8(const WeightMatrix& w, int64_t g0, int64_t row_begin, int64_t row_end,
                           const Q8Activations& x, int64_t t0, int64_t next_block, float* y,
                           int64_t ldy) {
  const int64_t n_blocks = x.padded_cols / kQ8Block;
  const uint8_t* values[MG];
  const uint16_t* scales[MG];
  for (int g = 0; g < MG; ++g) {
    values[g] = static_cast<const uint8_t*>(w.data) + PackedQ8GroupValues(g0 + g, n_blocks);
    scales[g] = w.q8_scales + PackedQ8GroupScales(g0 + g, n_blocks);
  }
  F acc[MG * kParts][NT];
  PackedTileQ8<MG, NT, kPrefetch>(values, scales, x, t0, next_block, acc);
  for (int v = 0; v < MG * kParts; ++v) {
    const int64_t row0 = g0 * kQ8GroupRows + static_cast<int64_t>(v) * kW;
    for (int t = 0; t < NT; ++t) {
      float* out = y + (t0 + t) * ldy;
      if (row0 >= row_begin && row0 + kW <= row_end) {
        V::Store(out + (row0 - row_begin), acc[v][t]);
        continue;
      }
      float lanes[kW];
      V::Store(lanes, acc[v][t]);
      for (int i = 0; i < kW; ++i) {
        if (row0 + i >= row_begin && row0 + i < row_end) out[row0 + i - row_begin] = lanes[i];
      }
    }
  }
}

// Rows of groups [g0, g1), a row block, against tokens [t, t + kTokens).
template <int kTokens, Q8Prefetch kPrefetch>
void PackedTokenTileQ8(const WeightMatrix& w, int64_t g0, int64_t g1, int64_t row_begin,
                       int64_t row_end, const Q8Activations& x, int64_t t, int64_t next_block,
                       float* y, int64_t ldy) {
  constexpr int kMG = kTokens == 1 ? V::kQ8TileGroupsOneToken : V::kQ8TileGroups;
  int64_t g = g0;
  for (; g + kMG <= g1; g += kMG)
    PackedGroupsQ8<kMG, kTokens, kPrefetch>(w, g, row_begin, row_end, x, t, next_block, y, ldy);
  for (; g < g1; ++g)
    PackedGroupsQ8<1, kTokens, kPrefetch>(w, g, row_begin, row_end, x, t, next_block, y, ldy);
}

// kFirstTile: how the first token tile of each row block prefetches (kAhead, or kNone where the
// hardware prefetchers do better alone: MatMulRowsQ8HardwarePrefetchOneToken).
template <Q8Prefetch kFirstTile>
void MatMulRowsQ8With(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                      const Q8Activations& x, float* y, int64_t ldy) {
  if (V::kQ8SignSplit) x.RequireSplit("matmul_rows_q8");
  const int64_t g_end = (row_end + kQ8GroupRows - 1) / kQ8GroupRows;
  // Blocks of 4 groups (64 rows, 128 KB at 2,048 columns) stay in L2 while the token tiles pass.
  // The first token tile brings the block in from memory and prefetches ahead of itself (the
  // hardware prefetchers ramp up too slowly on these short streams); later tiles find it in L2,
  // and the second one prefetches the next block of the range into L2 meanwhile, so the next
  // first tile does not wait for memory (a product of 5-16 tokens is as much memory- as
  // compute-bound).
  constexpr int64_t kGroupsPerBlock = 4;
  const int64_t n_blocks = x.padded_cols / kQ8Block;
  const int64_t next_block = PackedQ8GroupValues(kGroupsPerBlock, n_blocks);
  for (int64_t g0 = row_begin / kQ8GroupRows; g0 < g_end; g0 += kGroupsPerBlock) {
    const int64_t g1 = std::min(g_end, g0 + kGroupsPerBlock);
    const bool last = g1 == g_end;
    ForEachTokenTile<V::kQ8TileTokens>(x.n_tokens, [&](auto nt, int64_t t) {
      constexpr int kTokens = decltype(nt)::value;
      if (t == 0) {
        PackedTokenTileQ8<kTokens, kFirstTile>(w, g0, g1, row_begin, row_end, x, t, next_block, y,
                                               ldy);
      } else if (t == V::kQ8TileTokens && !last) {
        PackedTokenTileQ8<kTokens, Q8Prefetch::kNextBlock>(w, g0, g1, row_begin, row_end, x, t,
                                                           next_block, y, ldy);
      } else {
        PackedTokenTileQ8<kTokens, Q8Prefetch::kNone>(w, g0, g1, row_begin, row_end, x, t,
                                                      next_block, y, ldy);
      }
    });
  }
}

void MatMulRowsQ8(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const Q8Activations& x,
                  float* y, int64_t ldy) {
  MatMulRowsQ8With<Q8Prefetch::kAhead>(w, row_begin, row_end, x, y, ldy);
}

// One token against the groups of rows [row_begin, row_end): tiles of V::kQ8TileGroupsOneTokenWide
// groups (as many weight streams), then of 4 and of 1 for the rest, no software prefetch and no row
// blocks (which only serve the reuse of a block across token tiles).
void OneTokenWideQ8(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                    const Q8Activations& x, float* y, int64_t ldy) {
  constexpr int kWide = V::kQ8TileGroupsOneTokenWide;
  const int64_t g_end = (row_end + kQ8GroupRows - 1) / kQ8GroupRows;
  int64_t g = row_begin / kQ8GroupRows;
  for (; g + kWide <= g_end; g += kWide)
    PackedGroupsQ8<kWide, 1, Q8Prefetch::kNone>(w, g, row_begin, row_end, x, 0, 0, y, ldy);
  for (; g + 4 <= g_end; g += 4)
    PackedGroupsQ8<4, 1, Q8Prefetch::kNone>(w, g, row_begin, row_end, x, 0, 0, y, ldy);
  for (; g < g_end; ++g)
    PackedGroupsQ8<1, 1, Q8Prefetch::kNone>(w, g, row_begin, row_end, x, 0, 0, y, ldy);
}

// The same products (bitwise: the tiling and prefetches change no value), but single-token
// products (decode) leave their streams to the hardware prefetchers and read 8 groups' streams at
// a time: the AVX-512 table's choice on AMD CPUs (kernels_avx512.cc).
void MatMulRowsQ8HardwarePrefetchOneToken(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                                          const Q8Activations& x, float* y, int64_t ldy) {
  if (x.n_tokens == 1) {
    OneTokenWideQ8(w, row_begin, row_end, x, y, ldy);
  } else {
    MatMulRowsQ8With<Q8Prefetch::kAhead>(w, row_begin, row_end, x, y, ldy);
  }
}

}  // namespace mlarun::SIMD_NAMESPACE
