// C = A B for matrices of bf16 pairs (kernel_table.h gemm_bf16_pairs) by AMX tile dot products
// on the tile unit of amx_tiles.h (the hardware in kernels_amx.cc; a software model in
// tests/kernels/amx_pair_gemm_test.cc).
//
// Symbols: m, n output rows and columns; k_pairs the depth in pairs (one 32-bit word = two bf16
// values, low half first); a step = 16 pairs (one A tile row of 64 bytes, one B tile of 16 rows);
// a block = up to 32 x 32 outputs in 2 x 2 accumulator tiles.
// A: [m, k_pairs] words (row stride lda); B: [k_pairs, n] words (ldb), which is exactly the
// layout a TDPBF16PS B tile reads (rows of pairs, 16 columns of 4 bytes); C: [m, n] float (ldc).
// LDTILECFG zeroes every tile, so the shape of the tiles cannot change inside a block's sum:
// a depth that is not a multiple of 16 pairs takes its last step from zero-padded copies.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/amx_tiles.h"

namespace mlarun::amx {

inline constexpr int64_t kStepPairs = 16;  // pairs per step (A tile row, B tile rows)
inline constexpr int64_t kBlockSize = 32;  // rows and columns of a block (2 tiles each way)
inline constexpr int64_t kChunkSteps = 8;  // steps per pass over a block's accumulators

struct PairGemmArgs {
  int64_t m = 0, n = 0, k_pairs = 0;
  const uint32_t* a = nullptr;  // [m, lda] words
  int64_t lda = 0;
  const uint32_t* b = nullptr;  // [k_pairs, ldb] words
  int64_t ldb = 0;
  float* c = nullptr;  // [m, ldc]
  int64_t ldc = 0;
};

// The zero-padded last step of a depth that is not a multiple of kStepPairs (kept by the
// caller between calls). Its functions are compiled with the baseline flags (amx_pair_gemm.cc):
// a std::vector or std::fill instantiated in the AMX file would be a weak symbol the linker may
// give the whole program, AVX-512 code included (the ASan build ran the tokenizer's
// vector::assign from kernels_amx.o and died of SIGILL on an AVX2 CPU).
struct PairGemmScratch {
  PairGemmScratch();
  ~PairGemmScratch();
  PairGemmScratch(const PairGemmScratch&) = delete;
  PairGemmScratch& operator=(const PairGemmScratch&) = delete;

  std::vector<uint32_t> tail_a;  // [m, kStepPairs]
  std::vector<uint32_t> tail_b;  // [kStepPairs, n]

  // Copies the depth's last `tail` pairs of A's rows and B's rows into the zero-padded tails.
  void CopyTails(const PairGemmArgs& g, int64_t full_steps, int64_t tail);
  // C = 0 (a product over no depth).
  static void ZeroOutputs(const PairGemmArgs& g);
};

// Tiles: the tile unit (amx_tiles.h).
template <class Tiles>
void AmxPairGemm(Tiles& tiles, const PairGemmArgs& g, PairGemmScratch& scratch) {
  if (g.m <= 0 || g.n <= 0) return;
  if (g.k_pairs <= 0) {
    PairGemmScratch::ZeroOutputs(g);
    return;
  }
  const int64_t full_steps = g.k_pairs / kStepPairs;
  const int64_t tail = g.k_pairs - full_steps * kStepPairs;
  const int64_t steps = full_steps + (tail > 0 ? 1 : 0);
  if (tail > 0) scratch.CopyTails(g, full_steps, tail);
  const int64_t a_stride = g.lda * 4, b_stride = g.ldb * 4, c_stride = g.ldc * 4;
  // The operands of step s for row i0 / column j0.
  auto a_at = [&](int64_t i0, int64_t s) {
    return s < full_steps ? g.a + i0 * g.lda + s * kStepPairs
                          : scratch.tail_a.data() + i0 * kStepPairs;
  };
  auto b_at = [&](int64_t j0, int64_t s) {
    return s < full_steps ? g.b + s * kStepPairs * g.ldb + j0 : scratch.tail_b.data() + j0;
  };

  BlockShape configured;
  bool any_configured = false;
  // Rows [i_begin, i_end) in blocks of `block_rows` (one shape for all of them).
  auto run_rows = [&](int64_t i_begin, int64_t i_end, int64_t block_rows) {
    const int rows0 = static_cast<int>(std::min<int64_t>(block_rows, kTileRows));
    const int rows1 = static_cast<int>(block_rows) - rows0;
    for (int64_t j0 = 0; j0 < g.n; j0 += kBlockSize) {
      const int cols = static_cast<int>(std::min(kBlockSize, g.n - j0));
      const int cols0 = std::min(cols, kTileRows);
      const BlockShape shape{.rows = {rows0, rows1}, .cols = {cols0, cols - cols0}};
      if (!any_configured || !(shape == configured)) {
        tiles.Configure(TileConfigFor(shape));
        configured = shape;
        any_configured = true;
      }
      const bool h1 = rows1 > 0, b1 = shape.cols[1] > 0;
      auto used = [h1, b1](int acc) { return (acc < 2 || h1) && (acc % 2 == 0 || b1); };
      for (int64_t s0 = 0; s0 < steps; s0 += kChunkSteps) {
        const int64_t s1 = std::min(steps, s0 + kChunkSteps);
        for (int64_t i0 = i_begin; i0 < i_end; i0 += kBlockSize) {
          // Accumulator acc's outputs (row half acc / 2, column half acc % 2).
          auto c_at = [&](int acc) {
            return g.c + (i0 + int64_t{acc / 2} * kTileRows) * g.ldc + j0 +
                   int64_t{acc % 2} * kTileRows;
          };
          for (int acc = 0; acc < 4; ++acc) {
            if (!used(acc)) continue;
            if (s0 == 0) {
              tiles.ZeroAcc(acc);
            } else {
              tiles.LoadAcc(acc, c_at(acc), c_stride);
            }
          }
          for (int64_t s = s0; s < s1; ++s) {
            const bool padded = s >= full_steps;
            tiles.LoadB(0, b_at(j0, s), padded ? g.n * 4 : b_stride);
            if (b1) tiles.LoadB(1, b_at(j0 + kTileRows, s), padded ? g.n * 4 : b_stride);
            tiles.LoadA(0, a_at(i0, s), padded ? kTileRowBytes : a_stride);
            tiles.Dot(0);
            if (b1) tiles.Dot(1);
            if (h1) {
              tiles.LoadA(1, a_at(i0 + kTileRows, s), padded ? kTileRowBytes : a_stride);
              tiles.Dot(2);
              if (b1) tiles.Dot(3);
            }
          }
          for (int acc = 0; acc < 4; ++acc) {
            if (!used(acc)) continue;
            tiles.StoreAcc(acc, c_at(acc), c_stride);
          }
        }
      }
    }
  };
  const int64_t m_full = g.m / kBlockSize * kBlockSize;
  if (m_full > 0) run_rows(0, m_full, kBlockSize);
  if (m_full < g.m) run_rows(m_full, g.m, g.m - m_full);
  tiles.Release();
}

// gemm_bf16_pairs (kernel_table.h) on a default-constructed tile unit `Tiles`.
template <class Tiles>
void GemmBf16PairsOn(int64_t m, int64_t n, int64_t k_pairs, const uint32_t* a, int64_t lda,
                     const uint32_t* b, int64_t ldb, float* c, int64_t ldc) {
  thread_local PairGemmScratch scratch;
  Tiles tiles;
  AmxPairGemm(tiles,
              {.m = m,
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

}  // namespace mlarun::amx
