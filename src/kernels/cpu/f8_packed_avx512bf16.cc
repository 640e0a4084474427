// Packed FP8 E4M3 weights (Layout16::kPacked16, packed_bf16.h; DeepSeek-V3's block-scaled
// format as `--load copy` lays it out for this table) against activations rounded to bf16, by
// vdpbf16ps: KernelTable::matmul_rows_f8_packed for `--isa fast`. Compiled with the AVX512-BF16
// flags; only called on CPUs that have it.
//
// Symbols: w[r, c] an FP8 weight's E4M3 value, s[rb, cb] the scale of row block rb = r /
// block_rows and column block cb = c / block_cols, x[t, c] token t's activations, bf16() rounding
// to bf16 (nearest even, core/dtype.h F32ToBF16), kk a column pair, g a group of 16 rows (lane i
// = row 16 g + i), v < 4 a group of a 64-row tile.
//   P[cb][t, r] = sum over pairs kk of cb of bf16(w[r, 2kk + j] / 256) * bf16(x[t, 2kk + j])
//                 (one vdpbf16ps chain from 0, pairs in order, j = 0, 1 within the instruction)
//   y[t, r]     = P[0][t, r] * 256 s[rb, 0], then y = fma(P[cb][t, r], 256 s[rb, cb], y) for
//                 cb = 1, 2, ... in order
// w / 256 is exact in bf16 (f8_widen_avx512bf16.h), so besides the float32 sums the activations'
// rounding is the only one (relative <= 2^-8 per product, as with bf16 weights under `--isa
// fast`); the exact path (matmul_rows) rounds w s to float32 and keeps x. Every output is this
// sequence whatever the tile, the batch or the row range, so results are batch invariant.
//
// A tile is 4 groups (64 rows in one row block) x 1-6 tokens or 2 of them x 6-12 tokens: per
// pair, each group's 32 bytes widened to a vector of 16 pair words (lane i: row i's two columns),
// multiplied by every token's broadcast pair. Where the scale moves to the activations instead (the
// row-major kernel, f8_matmul_avx512bf16.cc), a product of 512 tokens spent 16% of its time scaling
// them again for every row block.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/scratch_vector.h"
#include "kernels/cpu/f8_widen_avx512bf16.h"
#include "kernels/cpu/token_tiles.h"
#include "kernels/cpu/unrolled.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/packed_bf16.h"

namespace mlarun::avx512bf16 {

namespace {

// Bytes ahead of each group's stream that the tiles reading it from memory prefetch (2 KB: 1 KB
// and 4 KB measured ~10% slower in a standalone copy of the one-token tile from memory).
constexpr int64_t kPrefetchBytes = 2048;
// Products of this many tokens or more have their first token tile widen the weights once into a
// bf16 buffer that 6-token tiles of the others read; fewer widen them in registers in each token
// tile (the first from memory, the others from L2). 2 threads, 32,768 x 2,048 weights, GFLOP/s of
// 2-group register tiles / the buffer (2026-12-06, f8 throwaway harness, best of 3, 2 rounds):
// 13 tokens 464-483 / 388-392, 16 475-492 / 438-479, 20 459-490 / 470-473, 24 593-601 /
// 529-578, 30 492-557 / 591-595, 36 516-521 / 582-614.
constexpr int64_t kWidenedMinTokens = 25;
// Products of up to this many tokens run one tile of all 4 groups (4 n chains hide vdpbf16ps's
// latency); more run tiles of 2 groups, which widen each group once per 2-12 tokens instead of
// once per 1-5: 6-12 tokens 7-27% faster than 4-group tiles of <= 5 tokens (10 tokens, two
// 5-token tiles, 2-8% slower).
constexpr int kFourGroupMaxTokens = 5;
// Tokens of a 2-group tile (2 x 12 accumulators, 2 widened vectors, a broadcast and Widen's 4
// constants fill 31 of the 32 registers).
constexpr int kTwoGroupMaxTokens = 12;
// Column pairs widened into the buffer at a time, whole column blocks (64 rows x 2,048 columns,
// 256 KB: in L2 while the token tiles pass; longer rows continue through C).
constexpr int64_t kWidePairs = 1024;

// The 4 groups of a 64-row tile: group v's bytes at bytes[v] (an absent group aliases the first
// and is not stored: masks[v] = 0).
struct GroupTile {
  const uint8_t* bytes[4];
  __mmask16 masks[4];
};

// The tile of groups [g0, g0 + n_groups) (n_groups <= 4) of packed bytes at `base`.
GroupTile Groups(const uint8_t* base, int64_t cols, int64_t g0, int64_t n_groups) {
  GroupTile tile;
  for (int64_t v = 0; v < 4; ++v) {
    tile.bytes[v] = base + PackedF8GroupBytes(g0 + (v < n_groups ? v : 0), cols);
    tile.masks[v] = v < n_groups ? __mmask16{0xffff} : __mmask16{0};
  }
  return tile;
}

// Pairs [kk0, kk1) of a tile (whole column blocks of block_pairs pairs, or the last one's rest)
// and its row block's 256 s[rb, cb] per column block cb.
struct PairSpan {
  int64_t kk0;
  int64_t kk1;
  int64_t block_pairs;
  const float* scales256;
};

// Where a tile's weight vectors come from: the groups' bytes widened in registers (and, for
// kWidenStore, stored to the buffer for later tiles), or the buffer.
enum class Source { kWiden, kWidenStore, kBuffer };

// c[t, 16 v + i] (+)= y's sequence over span's column blocks for tokens t < NT (a: token t's pair
// words at a + t * lda, indexed by kk) and row i of group v < G (groups.bytes[v]): per block a
// chain of vdpbf16ps in registers, then stored as P * 256 s (block 0) or fma(P, 256 s, c). wide:
// [pairs of the span, 64] words, group v at column 16 v, written (kWidenStore) or read (kBuffer).
template <int G, int NT, Source kSource>
[[gnu::noinline]] void F8Tile(const GroupTile& groups, const PairSpan& span, const uint32_t* a,
                              int64_t lda, const WidenConstants& k, uint32_t* wide, float* c,
                              int64_t ldc) {
  for (int64_t b0 = span.kk0; b0 < span.kk1;) {
    const int64_t cb = b0 / span.block_pairs;
    const int64_t b1 = std::min(span.kk1, (cb + 1) * span.block_pairs);
    __m512 acc[NT][G];
    Unrolled<NT>([&](auto t) { Unrolled<G>([&](auto v) { acc[t][v] = _mm512_setzero_ps(); }); });
    for (int64_t kk = b0; kk < b1; ++kk) {
      __m512bh b[G];
      Unrolled<G>([&](auto v) {
        uint32_t* words = wide + (kk - span.kk0) * 64 + v * 16;
        if constexpr (kSource == Source::kBuffer) {
          b[v] = (__m512bh)_mm512_loadu_si512(words);
        } else {
          const uint8_t* pair = groups.bytes[v] + kk * 2 * kBf16GroupRows;
          if ((kk & 1) == 0) {
            _mm_prefetch(reinterpret_cast<const char*>(pair + kPrefetchBytes), _MM_HINT_T0);
          }
          b[v] = Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair)), k);
          if constexpr (kSource == Source::kWidenStore) _mm512_storeu_si512(words, (__m512i)b[v]);
        }
      });
      Unrolled<NT>([&](auto t) {
        const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[t * lda + kk]));
        Unrolled<G>([&](auto v) { acc[t][v] = _mm512_dpbf16_ps(acc[t][v], av, b[v]); });
      });
    }
    const __m512 scale = _mm512_set1_ps(span.scales256[cb]);
    Unrolled<NT>([&](auto t) {
      Unrolled<G>([&](auto v) {
        float* out = c + t * ldc + v * 16;
        const __mmask16 m = groups.masks[v];
        const __m512 y = cb == 0 ? _mm512_mul_ps(acc[t][v], scale)
                                 : _mm512_fmadd_ps(acc[t][v], scale, _mm512_maskz_loadu_ps(m, out));
        _mm512_mask_storeu_ps(out, m, y);
      });
    });
    b0 = b1;
  }
}

// Tokens [0, n_tokens) in 6-token tiles from the buffer (n_tokens a multiple of 6), in a function
// of its own: the 6-token loop inlined into its caller ran 20% slower in one of two builds that
// differed only in a constant (48 tokens, 2 threads: 449-479 against 586-601 GFLOP/s).
[[gnu::noinline]] void BufferTiles(const GroupTile& groups, const PairSpan& span, const uint32_t* a,
                                   int64_t lda, int64_t n_tokens, const WidenConstants& k,
                                   uint32_t* wide, float* c, int64_t ldc) {
  for (int64_t t = 0; t < n_tokens; t += 6) {
    F8Tile<4, 6, Source::kBuffer>(groups, span, a + t * lda, lda, k, wide, c + t * ldc, ldc);
  }
}

// C [n_tokens, 64] = the tile's groups against x (pair words [n_tokens, pairs]) over all pairs:
// up to kFourGroupMaxTokens tokens in one tile of the 4 groups; up to kWidenedMinTokens - 1 in
// tiles of 2 groups (each half of the tile in tiles of near-equal widths <= 12, the first from
// memory, a second from L2); from there, per chunk of pairs, a first tile of 1-6 tokens widens
// the weights into the buffer while it computes, so that the other tokens' tiles are all of 6
// tokens.
void TileAllTokens(const GroupTile& groups, int64_t pairs, int64_t block_pairs,
                   const float* scales256, const uint32_t* x, int64_t n_tokens,
                   const WidenConstants& k, float* c, int64_t ldc) {
  if (n_tokens < kWidenedMinTokens) {
    const PairSpan span{.kk0 = 0, .kk1 = pairs, .block_pairs = block_pairs, .scales256 = scales256};
    if (n_tokens <= kFourGroupMaxTokens) {
      detail::TokenTileOfWidth<kFourGroupMaxTokens>(n_tokens, 0, [&](auto nt, int64_t) {
        F8Tile<4, decltype(nt)::value, Source::kWiden>(groups, span, x, pairs, k, nullptr, c, ldc);
      });
      return;
    }
    for (int64_t h = 0; h < 2; ++h) {  // groups 2 h and 2 h + 1, at column 32 h of c
      const GroupTile two{.bytes = {groups.bytes[2 * h], groups.bytes[2 * h + 1]},
                          .masks = {groups.masks[2 * h], groups.masks[2 * h + 1]}};
      ForEachEvenTokenTile<kTwoGroupMaxTokens>(n_tokens, [&](auto nt, int64_t t0, int64_t) {
        F8Tile<2, decltype(nt)::value, Source::kWiden>(two, span, x + t0 * pairs, pairs, k, nullptr,
                                                       c + t0 * ldc + 32 * h, ldc);
      });
    }
    return;
  }
  const int64_t chunk = std::max<int64_t>(1, kWidePairs / block_pairs) * block_pairs;
  thread_local std::vector<uint32_t> wide;  // [chunk, 64]
  ResizeScratch(&wide, static_cast<size_t>(std::min(pairs, chunk) * 64));
  const int64_t first = (n_tokens - 1) % 6 + 1;
  for (int64_t kk0 = 0; kk0 < pairs; kk0 += chunk) {
    const PairSpan span{.kk0 = kk0,
                        .kk1 = std::min(pairs, kk0 + chunk),
                        .block_pairs = block_pairs,
                        .scales256 = scales256};
    detail::TokenTileOfWidth<6>(first, 0, [&](auto nt, int64_t) {
      F8Tile<4, decltype(nt)::value, Source::kWidenStore>(groups, span, x, pairs, k, wide.data(), c,
                                                          ldc);
    });
    BufferTiles(groups, span, x + first * pairs, pairs, n_tokens - first, k, wide.data(),
                c + first * ldc, ldc);
  }
}

}  // namespace

// Row block by row block (its scales times 256 once), 64-row tiles from the block's or the
// range's first row (fewer groups at their ends); tiles that do not cover 64 rows of the range go
// through a scratch tile.
void MatMulRowsF8Packed(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                        const uint16_t* x_bf16, int64_t n_tokens, float* y, int64_t ldy) {
  if (n_tokens <= 0) return;
  const int64_t cols = w.cols;
  const int64_t pairs = cols / 2;
  const int64_t block_pairs = w.block_cols / 2;
  const int64_t col_blocks = (cols + w.block_cols - 1) / w.block_cols;
  const auto* base = static_cast<const uint8_t*>(w.data);
  const auto* x = reinterpret_cast<const uint32_t*>(x_bf16);
  thread_local std::vector<float> scales256;  // [col_blocks]
  thread_local std::vector<float> edge;       // [n_tokens, 64]
  ResizeScratch(&scales256, static_cast<size_t>(col_blocks));
  const WidenConstants k;
  for (int64_t r0 = row_begin; r0 < row_end;) {
    const int64_t rb = r0 / w.block_rows;
    const int64_t r1 = std::min(row_end, (rb + 1) * w.block_rows);
    for (int64_t cb = 0; cb < col_blocks; ++cb)
      scales256[static_cast<size_t>(cb)] = w.block_scale[rb * col_blocks + cb] * 256.0f;
    for (int64_t tile_row = r0 / kBf16GroupRows * kBf16GroupRows; tile_row < r1;
         tile_row += 4 * kBf16GroupRows) {
      const int64_t n_groups =
          std::min<int64_t>(4, (r1 - tile_row + kBf16GroupRows - 1) / kBf16GroupRows);
      const GroupTile groups = Groups(base, cols, tile_row / kBf16GroupRows, n_groups);
      const int64_t first = std::max(r0, tile_row);
      const int64_t last = std::min(r1, tile_row + n_groups * kBf16GroupRows);
      if (first == tile_row && last == tile_row + 4 * kBf16GroupRows) {
        TileAllTokens(groups, pairs, block_pairs, scales256.data(), x, n_tokens, k,
                      y + (tile_row - row_begin), ldy);
        continue;
      }
      ResizeScratch(&edge, static_cast<size_t>(n_tokens * 64));
      TileAllTokens(groups, pairs, block_pairs, scales256.data(), x, n_tokens, k, edge.data(), 64);
      for (int64_t t = 0; t < n_tokens; ++t) {
        std::copy(edge.data() + t * 64 + (first - tile_row),
                  edge.data() + t * 64 + (last - tile_row), y + t * ldy + (first - row_begin));
      }
    }
    r0 = r1;
  }
}

}  // namespace mlarun::avx512bf16
