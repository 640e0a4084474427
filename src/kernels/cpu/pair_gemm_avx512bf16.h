// The register tiles of the AVX512-BF16 GEMM over bf16 pairs: C (+)= A B for rows of A (pair
// words, broadcast) against 64 columns of B (4 vectors of 16 pair words per pair of k), one
// vdpbf16ps chain per element of C over k in order, whatever the tile. Used by the prefill's
// attention GEMM and the packed bf16 weights (kernels_avx512bf16.cc). Include only from
// translation units compiled with the AVX512-BF16 flags.
//
// Symbols: A [m, k_pairs] pair words (lda), B [k_pairs, 64] pair words (PairColumns), C [m, 64]
// float32 (ldc); kk a pair of k, i a row of A and C, v a vector of 16 columns.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/token_tiles.h"

namespace mlarun::avx512bf16 {

// The 64 columns of C a tile computes: vector v (16 columns) of B at pair kk is the 16 words at
// b[v] + kk * ldb; `masks[v]` selects the columns stored.
struct PairColumns {
  const uint32_t* b[4];
  int64_t ldb;
  __mmask16 masks[4];
};

// Words (4 KB) ahead of each column stream that the first tile over a chunk of weights prefetches
// (it brings them in from memory; the same distance as the packed int8 kernel's).
constexpr int64_t kPairPrefetchWords = 1024;

// How a tile prefetches its column streams: not at all, kPairPrefetchWords ahead into L1 (the tile
// that brings a block of weights in from memory), or a share of the next block of weights (a later
// tile over the same block: NextBlockShare).
enum class PairPrefetch { kNone, kAhead, kNextBlock };

// The share of the next block of columns (`words` past each column stream) that one later tile
// prefetches: pairs kk with kk % period == phase, so `period` consecutive tiles fetch the whole
// block at a rate memory can follow while they compute.
struct NextBlockShare {
  int64_t words = 0;
  int64_t period = 1;
  int64_t phase = 0;
};

// c[i, j] (+)= sum_kk a[i, kk] . B[kk, j] for MR rows and the first 16 G of the 64 columns,
// stored under the masks: MR x G accumulators in registers over the whole depth, one vdpbf16ps per
// (row, vector) and pair of k (6 x 4: 24 accumulators, 4 column loads and 6 broadcasts per pair).
template <int MR, PairPrefetch kPrefetch, int G = 4>
inline void PairGemmTile(int64_t k_pairs, const uint32_t* a, int64_t lda, const PairColumns& cols,
                         float* c, int64_t ldc, bool accumulate, NextBlockShare next = {}) {
  __m512 acc[MR][G];
  for (int64_t i = 0; i < MR; ++i) {
    for (int64_t v = 0; v < G; ++v) {
      acc[i][v] = accumulate ? _mm512_maskz_loadu_ps(cols.masks[v], c + i * ldc + v * 16)
                             : _mm512_setzero_ps();
    }
  }
  int64_t countdown = next.phase;
  for (int64_t kk = 0; kk < k_pairs; ++kk) {
    __m512bh b[G];
    bool fetch_next = false;
    if constexpr (kPrefetch == PairPrefetch::kNextBlock) {
      fetch_next = countdown == 0;
      countdown = fetch_next ? next.period - 1 : countdown - 1;
    }
    for (int64_t v = 0; v < G; ++v) {
      const uint32_t* column = cols.b[v] + kk * cols.ldb;
      if constexpr (kPrefetch == PairPrefetch::kAhead) {
        _mm_prefetch(reinterpret_cast<const char*>(column + kPairPrefetchWords), _MM_HINT_T0);
      } else if constexpr (kPrefetch == PairPrefetch::kNextBlock) {
        if (fetch_next) {
          _mm_prefetch(reinterpret_cast<const char*>(column + next.words), _MM_HINT_T1);
        }
      }
      b[v] = (__m512bh)_mm512_loadu_si512(column);
    }
    for (int64_t i = 0; i < MR; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[i * lda + kk]));
      for (int64_t v = 0; v < G; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, b[v]);
    }
  }
  for (int64_t i = 0; i < MR; ++i) {
    for (int64_t v = 0; v < G; ++v) {
      _mm512_mask_storeu_ps(c + i * ldc + v * 16, cols.masks[v], acc[i][v]);
    }
  }
}

// Full tiles after the first that share the next block's prefetch: at least 3 (with fewer the
// share comes in a burst that memory cannot follow; the whole next block in the second tile
// measured no faster), at most 8. With more tokens the first tile's wait is a small part of a
// block's time: the last 8 of many tiles sharing measured the same as none (bench-v2-lite bf16
// prefill of 512 tokens, the two alternating prefill by prefill in one process, 2 runs).
constexpr int64_t kMinNextBlockTiles = 3;
constexpr int64_t kMaxNextBlockTiles = 8;

// A tile of 1-5 rows (C's rows [0, rows)) in one pass over the columns, prefetching as kPrefetch
// says. Before, 5 rows ran as tiles of 4 + 1, 3 as 2 + 1, and a product of 2, 3, 4 or 5 tokens
// as 1 + 1, 1 + 2, 1 + 2 + 1 or 1 + 4 rows: 1- and 2-row tiles keep too few accumulator chains
// to issue vdpbf16ps at the core's rate, and each tile reads the block of columns from L2 again.
// BM_MatMul, medians of 5 alternating runs (2026-12-05): 2,048 x 53 tokens 1.20 -> 1.12 ms on
// one thread, 0.65 -> 0.61 on two; 32,768 rows from memory x 4 tokens 6.84 -> 6.02 and 3.55 ->
// 2.73 ms; engine_bench BatchedDecode of bench-v2-lite bf16, 2 threads, 7 pairs of runs: 4
// sequences 79.8 -> 94.0 tok/s, 16 sequences 164 -> 169 (medians; the new binary faster in 6 of
// 7 pairs each).
template <PairPrefetch kPrefetch>
inline void PairGemmShortTile(int64_t rows, int64_t k_pairs, const uint32_t* a, int64_t lda,
                              const PairColumns& cols, float* c, int64_t ldc, bool accumulate) {
  // rows in [1, 5]: ForEachTokenTile<5> runs one tile of width `rows`.
  ForEachTokenTile<5>(rows, [&](auto width, int64_t) {
    PairGemmTile<decltype(width)::value, kPrefetch>(k_pairs, a, lda, cols, c, ldc, accumulate);
  });
}

// Rows [0, m) of A (and C) in tiles of 6 rows against one set of columns and the last m % 6 rows
// in one PairGemmShortTile; with kPrefetchFirst the first tile prefetches ahead in the column
// streams, and where 3-8 full tiles follow it they share the prefetch of the next block of columns
// (`next_words` past each stream; 0: none) into L2.
template <bool kPrefetchFirst>
inline void PairGemmRows(int64_t m, int64_t k_pairs, const uint32_t* a, int64_t lda,
                         const PairColumns& cols, float* c, int64_t ldc, bool accumulate,
                         int64_t next_words = 0) {
  if (m <= 0) return;
  const int64_t full = m / 6;
  const int64_t tail_begin = full * 6;
  int64_t i = 0;
  if constexpr (kPrefetchFirst) {
    if (full == 0) {
      PairGemmShortTile<PairPrefetch::kAhead>(m, k_pairs, a, lda, cols, c, ldc, accumulate);
      return;
    }
    PairGemmTile<6, PairPrefetch::kAhead>(k_pairs, a, lda, cols, c, ldc, accumulate);
    i = 6;
    const int64_t later = full - 1;
    if (next_words != 0 && later >= kMinNextBlockTiles && later <= kMaxNextBlockTiles) {
      for (int64_t t = 0; t < later; ++t, i += 6) {
        PairGemmTile<6, PairPrefetch::kNextBlock>(
            k_pairs, a + i * lda, lda, cols, c + i * ldc, ldc, accumulate,
            {.words = next_words, .period = later, .phase = t});
      }
    }
  }
  for (; i < tail_begin; i += 6) {
    PairGemmTile<6, PairPrefetch::kNone>(k_pairs, a + i * lda, lda, cols, c + i * ldc, ldc,
                                         accumulate);
  }
  if (tail_begin < m) {
    PairGemmShortTile<PairPrefetch::kNone>(m - tail_begin, k_pairs, a + tail_begin * lda, lda, cols,
                                           c + tail_begin * ldc, ldc, accumulate);
  }
}

// Rows of A (and C) against 64 columns as two halves of 32 columns (vectors 0-1, then 2-3), each
// in tiles of 2 vectors x up to 12 rows of near-equal widths, the first prefetching ahead in the
// column streams. A product of 7-20 rows from memory then reads each column once, in a tile that
// computes while it streams, instead of in a 6-row tile and again from L2 for the rest: packed bf16
// weights, 32,768 x 2,048, 2 threads, GFLOP/s (2026-12-06, a throwaway harness, best of 3, 2-3
// alternating rounds): 7 rows 343-358 -> 401-438, 8 356-373 -> 417-434, 10 408-450 -> 483-525, 11
// 382-518 -> 430-615, 12 430-537 -> 439-546, 16 494-532 -> 536-551, 18 521-537 -> 571-627, 20
// 557-602 -> 567-678; 6 rows (one 6 x 4 tile) 374-386 -> 344-378 and 24 594-709 -> 543-576 do not
// gain.
constexpr int64_t kHalfTileMinRows = 7;
constexpr int64_t kHalfTileMaxRows = 20;

inline void PairGemmHalves(int64_t m, int64_t k_pairs, const uint32_t* a, int64_t lda,
                           const PairColumns& cols, float* c, int64_t ldc) {
  for (int64_t h = 0; h < 2; ++h) {
    const PairColumns half{.b = {cols.b[2 * h], cols.b[2 * h + 1]},
                           .ldb = cols.ldb,
                           .masks = {cols.masks[2 * h], cols.masks[2 * h + 1]}};
    ForEachEvenTokenTile<12>(m, [&](auto mr, int64_t r0, int64_t i) {
      constexpr int kRows = decltype(mr)::value;
      const uint32_t* a_tile = a + r0 * lda;
      float* c_tile = c + r0 * ldc + 32 * h;
      if (i == 0) {
        PairGemmTile<kRows, PairPrefetch::kAhead, 2>(k_pairs, a_tile, lda, half, c_tile, ldc,
                                                     false);
      } else {
        PairGemmTile<kRows, PairPrefetch::kNone, 2>(k_pairs, a_tile, lda, half, c_tile, ldc, false);
      }
    });
  }
}

}  // namespace mlarun::avx512bf16
