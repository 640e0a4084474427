// The AMX tile unit as the tile kernels (amx_pair_gemm.h, amx_packed_matmul.h, amx_packed_q8.h)
// use it: the LDTILECFG operand and a fixed assignment of the 8 tile registers. The kernels are
// templates on a `Tiles` type with these operations, so that they run on the hardware
// (kernels_amx.cc) and, in tests, on a software model that checks every configuration and operand
// shape (tests/kernels/amx_tile_model.h):
//   Configure(const TileConfig&)           LDTILECFG (zeroes every tile)
//   Release()                              TILERELEASE
//   ZeroAcc(acc)                           TILEZERO of accumulator acc (tile acc, 0..3)
//   LoadAcc(acc, const void*, stride)      TILELOADD of accumulator acc (stride in bytes)
//   StoreAcc(acc, void*, stride)           TILESTORED of accumulator acc
//   LoadA(half, const void*, stride)       TILELOADD of tile 4 + half (A: row half `half`)
//   LoadB(half, const void*, stride)       TILELOADD of tile 6 + half (B: column half `half`)
//   Dot(acc)                               TDPBF16PS tile acc, tile 4 + acc / 2, tile 6 + acc % 2
//   DotI8(acc)                             TDPBSUD, the same tiles
// Accumulator acc = 2h + b holds row half h and column half b of a block of up to 32 x 32
// outputs. TDPBF16PS (Intel Architecture Instruction Set Extensions Programming Reference,
// ch. 3): C[m][n] += A[m].bf16[2k] * B[k].bf16[2n] + A[m].bf16[2k+1] * B[k].bf16[2n+1] over the
// tiles' k, with #UD unless A.colsb / 4 == B.rows, C.rows == A.rows and C.colsb == B.colsb.
// TDPBSUD (same reference; AMX-INT8): int32 C[m][n] += sum_i<4 int8 A[m].byte[4k+i] *
// uint8 B[k].byte[4n+i] over k, exact (wrapping only past 2^31), same shape rules.
#pragma once

#include <cstdint>

namespace mlarun::amx {

inline constexpr int kTileRows = 16;      // rows of a full tile
inline constexpr int kTileRowBytes = 64;  // bytes of a full tile row

// The 64-byte operand of LDTILECFG (palette 1: 8 tiles of up to 16 rows of 64 bytes).
struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved0[14] = {};
  uint16_t colsb[8] = {};
  uint8_t reserved1[16] = {};
  uint8_t rows[8] = {};
  uint8_t reserved2[8] = {};
};
static_assert(sizeof(TileConfig) == 64);

// The tiles of a block with rows[h] output rows in row half h and cols[b] output columns in
// column half b (0: that half unused, its tiles unconfigured), over k_bytes bytes of the
// reduction per product (the A tiles' row length; the B tiles have k_bytes / 4 rows).
struct BlockShape {
  int rows[2] = {0, 0};
  int cols[2] = {0, 0};
  int k_bytes = kTileRowBytes;
  bool operator==(const BlockShape&) const = default;
};

inline TileConfig TileConfigFor(const BlockShape& s) {
  TileConfig config;
  auto set = [&config](int tile, int rows, int colsb) {
    config.rows[tile] = static_cast<uint8_t>(rows);
    config.colsb[tile] = static_cast<uint16_t>(colsb);
  };
  for (int h = 0; h < 2; ++h) {
    if (s.rows[h] == 0) continue;
    set(4 + h, s.rows[h], s.k_bytes);
    for (int b = 0; b < 2; ++b) {
      if (s.cols[b] > 0) set(2 * h + b, s.rows[h], 4 * s.cols[b]);
    }
  }
  for (int b = 0; b < 2; ++b) {
    if (s.cols[b] > 0) set(6 + b, s.k_bytes / 4, 4 * s.cols[b]);
  }
  return config;
}

inline constexpr int64_t kBlockTokens = int64_t{2} * kTileRows;  // two tiles of 16 tokens
// Weights of the groups worked on together (reused from L2 by every block of 32 tokens).
inline constexpr int64_t kChunkBytes = int64_t{512} * 1024;

// The order in which the tile products of weights in 16-row groups (group_bytes bytes each) walk
// a product: chunks of up to kChunkBytes of the groups [g_begin, g_end) outer (an even number of
// groups, at least 2); in a chunk, blocks of kBlockTokens tokens and then the remaining 1..31,
// each against every pair of groups (g0, g0 + 1). The tiles are configured for each block size:
// rows0 + rows1 tokens (rows1 = 0 for 16 or fewer) in the A and accumulator tiles, two groups of
// 16 columns, k_bytes of the reduction per product; run_block(t0, tokens, g0) does one block.
// Releases the tiles at the end.
template <class Tiles, class BlockFn>
void ForEachTokenBlock(Tiles& tiles, int64_t n_tokens, int64_t g_begin, int64_t g_end,
                       int64_t group_bytes, int k_bytes, BlockFn run_block) {
  // (Not a function passed in: an inline function whose address is taken becomes a weak symbol
  // of the AMX object, which baseline code could bind to: tests/kernels/isa_symbols_test.sh.)
  auto block_config = [k_bytes](int rows0, int rows1) {
    return TileConfigFor(
        {.rows = {rows0, rows1}, .cols = {kTileRows, kTileRows}, .k_bytes = k_bytes});
  };
  const int64_t fit = kChunkBytes / group_bytes / 2 * 2;
  const int64_t chunk_groups = fit > 2 ? fit : 2;
  const int64_t full_blocks = n_tokens / kBlockTokens;
  const int64_t rest = n_tokens - full_blocks * kBlockTokens;
  for (int64_t c0 = g_begin; c0 < g_end; c0 += chunk_groups) {
    const int64_t c1 = c0 + chunk_groups < g_end ? c0 + chunk_groups : g_end;
    if (full_blocks > 0) {
      tiles.Configure(block_config(kTileRows, kTileRows));
      for (int64_t b = 0; b < full_blocks; ++b) {
        for (int64_t g0 = c0; g0 < c1; g0 += 2) run_block(b * kBlockTokens, kBlockTokens, g0);
      }
    }
    if (rest > 0) {
      const int rows0 = static_cast<int>(rest < kTileRows ? rest : kTileRows);
      tiles.Configure(block_config(rows0, static_cast<int>(rest) - rows0));
      for (int64_t g0 = c0; g0 < c1; g0 += 2) run_block(full_blocks * kBlockTokens, rest, g0);
    }
  }
  tiles.Release();
}

}  // namespace mlarun::amx
