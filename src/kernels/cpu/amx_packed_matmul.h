// Products of packed bf16 weights (packed_bf16.h) for batches of 16 tokens or more by AMX tile
// dot products, written against the tile-unit interface of amx_tiles.h (the hardware in
// kernels_amx.cc, a software model in tests). One TDPBF16PS multiplies a [16, 32] bf16
// activation tile by a [32, 16] weight tile (16 column pairs of 16 rows: exactly 1 KB of one
// packed group) into a [16, 16] float32 accumulator tile, 8,192 multiply-adds per instruction.
//
// Symbols: T tokens (rows of an activation or accumulator tile, <= 16); g a 16-row weight group,
// the 16 columns of an accumulator tile; a step = 32 columns of W (16 pairs kk).
// Tile registers: 0..3 accumulators C[h][b] = tile 2h + b for token half h (tokens t0 + 16h ...)
// and group g0 + b; 4, 5 activations of half 0, 1; 6, 7 weights of group g0, g0 + 1.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/matmul.h"
#include "kernels/packed_bf16.h"

namespace mlarun::amx {

inline constexpr int64_t kStepCols = 32;  // bf16 columns per tile step
inline constexpr int64_t kStepWords =
    kStepCols / 2 * kBf16GroupRows;                        // packed words of a group per step
inline constexpr int64_t kBlockRows = 2 * kBf16GroupRows;  // two groups

// Accumulator tiles = the block's activation tiles (a0: tokens t0.., a1: tokens t0 + 16..,
// a0_step / a1_step elements per step) times groups b0, b1 over the first k_steps steps, in step
// order: the same chain of instructions for every output whatever the block's token count.
struct BlockOperands {
  const uint16_t* a0;
  const uint16_t* a1;
  int64_t a0_step;
  int64_t a1_step;
  const uint32_t* b0;
  const uint32_t* b1;
};

template <class Tiles>
void MultiplyBlock(Tiles& tiles, const BlockOperands& op, int64_t k_steps, bool two_halves) {
  tiles.ZeroAcc(0);
  tiles.ZeroAcc(1);
  if (two_halves) {
    tiles.ZeroAcc(2);
    tiles.ZeroAcc(3);
  }
  constexpr int64_t kRowBytes = kBf16TileCols * sizeof(uint16_t);
  for (int64_t s = 0; s < k_steps; ++s) {
    tiles.LoadB(0, op.b0 + s * kStepWords, kTileRowBytes);
    tiles.LoadB(1, op.b1 + s * kStepWords, kTileRowBytes);
    tiles.LoadA(0, op.a0 + s * op.a0_step, kRowBytes);
    tiles.Dot(0);
    tiles.Dot(1);
    if (two_halves) {
      tiles.LoadA(1, op.a1 + s * op.a1_step, kRowBytes);
      tiles.Dot(2);
      tiles.Dot(3);
    }
  }
}

// c[t * ldc + 16 b + i] = accumulator (t, group b, lane i).
template <class Tiles>
void StoreBlock(Tiles& tiles, float* c, int64_t ldc, bool two_halves) {
  const int64_t stride = ldc * static_cast<int64_t>(sizeof(float));
  tiles.StoreAcc(0, c, stride);
  tiles.StoreAcc(1, c + kBf16GroupRows, stride);
  if (two_halves) {
    tiles.StoreAcc(2, c + kBf16GroupRows * ldc, stride);
    tiles.StoreAcc(3, c + kBf16GroupRows * ldc + kBf16GroupRows, stride);
  }
}

// The part of a product the tiles cannot take: a block at the edge of the row range, or columns
// past the last whole step (added after the tiles' sums, pair by pair in column order; products
// of bf16 values are exact in float32).
struct EdgeBlock {
  const uint16_t* x_tiles;  // the activation tiles of all n_tokens tokens
  int64_t n_tokens;
  int64_t t0;  // first token of the block
  int64_t block_tokens;
  int64_t cols;
  int64_t tail_pair;          // first column pair not in a step
  const uint32_t* groups[2];  // the block's packed groups
  int64_t first_row;          // W row of column 0 of the block
};

inline void FinishEdgeBlock(const EdgeBlock& e, const float* buf, int64_t row_begin,
                            int64_t row_end, float* y, int64_t ldy) {
  for (int64_t t = 0; t < e.block_tokens; ++t) {
    const int64_t token = e.t0 + t;
    for (int64_t j = 0; j < kBlockRows; ++j) {
      const int64_t r = e.first_row + j;
      if (r < row_begin || r >= row_end) continue;
      float acc = buf[t * kBlockRows + j];
      const uint32_t* words = e.groups[j / kBf16GroupRows] + j % kBf16GroupRows;
      for (int64_t kk = e.tail_pair; kk < e.cols / 2; ++kk) {
        const uint32_t word = words[kk * kBf16GroupRows];
        const int64_t xi = Bf16TileIndex(token, 2 * kk, e.n_tokens, e.cols);
        acc += BF16ToF32(e.x_tiles[xi]) * BF16ToF32(static_cast<uint16_t>(word & 0xffff));
        acc += BF16ToF32(e.x_tiles[xi + 1]) * BF16ToF32(static_cast<uint16_t>(word >> 16));
      }
      y[token * ldy + (r - row_begin)] = acc;
    }
  }
}

// Packed bf16 weights, rows [row_begin, row_end), against the activation tiles of n_tokens
// tokens. Chunks of groups (up to kChunkBytes of weights) outer; in a chunk, blocks of 32 tokens,
// then pairs of groups: a block's activations and the chunk's weights stay in L2.
template <class Tiles>
void MatMulPackedBf16Tiles(Tiles& tiles, const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                           const uint16_t* x_tiles, int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t cols = w.cols;
  const int64_t k_steps = cols / kStepCols;
  const bool has_tail = k_steps * kStepCols < cols;
  const auto* base = static_cast<const uint32_t*>(w.data);
  const int64_t n_groups = PackedBf16Groups(w.rows);
  const int64_t g_begin = row_begin / kBf16GroupRows;
  const int64_t g_end = (row_end + kBf16GroupRows - 1) / kBf16GroupRows;
  alignas(64) float buf[kBlockTokens * kBlockRows];

  auto run_block = [&](int64_t t0, int64_t tokens, int64_t g0) {
    const int64_t g1 = g0 + 1 < n_groups ? g0 + 1 : g0;  // past the matrix: discarded
    const bool two_halves = tokens > kBf16GroupRows;
    const int64_t rows0 = std::min(tokens, kBf16GroupRows);
    const BlockOperands op{.a0 = x_tiles + Bf16TileBlockStart(t0, cols),
                           .a1 = x_tiles + Bf16TileBlockStart(t0 + kBf16GroupRows, cols),
                           .a0_step = rows0 * kBf16TileCols,
                           .a1_step = (tokens - rows0) * kBf16TileCols,
                           .b0 = base + PackedBf16GroupWords(g0, cols),
                           .b1 = base + PackedBf16GroupWords(g1, cols)};
    MultiplyBlock(tiles, op, k_steps, two_halves);
    const int64_t first_row = g0 * kBf16GroupRows;
    if (!has_tail && first_row >= row_begin && first_row + kBlockRows <= row_end) {
      float* c = y + t0 * ldy + (first_row - row_begin);
      StoreBlock(tiles, c, ldy, two_halves);
      return;
    }
    StoreBlock(tiles, buf, kBlockRows, two_halves);
    const EdgeBlock edge{.x_tiles = x_tiles,
                         .n_tokens = n_tokens,
                         .t0 = t0,
                         .block_tokens = tokens,
                         .cols = cols,
                         .tail_pair = k_steps * kStepCols / 2,
                         .groups = {op.b0, op.b1},
                         .first_row = first_row};
    FinishEdgeBlock(edge, buf, row_begin, row_end, y, ldy);
  };

  const int64_t group_bytes = kBf16GroupRows * cols * static_cast<int64_t>(sizeof(uint16_t));
  ForEachTokenBlock(tiles, n_tokens, g_begin, g_end, group_bytes, kTileRowBytes, run_block);
}

}  // namespace mlarun::amx
