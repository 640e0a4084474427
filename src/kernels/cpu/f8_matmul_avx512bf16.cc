// FP8 E4M3 weights with block scales (DeepSeek-V3's checkpoints) by vdpbf16ps, for `--isa fast`
// (KernelTable::matmul_rows_f8_bf16). Compiled with the AVX512-BF16 flags; only called on CPUs
// that have it.
//
// Symbols: w[r, c] an FP8 weight's E4M3 value, s[rb, cb] the scale of row block rb = r / block_rows
// and column block cb = c / block_cols, x[t, c] token t's activations, bf16() rounding to bf16
// (nearest even, core/dtype.h F32ToBF16).
//   xs[rb][t, c] = bf16(256 s[rb, cb] * x[t, c])      (the activations after the block scale)
//   y[t, r]      = sum_c bf16(w[r, c] / 256) * xs[rb][t, c]
// w / 256 is exact in bf16 (E4M3 has 4 significant bits, and the exponents 2^-17 .. 2^0 are
// normal), so the activations' rounding is the only one besides the float32 sums; where the exact
// path (matmul_rows) rounds w * s to float32 and keeps x, this rounds s x to bf16 (relative <=
// 2^-9 per product). The sums: per (row, token) 16 float32 lanes, each adding one column pair per
// 32-column step (vdpbf16ps), then the lanes added (_mm512_reduce_add_ps): the same operations
// whatever the tile, batch or row range, so a token's result does not depend on its batch.
// Packed FP8 (Layout16::kPacked16, packed_bf16.h) takes the same products in another order: per
// (row, token) one vdpbf16ps chain over the column pairs in order, as the packed bf16 GEMM
// (pair_gemm_avx512bf16.h), with 16 rows in the lanes.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/scratch_vector.h"
#include "kernels/cpu/f8_nan_avx512.h"
#include "kernels/cpu/pair_gemm_avx512bf16.h"
#include "kernels/cpu/token_tiles.h"
#include "kernels/cpu/unrolled.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/packed_bf16.h"

namespace mlarun::avx512bf16 {

namespace {

// The constants of Widen, in registers for the whole tile.
struct WidenConstants {
  __m512i keep = _mm512_set1_epi16(static_cast<int16_t>(0x87f0));
  __m512i bias = _mm512_set1_epi16(0x3800);
  __m512i exponent = _mm512_set1_epi16(0x78);
  // Word m < 8: bf16(m * 2^-17) ^ (0x3800 | m << 4), what turns Widen's normal formula for the
  // byte 0 0000 mmm into the subnormal value m * 2^-9 / 256 (zero for m = 0).
  __m512i subnormal_fix = SubnormalFix();

  static __m512i SubnormalFix() {
    alignas(64) uint16_t words[32] = {};
    for (uint32_t m = 0; m < 8; ++m) {
      // m * 2^-17 = 1.f * 2^e exactly (m < 8): exponent 127 + e, mantissa f in the top bits.
      uint16_t value = 0;
      if (m > 0) {
        const int e = std::bit_width(m) - 1;  // m = 2^e * 1.f
        const uint32_t fraction = (m << (7 - e)) & 0x7f;
        value = static_cast<uint16_t>(((127 + e - 17) << 7) | fraction);
      }
      words[m] = static_cast<uint16_t>(value ^ (0x3800 | (m << 4)));
    }
    return _mm512_load_si512(words);
  }
};

// 32 FP8 E4M3 bytes as bf16 of value / 256, exactly (NaN bytes, 0x7f and 0xff, give 480 / 256;
// rows holding one are found by avx512::AnyF8Nan). The byte sign-extended to 16 bits and shifted
// left by 4 is s ssss eeee mmm 0000; keeping bits 15 and 10-4 and ORing 0x3800 into the exponent (e
// + 112 < 128: no carry) is the bf16 2^(e - 15) * 1.mmm = value / 256 for e > 0. For e = 0 (zero
// and the subnormals m * 2^-9) the word is s | 0x3800 | m << 4, which the table's word m (the
// index: the byte's low 5 bits, 00mmm there) corrects by one xor.
inline __m512bh Widen(__m256i bytes, const WidenConstants& k) {
  const __m512i s = _mm512_cvtepi8_epi16(bytes);
  const __m512i normal = _mm512_ternarylogic_epi32(_mm512_slli_epi16(s, 4), k.keep, k.bias, 0xea);
  const __mmask32 subnormal = _mm512_testn_epi16_mask(s, k.exponent);
  return (__m512bh)_mm512_xor_si512(normal,
                                    _mm512_maskz_permutexvar_epi16(subnormal, s, k.subnormal_fix));
}

// A tile of activations after a row block's scales, bf16: token t's at values + t * ld.
struct ScaledTile {
  uint16_t* values;
  int64_t ld;
  uint16_t* Row(int64_t t) const { return values + t * ld; }
};

// xs.Row(t)[c] = bf16(256 scales[c / block_cols] * x[t * cols + c]) for t < n_tokens, by
// vcvtne2ps2bf16 (nearest even, as F32ToBF16; a subnormal result is flushed to 0, which
// vdpbf16ps does to its inputs anyway). Recomputed for every row block and token tile: about
// 1/64 of the work of a 128-row block's products, whose row tiles then find it in L1.
void ScaledActivations(const float* x, int64_t n_tokens, int64_t cols, const float* scales,
                       int64_t block_cols, const ScaledTile& xs) {
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* in = x + t * cols;
    uint16_t* out = xs.Row(t);
    for (int64_t b0 = 0; b0 < cols; b0 += block_cols) {
      const __m512 scale256 = _mm512_set1_ps(scales[b0 / block_cols] * 256.0f);
      const int64_t end = std::min(cols, b0 + block_cols);
      int64_t c = b0;
      for (; c + 32 <= end; c += 32) {
        const __m512 low = _mm512_mul_ps(_mm512_loadu_ps(in + c), scale256);
        const __m512 high = _mm512_mul_ps(_mm512_loadu_ps(in + c + 16), scale256);
        _mm512_storeu_si512(out + c, (__m512i)_mm512_cvtne2ps_pbh(high, low));
      }
      if (c < end) {
        const auto mask = static_cast<__mmask32>((uint64_t{1} << (end - c)) - 1);
        const __m512 low =
            _mm512_mul_ps(_mm512_maskz_loadu_ps(static_cast<__mmask16>(mask), in + c), scale256);
        const __m512 high = _mm512_mul_ps(
            _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask >> 16), in + c + 16), scale256);
        _mm512_mask_storeu_epi16(out + c, mask, (__m512i)_mm512_cvtne2ps_pbh(high, low));
      }
    }
  }
}

// y[t * ldy + i] = row i . xs[t] for i < MR, t < NT; rows row-major at `rows`. kFirst, the token
// tile that reads the rows from memory: each row prefetches the next row tile's line at the same
// column, since rows of a few KB are too short for the hardware prefetchers (as for the exact
// path's TileF8; 48 tokens against 2,048 x 2,048 weights, one core: 130 -> 168 GFLOP/s, where
// 128 rows in L2 reach ~280), and nan[i] = whether row i holds a NaN byte, checked after the
// products from L1 (a pass over each row block afterwards, from L2, took ~20% of a single
// token's time). Later token tiles, whose rows come from L2, prefetch 128 bytes ahead in them:
// next to 8 activation streams the L1 prefetchers left them waiting (BM_MatMul 48 / 512 tokens,
// 2 threads: 404-425 / 395-405 -> 463-524 / 452-532 GFLOP/s; prefetching the next row tile
// instead gained less).
template <int MR, int NT, bool kFirst>
inline void Tile(const uint8_t* rows, int64_t cols, const ScaledTile& xs, const WidenConstants& k,
                 float* y, int64_t ldy, uint32_t* nan) {
  __m512 acc[MR][NT];
  Unrolled<MR>([&](auto r) { Unrolled<NT>([&](auto t) { acc[r][t] = _mm512_setzero_ps(); }); });
  int64_t c = 0;
  for (; c + 32 <= cols; c += 32) {
    __m512bh xv[NT];
    Unrolled<NT>([&](auto t) { xv[t] = (__m512bh)_mm512_loadu_si512(xs.Row(t) + c); });
    Unrolled<MR>([&](auto r) {
      const uint8_t* row = rows + r * cols;
      if ((c & 63) == 0) {
        const uint8_t* ahead = kFirst ? row + MR * cols + c : row + c + 128;
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
      }
      const __m512bh wv = Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + c)), k);
      Unrolled<NT>([&](auto t) { acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]); });
    });
  }
  if (c < cols) {  // zero bytes widen to +0, and the activations past the end load as 0
    const auto mask = static_cast<__mmask32>((uint64_t{1} << (cols - c)) - 1);
    __m512bh xv[NT];
    Unrolled<NT>([&](auto t) { xv[t] = (__m512bh)_mm512_maskz_loadu_epi16(mask, xs.Row(t) + c); });
    Unrolled<MR>([&](auto r) {
      const __m512bh wv = Widen(_mm256_maskz_loadu_epi8(mask, rows + r * cols + c), k);
      Unrolled<NT>([&](auto t) { acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]); });
    });
  }
  Unrolled<MR>([&](auto r) {
    Unrolled<NT>([&](auto t) { y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]); });
    if constexpr (kFirst) nan[r] = avx512::AnyF8Nan(rows + r * cols, cols) ? 1 : 0;
  });
}

// Tokens per tile, and rows per tile for NT tokens: 4 row streams for up to 2 tokens, else 2 rows
// against 8 tokens (16 accumulators and the constants in registers; GCC loads the activation
// vectors again for the second row, from L1). In a register and L2 loop 2 x 8 ran at 290-300
// GFLOP/s per core, 4 x 6 at 283-291, 3 x 6 at 272-280, 4 x 4 at 245-253.
constexpr int kTileTokens = 8;
template <int NT>
constexpr int kTileRows = NT <= 2 ? 4 : 2;

// NT tokens against the n rows at `rows` (nan: one flag per row, written where kFirst).
template <int NT, bool kFirst>
void RowTiles(const uint8_t* rows, int64_t n, int64_t cols, const ScaledTile& xs,
              const WidenConstants& k, float* y, int64_t ldy, uint32_t* nan) {
  constexpr int kRows = kTileRows<NT>;
  int64_t r = 0;
  for (; r + kRows <= n; r += kRows)
    Tile<kRows, NT, kFirst>(rows + r * cols, cols, xs, k, y + r, ldy, nan + r);
  for (; r < n; ++r) Tile<1, NT, kFirst>(rows + r * cols, cols, xs, k, y + r, ldy, nan + r);
}

// --- Packed FP8 weights: 64-row tiles of 4 groups, each group's column pair widened to the 16
// pair words of PairGemmTile's B vectors. ---

// Bytes ahead of each group's stream that the tiles reading it from memory prefetch (2 KB: 1 KB
// and 4 KB measured ~10% slower in a standalone copy of the one-token tile from memory).
constexpr int64_t kPackedF8PrefetchBytes = 2048;
// Products of this many tokens or more have their first token tile widen the weights once into a
// bf16 buffer that the pair GEMM's 6-token tiles of the others read; fewer widen them in
// registers in each token tile (the first from memory, the others from L2). 8,192 x 2,048
// weights, 2 threads, GFLOP/s in registers / through the buffer: 7 tokens 407-423 / 330-335, 10
// 511-516 / 432-433, 11 415-424 / 448-450, 12 438-446 / 490-503, 13 465 / 429-434, 16 454-464 /
// 496-511, 20 514-523 / 503-516, 24 491-495 / 556-565, 28 480-490 / 545-560.
constexpr int64_t kPackedF8WidenedMinTokens = 11;
// Tokens per tile of weights widened in registers without storing them (5 x 4 accumulators, the
// 4 widened vectors and Widen's constants fill the 32 registers; the storing first tile of up to
// 6 tokens takes some constants from memory).
constexpr int kPackedF8TileTokens = 5;
// Column pairs widened into the buffer at a time (64 rows x 2,048 columns, 256 KB: in L2 while the
// token tiles pass; longer rows continue the chains through C).
constexpr int64_t kPackedF8WidePairs = 1024;

// The 4 groups of a 64-row tile: group v's bytes at bytes[v] (an absent group aliases group 0
// and is not stored: masks[v] = 0).
struct F8GroupTile {
  const uint8_t* bytes[4];
  __mmask16 masks[4];
};

// c[t, 16 v + i] (+)= row i of group v . xs[t] over pairs [kk0, kk0 + n_pairs) for t < NT:
// PairGemmTile's chains (pairs in order, from zero or, with `accumulate`, from c) with B widened
// in registers from the groups' bytes, which this tile reads from memory (prefetched along the 4
// streams). kStore: the widened words also go to wide [n_pairs, 64] (group v at column 16 v) for
// the pair GEMM's later token tiles, so that memory is read while this tile computes.
template <int NT, bool kStore>
inline void PackedF8Tile(const F8GroupTile& groups, int64_t kk0, int64_t n_pairs, const uint32_t* a,
                         int64_t lda, const WidenConstants& k, float* c, int64_t ldc,
                         bool accumulate, uint32_t* wide) {
  __m512 acc[NT][4];
  Unrolled<NT>([&](auto t) {
    Unrolled<4>([&](auto v) {
      acc[t][v] = accumulate ? _mm512_maskz_loadu_ps(groups.masks[v], c + t * ldc + v * 16)
                             : _mm512_setzero_ps();
    });
  });
  for (int64_t kk = 0; kk < n_pairs; ++kk) {
    __m512bh b[4];
    Unrolled<4>([&](auto v) {
      const uint8_t* pair = groups.bytes[v] + (kk0 + kk) * 2 * kBf16GroupRows;
      if ((kk & 1) == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(pair + kPackedF8PrefetchBytes), _MM_HINT_T0);
      }
      b[v] = Widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair)), k);
      if constexpr (kStore) _mm512_storeu_si512(wide + kk * 64 + v * 16, (__m512i)b[v]);
    });
    Unrolled<NT>([&](auto t) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[t * lda + kk]));
      Unrolled<4>([&](auto v) { acc[t][v] = _mm512_dpbf16_ps(acc[t][v], av, b[v]); });
    });
  }
  Unrolled<NT>([&](auto t) {
    Unrolled<4>(
        [&](auto v) { _mm512_mask_storeu_ps(c + t * ldc + v * 16, groups.masks[v], acc[t][v]); });
  });
}

// PairGemmRows<false> in a function of its own: inlined into PackedF8TileAllTokens, the product
// of 48 tokens ran 20% slower in one of two builds that differed only in a constant (2 threads,
// alternating runs: 449-479 against 586-601 GFLOP/s); on its own, both builds ran alike.
[[gnu::noinline]] void WidenedTokenTiles(int64_t m, int64_t k_pairs, const uint32_t* a, int64_t lda,
                                         const PairColumns& cols, float* c, int64_t ldc,
                                         bool accumulate) {
  PairGemmRows<false>(m, k_pairs, a, lda, cols, c, ldc, accumulate);
}

// C [n_tokens, 64] = the tile's groups against xs [n_tokens, pairs] pair words: below
// kPackedF8WidenedMinTokens every token tile widens the weights in registers; from there, per
// chunk of pairs, a first tile of 1-6 tokens widens them and stores them in a buffer that the
// pair GEMM's 6-token tiles of the other tokens read (the same chains).
void PackedF8TileAllTokens(const F8GroupTile& groups, int64_t pairs, const uint32_t* xs,
                           int64_t n_tokens, const WidenConstants& k, float* c, int64_t ldc) {
  if (n_tokens < kPackedF8WidenedMinTokens) {
    // As few tiles as 5 tokens a tile allow, of near-equal widths (6 tokens as 3 + 3, not 5 + 1:
    // a tile of 1 or 2 tokens keeps too few chains to hide vdpbf16ps's latency).
    const int64_t n_tiles = (n_tokens + kPackedF8TileTokens - 1) / kPackedF8TileTokens;
    for (int64_t i = 0, t = 0; i < n_tiles; ++i) {
      const int64_t width = (n_tokens - t) / (n_tiles - i);
      detail::TokenTileOfWidth<kPackedF8TileTokens>(width, t, [&](auto nt, int64_t t0) {
        PackedF8Tile<decltype(nt)::value, false>(groups, 0, pairs, xs + t0 * pairs, pairs, k,
                                                 c + t0 * ldc, ldc, false, nullptr);
      });
      t += width;
    }
    return;
  }
  thread_local std::vector<uint32_t> wide;  // [kPackedF8WidePairs, 64]
  ResizeScratch(&wide, static_cast<size_t>(std::min(pairs, kPackedF8WidePairs) * 64));
  PairColumns columns{.ldb = 64};
  for (int v = 0; v < 4; ++v) {
    columns.b[v] = wide.data() + v * 16;  // an absent group's words: garbage, never stored
    columns.masks[v] = groups.masks[v];
  }
  // 1-6 tokens first, so that the pair GEMM's tiles of the others are all of 6 tokens (a short
  // tile of 1 or 2 tokens keeps too few chains; the first tile waits on memory anyway).
  const int64_t first = (n_tokens - 1) % 6 + 1;
  for (int64_t kk0 = 0; kk0 < pairs; kk0 += kPackedF8WidePairs) {
    const int64_t n_pairs = std::min(kPackedF8WidePairs, pairs - kk0);
    detail::TokenTileOfWidth<6>(first, 0, [&](auto nt, int64_t) {
      PackedF8Tile<decltype(nt)::value, true>(groups, kk0, n_pairs, xs + kk0, pairs, k, c, ldc,
                                              kk0 > 0, wide.data());
    });
    WidenedTokenTiles(n_tokens - first, n_pairs, xs + first * pairs + kk0, pairs, columns,
                      c + first * ldc, ldc, kk0 > 0);
  }
}

// Rows [row_begin, row_end) of packed FP8 weights: per row block the activations after its
// scales as pair words (ScaledActivations), then its 64-row tiles (4 groups from the block's or
// the range's first row; fewer at their ends). Tiles that do not cover 64 rows of the range are
// computed into a scratch tile and copied.
void MatMulRowsF8Packed(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                        int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t cols = w.cols;
  const int64_t pairs = cols / 2;
  const int64_t col_blocks = (cols + w.block_cols - 1) / w.block_cols;
  const auto* base = static_cast<const uint8_t*>(w.data);
  thread_local std::vector<uint32_t> scaled;  // [n_tokens, pairs]
  ResizeScratch(&scaled, static_cast<size_t>(n_tokens * pairs));
  const ScaledTile xs{.values = reinterpret_cast<uint16_t*>(scaled.data()), .ld = cols};
  thread_local std::vector<float> edge;  // [n_tokens, 64]
  const WidenConstants k;
  for (int64_t r0 = row_begin; r0 < row_end;) {
    const int64_t rb = r0 / w.block_rows;
    const int64_t r1 = std::min(row_end, (rb + 1) * w.block_rows);
    ScaledActivations(x, n_tokens, cols, w.block_scale + rb * col_blocks, w.block_cols, xs);
    for (int64_t tile_row = r0 / kBf16GroupRows * kBf16GroupRows; tile_row < r1;
         tile_row += 4 * kBf16GroupRows) {
      const int64_t n_groups =
          std::min<int64_t>(4, (r1 - tile_row + kBf16GroupRows - 1) / kBf16GroupRows);
      F8GroupTile groups;
      for (int64_t v = 0; v < 4; ++v) {
        const int64_t g = tile_row / kBf16GroupRows + (v < n_groups ? v : 0);
        groups.bytes[v] = base + PackedF8GroupBytes(g, cols);
        groups.masks[v] = v < n_groups ? __mmask16{0xffff} : __mmask16{0};
      }
      const int64_t first = std::max(r0, tile_row);
      const int64_t last = std::min(r1, tile_row + n_groups * kBf16GroupRows);
      if (first == tile_row && last == tile_row + 64) {
        PackedF8TileAllTokens(groups, pairs, scaled.data(), n_tokens, k, y + (tile_row - row_begin),
                              ldy);
        continue;
      }
      ResizeScratch(&edge, static_cast<size_t>(n_tokens * 64));
      PackedF8TileAllTokens(groups, pairs, scaled.data(), n_tokens, k, edge.data(), 64);
      for (int64_t t = 0; t < n_tokens; ++t) {
        std::copy(edge.data() + t * 64 + (first - tile_row),
                  edge.data() + t * 64 + (last - tile_row), y + t * ldy + (first - row_begin));
      }
    }
    r0 = r1;
  }
}

// KernelTable::matmul_rows_f8_bf16: packed weights by MatMulRowsF8Packed; row-major ones row
// block by row block (one set of scaled activations each), token tiles of up to kTileTokens
// within.
void MatMulRowsF8Bf16(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                      int64_t n_tokens, float* y, int64_t ldy) {
  if (w.layout16 == Layout16::kPacked16) {
    MatMulRowsF8Packed(w, row_begin, row_end, x, n_tokens, y, ldy);
    return;
  }
  const int64_t cols = w.cols;
  const int64_t col_blocks = (cols + w.block_cols - 1) / w.block_cols;
  const auto* values = static_cast<const uint8_t*>(w.data);
  thread_local std::vector<uint32_t> scaled;  // [kTileTokens, cols] bf16, as words for the type
  ResizeScratch(&scaled, static_cast<size_t>(kTileTokens * (cols + 1) / 2));
  const ScaledTile xs{.values = reinterpret_cast<uint16_t*>(scaled.data()), .ld = cols};
  thread_local std::vector<uint32_t> nan;  // per row of the row block
  ResizeScratch(&nan, static_cast<size_t>(std::min<int64_t>(w.block_rows, row_end - row_begin)));
  const WidenConstants k;
  for (int64_t r0 = row_begin; r0 < row_end;) {
    const int64_t rb = r0 / w.block_rows;
    const int64_t r1 = std::min(row_end, (rb + 1) * w.block_rows);
    const float* scales = w.block_scale + rb * col_blocks;
    const uint8_t* rows = values + r0 * cols;
    float* out = y + (r0 - row_begin);
    ForEachTokenTile<kTileTokens>(n_tokens, [&](auto nt, int64_t t) {
      constexpr int kTokens = decltype(nt)::value;
      ScaledActivations(x + t * cols, kTokens, cols, scales, w.block_cols, xs);
      if (t == 0) {  // the first token tile reads the rows from memory, the later ones from L2
        RowTiles<kTokens, true>(rows, r1 - r0, cols, xs, k, out + t * ldy, ldy, nan.data());
      } else {
        RowTiles<kTokens, false>(rows, r1 - r0, cols, xs, k, out + t * ldy, ldy, nan.data());
      }
    });
    for (int64_t r = r0; r < r1; ++r) {  // a NaN weight makes its row's products NaN
      if (nan[static_cast<size_t>(r - r0)] == 0) continue;
      for (int64_t t = 0; t < n_tokens; ++t)
        y[t * ldy + (r - row_begin)] = std::numeric_limits<float>::quiet_NaN();
    }
    r0 = r1;
  }
}

}  // namespace

void InstallF8MatMul(KernelTable* t) { t->matmul_rows_f8_bf16 = MatMulRowsF8Bf16; }

}  // namespace mlarun::avx512bf16
