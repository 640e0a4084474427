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
// 2^-8 per product). The sums: per (row, token) 16 float32 lanes, each adding one column pair per
// 32-column step (vdpbf16ps), then the lanes added (_mm512_reduce_add_ps): the same operations
// whatever the tile, batch or row range, so a token's result does not depend on its batch.
// Packed FP8 (Layout16::kPacked16) goes to f8_packed_avx512bf16.cc, which rounds x to bf16
// before the block scales instead.
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/scratch_vector.h"
#include "kernels/cpu/f8_nan_avx512.h"
#include "kernels/cpu/f8_widen_avx512bf16.h"
#include "kernels/cpu/token_tiles.h"
#include "kernels/cpu/unrolled.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"

namespace mlarun::avx512bf16 {

namespace {

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

// KernelTable::matmul_rows_f8_bf16: row block by row block (one set of scaled activations each),
// token tiles of up to kTileTokens within; packed weights by MatMulRowsF8Packed, x rounded to
// bf16 first.
void MatMulRowsF8Bf16(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                      int64_t n_tokens, float* y, int64_t ldy) {
  if (w.layout16 == Layout16::kPacked16) {
    thread_local std::vector<uint32_t> x_pairs;  // x rounded to bf16, two values a word
    ResizeScratch(&x_pairs, static_cast<size_t>((n_tokens * w.cols + 1) / 2));
    auto* x_bf16 = reinterpret_cast<uint16_t*>(x_pairs.data());
    // F32ToBF16 bitwise, as MatMulBatch rounds the activations it gives matmul_rows_f8_packed.
    detail::Avx512KernelTable().round_to_bf16(x, n_tokens * w.cols, x_bf16);
    MatMulRowsF8Packed(w, row_begin, row_end, x_bf16, n_tokens, y, ldy);
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

void InstallF8MatMul(KernelTable* t) {
  t->matmul_rows_f8_bf16 = MatMulRowsF8Bf16;
  t->matmul_rows_f8_packed = MatMulRowsF8Packed;
}

}  // namespace mlarun::avx512bf16
