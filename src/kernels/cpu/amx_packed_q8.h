// Products of packed Q8 weights (quant.h: 16-row groups, blocks of 32 columns as 8 quads of 4
// bytes per row, stored as w + 128, float16 block scales) with Q8 activations for batches of 16
// tokens or more, by AMX-INT8 tile dot products, written against the tile-unit interface of
// amx_tiles.h (the hardware in kernels_amx.cc, a software model in tests).
//
// A packed block of a group is already a B tile: 8 rows (quads k) of 64 bytes (16 weight rows x 4
// bytes). With A = 16 tokens' 32 int8 activations of the block (rows of Q8Activations, loaded in
// place), one TDPBSUD (signed A, unsigned B) gives, for 16 tokens x 16 weight rows,
//   C[t][n] = sum_c x[t, c] (w[n, c] + 128) = isum[t][n] + 128 sum_c x[t, c],
// exact in int32. Each block is then scaled as the scalar reference does (ref/kernels_scalar.cc):
//   y[t, n] = fma(float(C[t][n] - 128 xsum[t, b]), f16(w_scale[n, b]) * x_scale[t, b], y[t, n])
// for b = 0, 1, ... in order, so the result is bitwise that of every other Q8 kernel, whatever
// the batch or row range.
//
// Speed (docs/performance.md, 2026-12-04): the first form, which started the accumulators from a
// tile of offsets just written by vector stores and scaled each block right after its tile
// stores, ran at 146-190 GFLOP/s per core on an Emerald Rapids VM (CPUID family 6 model 207),
// below the VNNI kernel's 199-346 in the same minutes, although one TDPBSUD there takes 6.5 ns
// (2.5 T int8 ops/s at 32 bytes of reduction). The likely cause, not isolated: a tile load of
// data vector stores have just written, and vector loads of data a tile store has just written,
// wait for the store to reach the cache, which serialises the two units. This form zeroes the
// accumulators (TILEZERO), adds the offsets in the scaling, and scales each block one block later,
// while the tiles multiply the next; it is bitwise tested on the tile model and not yet timed (no
// AMX machine since), so the AMX tables take it for matmul_rows_q8 only where it measures faster
// than the VNNI kernel, timed on the first batch of 16+ tokens (KernelTable::matmul_rows_q8_tiles,
// Q8TilesSpeedup).
//
// Symbols: t token, n weight row, b block of 32 columns (the reduction of one tile product),
// g group of 16 rows, h token half of a 32-token block.
// Tile registers: 0..3 accumulators C[h][j] = tile 2h + j (tokens t0 + 16h ..., group g0 + j);
// 4, 5 activations of half 0, 1; 6, 7 the block of group g0, g0 + 1.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace mlarun::amx {

inline constexpr int64_t kQ8PackedBlockBytes = int64_t{kQ8Block} * kQ8GroupRows;  // one B tile

// The scaling of a token half's two accumulator tiles (groups j = 0, 1), portable (for the tile
// model; kernels_amx.cc has the AVX-512 version): for m < rows and lane i < 16, with
// a = acc[m * acc_stride + 16 j + i], o = x_offsets[m * x_stride], s = x_scales[m * x_stride]:
//   a = fma(float(c[j][m][i] + o), f16(w_scales[j][i]) * s, a).
struct Q8TileScaling {
  const int32_t (*c[2])[kQ8GroupRows];  // [rows, 16] the two tiles' sums (groups 0, 1)
  int rows;
  const uint16_t* w_scales[2];  // [16] each group's scales of the block
  const float* x_scales;        // token m's scale of the block at m * x_stride
  const int32_t* x_offsets;     // token m's block offset (-128 x its sum) at m * x_stride
  int64_t x_stride;
  float* acc;  // [rows, acc_stride]: 16 lanes of group 0, then 16 of group 1
  int64_t acc_stride;
};

struct ScalarQ8Lanes {
  static void ScaleAdd(const Q8TileScaling& s) {
    for (int64_t m = 0; m < s.rows; ++m) {
      const float xs = s.x_scales[m * s.x_stride];
      const int32_t offset = s.x_offsets[m * s.x_stride];
      for (int64_t j = 0; j < 2; ++j) {
        for (int64_t i = 0; i < kQ8GroupRows; ++i) {
          float& a = s.acc[m * s.acc_stride + kQ8GroupRows * j + i];
          a = std::fma(static_cast<float>(s.c[j][m][i] + offset), F16ToF32(s.w_scales[j][i]) * xs,
                       a);
        }
      }
    }
  }
};

// Packed Q8 weights, rows [row_begin, row_end), against all x.n_tokens tokens: y[t * ldy + r -
// row_begin]. Chunks of groups (up to kChunkBytes of weights) outer; in a chunk, blocks of 32
// tokens, then pairs of groups, each over every 32-column block in order.
template <class Tiles, class Lanes>
void MatMulPackedQ8Tiles(Tiles& tiles, const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                         const Q8Activations& x, float* y, int64_t ldy) {
  const int64_t n_blocks = x.padded_cols / kQ8Block;
  const auto* values = static_cast<const uint8_t*>(w.data);
  const int64_t n_groups = Q8Groups(w.rows);
  const int64_t g_begin = row_begin / kQ8GroupRows;
  const int64_t g_end = (row_end + kQ8GroupRows - 1) / kQ8GroupRows;
  // [block parity, accumulator, token, lane]: the tiles' sums, scaled one block later.
  alignas(64) int32_t sums[2][4][kQ8GroupRows][kQ8GroupRows];
  alignas(64) float acc[kBlockTokens][2 * kQ8GroupRows];  // [token, row of the group pair]
  const int64_t c_stride = kQ8GroupRows * static_cast<int64_t>(sizeof(int32_t));

  auto run_block = [&](int64_t t0, int64_t tokens, int64_t g0) {
    const int64_t g1 = g0 + 1 < n_groups ? g0 + 1 : g0;  // past the matrix: discarded
    const int rows[2] = {static_cast<int>(std::min(tokens, int64_t{kQ8GroupRows})),
                         static_cast<int>(tokens - std::min(tokens, int64_t{kQ8GroupRows}))};
    const int halves = rows[1] > 0 ? 2 : 1;
    const uint8_t* w_values[2] = {values + PackedQ8GroupValues(g0, n_blocks),
                                  values + PackedQ8GroupValues(g1, n_blocks)};
    const uint16_t* w_scales[2] = {w.q8_scales + PackedQ8GroupScales(g0, n_blocks),
                                   w.q8_scales + PackedQ8GroupScales(g1, n_blocks)};
    for (int64_t t = 0; t < tokens; ++t) std::fill_n(acc[t], 2 * int64_t{kQ8GroupRows}, 0.0f);
    auto scale_block = [&](int64_t b) {
      for (int64_t h = 0; h < halves; ++h) {
        const int64_t t = t0 + kQ8GroupRows * h;
        Lanes::ScaleAdd(
            {.c = {sums[b % 2][2 * h], sums[b % 2][2 * h + 1]},
             .rows = rows[h],
             .w_scales = {w_scales[0] + b * kQ8GroupRows, w_scales[1] + b * kQ8GroupRows},
             .x_scales = x.Scales(t) + b,
             .x_offsets = x.Offsets(t) + b,
             .x_stride = n_blocks,
             .acc = acc[t - t0],
             .acc_stride = 2 * int64_t{kQ8GroupRows}});
      }
    };
    for (int64_t b = 0; b < n_blocks; ++b) {
      tiles.LoadB(0, w_values[0] + b * kQ8PackedBlockBytes, kTileRowBytes);
      tiles.LoadB(1, w_values[1] + b * kQ8PackedBlockBytes, kTileRowBytes);
      for (int h = 0; h < halves; ++h) {
        const int64_t first_token = t0 + int64_t{kQ8GroupRows} * h;
        const int acc0 = 2 * h;  // accumulators acc0 (group g0) and acc0 + 1 (g1)
        tiles.ZeroAcc(acc0);
        tiles.ZeroAcc(acc0 + 1);
        tiles.LoadA(h, x.Row(first_token) + b * kQ8Block, x.padded_cols);
        tiles.DotI8(acc0);
        tiles.DotI8(acc0 + 1);
        tiles.StoreAcc(acc0, sums[b % 2][acc0], c_stride);
        tiles.StoreAcc(acc0 + 1, sums[b % 2][acc0 + 1], c_stride);
      }
      if (b > 0) scale_block(b - 1);
    }
    scale_block(n_blocks - 1);
    const int64_t first_row = g0 * kQ8GroupRows;
    const int64_t r0 = std::max(row_begin, first_row);
    const int64_t r1 = std::min(row_end, first_row + 2 * int64_t{kQ8GroupRows});
    for (int64_t t = 0; t < tokens; ++t) {
      std::copy(acc[t] + (r0 - first_row), acc[t] + (r1 - first_row),
                y + (t0 + t) * ldy + (r0 - row_begin));
    }
  };

  ForEachTokenBlock(tiles, x.n_tokens, g_begin, g_end, kQ8GroupRows * x.padded_cols, kQ8Block,
                    run_block);
}

}  // namespace mlarun::amx
