// AMX-BF16 kernels: products of packed bf16 weights (packed_bf16.h) for batches of 16 tokens or
// more, and the bf16 pair GEMM of the prefill's tiled attention (amx_pair_gemm.h), done by tile
// dot products. One tdpbf16ps multiplies a [16, 32] bf16 activation
// tile by a [32, 16] weight tile (16 column pairs of 16 rows: exactly 1 KB of one packed group)
// into a [16, 16] float32 accumulator tile, 8,192 multiply-adds per instruction (Intel
// Architecture Instruction Set Extensions Programming Reference, ch. 3, TDPBF16PS). Compiled with
// -mamx-tile -mamx-bf16 on top of the AVX-512 flags; only called where IsaSupported(kAmx), i.e.
// the CPU has AMX and Linux granted the process the tile state (isa.cc).
//
// Symbols: T tokens (rows of an activation or accumulator tile, <= 16); g a 16-row weight group,
// the 16 columns of an accumulator tile; a step = 32 columns of W (16 pairs kk).
// Tile registers: 0..3 accumulators C[h][b] = tile 2h + b for token half h (tokens t0 + 16h ...)
// and group g0 + b; 4, 5 activations of half 0, 1; 6, 7 weights of group g0, g0 + 1.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cpu/amx_pair_gemm.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/packed_bf16.h"

namespace mlarun::amx {

namespace {

constexpr int64_t kStepCols = 32;                               // bf16 columns per tile step
constexpr int64_t kStepWords = kStepCols / 2 * kBf16GroupRows;  // packed words of a group per step
constexpr int64_t kBlockTokens = 32;                            // two tiles of 16 tokens
constexpr int64_t kBlockRows = 2 * kBf16GroupRows;              // two groups
// Weights of the groups worked on together (reused from L2 by every block of 32 tokens).
constexpr int64_t kChunkBytes = int64_t{512} * 1024;

// Configures the tiles for blocks of rows0 + rows1 tokens (rows1 = 0: the half-1 tiles unused).
void ConfigureTiles(int rows0, int rows1) {
  TileConfig config;
  auto set = [&config](int tile, int rows) {
    config.rows[tile] = static_cast<uint8_t>(rows);
    config.colsb[tile] = 64;
  };
  for (int tile : {0, 1, 4}) set(tile, rows0);
  if (rows1 > 0) {
    for (int tile : {2, 3, 5}) set(tile, rows1);
  }
  set(6, 16);
  set(7, 16);
  _tile_loadconfig(&config);
}

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

template <bool kTwoHalves>
inline void MultiplyBlock(const BlockOperands& op, int64_t k_steps) {
  _tile_zero(0);
  _tile_zero(1);
  if constexpr (kTwoHalves) {
    _tile_zero(2);
    _tile_zero(3);
  }
  constexpr int64_t kRowBytes = kBf16TileCols * sizeof(uint16_t);
  for (int64_t s = 0; s < k_steps; ++s) {
    _tile_loadd(6, op.b0 + s * kStepWords, 64);
    _tile_loadd(7, op.b1 + s * kStepWords, 64);
    _tile_loadd(4, op.a0 + s * op.a0_step, kRowBytes);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (kTwoHalves) {
      _tile_loadd(5, op.a1 + s * op.a1_step, kRowBytes);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
}

// c[t * ldc + 16 b + i] = accumulator (t, group b, lane i).
template <bool kTwoHalves>
inline void StoreBlock(float* c, int64_t ldc) {
  const int64_t stride = ldc * static_cast<int64_t>(sizeof(float));
  _tile_stored(0, c, stride);
  _tile_stored(1, c + kBf16GroupRows, stride);
  if constexpr (kTwoHalves) {
    _tile_stored(2, c + kBf16GroupRows * ldc, stride);
    _tile_stored(3, c + kBf16GroupRows * ldc + kBf16GroupRows, stride);
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

void FinishEdgeBlock(const EdgeBlock& e, const float* buf, int64_t row_begin, int64_t row_end,
                     float* y, int64_t ldy) {
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
void MatMulRowsBf16Tiles(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                         const uint16_t* x_tiles, int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t cols = w.cols;
  const int64_t k_steps = cols / kStepCols;
  const bool has_tail = k_steps * kStepCols < cols;
  const auto* base = static_cast<const uint32_t*>(w.data);
  const int64_t n_groups = PackedBf16Groups(w.rows);
  const int64_t g_begin = row_begin / kBf16GroupRows;
  const int64_t g_end = (row_end + kBf16GroupRows - 1) / kBf16GroupRows;
  const int64_t chunk_groups = std::max<int64_t>(
      2, kChunkBytes / (kBf16GroupRows * cols * static_cast<int64_t>(sizeof(uint16_t))) / 2 * 2);
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
    two_halves ? MultiplyBlock<true>(op, k_steps) : MultiplyBlock<false>(op, k_steps);
    const int64_t first_row = g0 * kBf16GroupRows;
    if (!has_tail && first_row >= row_begin && first_row + kBlockRows <= row_end) {
      float* c = y + t0 * ldy + (first_row - row_begin);
      two_halves ? StoreBlock<true>(c, ldy) : StoreBlock<false>(c, ldy);
      return;
    }
    two_halves ? StoreBlock<true>(buf, kBlockRows) : StoreBlock<false>(buf, kBlockRows);
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

  const int64_t full_blocks = n_tokens / kBlockTokens;
  const int64_t rest = n_tokens - full_blocks * kBlockTokens;
  for (int64_t c0 = g_begin; c0 < g_end; c0 += chunk_groups) {
    const int64_t c1 = std::min(g_end, c0 + chunk_groups);
    if (full_blocks > 0) {
      ConfigureTiles(kBf16GroupRows, kBf16GroupRows);
      for (int64_t b = 0; b < full_blocks; ++b) {
        for (int64_t g0 = c0; g0 < c1; g0 += 2) run_block(b * kBlockTokens, kBlockTokens, g0);
      }
    }
    if (rest > 0) {
      ConfigureTiles(static_cast<int>(std::min(rest, kBf16GroupRows)),
                     static_cast<int>(std::max<int64_t>(rest - kBf16GroupRows, 0)));
      for (int64_t g0 = c0; g0 < c1; g0 += 2) run_block(full_blocks * kBlockTokens, rest, g0);
    }
  }
  _tile_release();
}

// The tile unit of AmxPairGemm (amx_pair_gemm.h) on the hardware. The intrinsics take tile
// numbers as literals (they are pasted into the assembly), hence the switches.
struct HardwareTiles {
  static void Configure(const TileConfig& config) { _tile_loadconfig(&config); }
  static void Release() { _tile_release(); }
  static void ZeroAcc(int acc) {
    switch (acc) {
      case 0:
        _tile_zero(0);
        break;
      case 1:
        _tile_zero(1);
        break;
      case 2:
        _tile_zero(2);
        break;
      default:
        _tile_zero(3);
        break;
    }
  }
  static void LoadAcc(int acc, const float* p, int64_t stride) {
    switch (acc) {
      case 0:
        _tile_loadd(0, p, stride);
        break;
      case 1:
        _tile_loadd(1, p, stride);
        break;
      case 2:
        _tile_loadd(2, p, stride);
        break;
      default:
        _tile_loadd(3, p, stride);
        break;
    }
  }
  static void StoreAcc(int acc, float* p, int64_t stride) {
    switch (acc) {
      case 0:
        _tile_stored(0, p, stride);
        break;
      case 1:
        _tile_stored(1, p, stride);
        break;
      case 2:
        _tile_stored(2, p, stride);
        break;
      default:
        _tile_stored(3, p, stride);
        break;
    }
  }
  static void LoadA(int half, const uint32_t* p, int64_t stride) {
    if (half == 0) {
      _tile_loadd(4, p, stride);
    } else {
      _tile_loadd(5, p, stride);
    }
  }
  static void LoadB(int half, const uint32_t* p, int64_t stride) {
    if (half == 0) {
      _tile_loadd(6, p, stride);
    } else {
      _tile_loadd(7, p, stride);
    }
  }
  static void Dot(int acc) {
    switch (acc) {
      case 0:
        _tile_dpbf16ps(0, 4, 6);
        break;
      case 1:
        _tile_dpbf16ps(1, 4, 7);
        break;
      case 2:
        _tile_dpbf16ps(2, 5, 6);
        break;
      default:
        _tile_dpbf16ps(3, 5, 7);
        break;
    }
  }
};

void GemmBf16Pairs(int64_t m, int64_t n, int64_t k_pairs, const uint32_t* a, int64_t lda,
                   const uint32_t* b, int64_t ldb, float* c, int64_t ldc) {
  thread_local PairGemmScratch scratch;
  HardwareTiles tiles;
  AmxPairGemm(tiles,
              PairGemmArgs{.m = m,
                           .n = n,
                           .k_pairs = k_pairs,
                           .a = a,
                           .lda = lda,
                           .b = b,
                           .ldb = ldb,
                           .c = c,
                           .ldc = ldc},
              scratch);
}

}  // namespace

}  // namespace mlarun::amx

namespace mlarun::detail {

void InstallAmxKernels(KernelTable* t) {
  t->matmul_rows_bf16_tiles = amx::MatMulRowsBf16Tiles;
  t->gemm_bf16_pairs = amx::GemmBf16Pairs;
  t->bf16_tiles_min_tokens = kBf16GroupRows;
  t->packed_bf16_fastest = true;
}

const KernelTable& AmxKernelTable() {
  static const KernelTable table = [] {
    KernelTable t = Avx512Bf16KernelTable();
    t.isa = Isa::kAmx;
    InstallAmxKernels(&t);
    return t;
  }();
  return table;
}

}  // namespace mlarun::detail
