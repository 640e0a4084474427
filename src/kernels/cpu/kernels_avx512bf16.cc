// AVX512-BF16 kernels: the AVX-512 table with bf16-weight matmuls done by vdpbf16ps on
// activations rounded to bf16 (32 multiply-adds per instruction, weights used as stored).
// Compiled with -mavx512bf16 on top of the AVX-512 flags; only called on CPUs that have it.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/token_tiles.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"

namespace mlarun::avx512bf16 {

namespace {

// Software prefetch distance along a row (512 B ahead: measured better than 1 KB here).
constexpr int64_t kPrefetchElements = 256;

// y[t * ldy + r] = rows[r] . x[t] with one 16-lane accumulator per (row, token) pair, columns in
// steps of 32 (the tail by masked loads), whatever the tile shape: batch-invariant.
template <int MR, int NT>
inline void Tile(const uint16_t* const* rows, const uint16_t* x, int64_t cols, float* y,
                 int64_t ldy) {
  __m512 acc[MR][NT];
  for (int r = 0; r < MR; ++r) {
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  int64_t c = 0;
  for (; c + 32 <= cols; c += 32) {
    __m512bh xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = (__m512bh)_mm512_loadu_si512(x + t * cols + c);
    for (int r = 0; r < MR; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + c + kPrefetchElements), _MM_HINT_T0);
      const __m512bh wv = (__m512bh)_mm512_loadu_si512(rows[r] + c);
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]);
    }
  }
  if (c < cols) {
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (cols - c)) - 1);
    __m512bh xv[NT];
    for (int t = 0; t < NT; ++t) xv[t] = (__m512bh)_mm512_maskz_loadu_epi16(mask, x + t * cols + c);
    for (int r = 0; r < MR; ++r) {
      const __m512bh wv = (__m512bh)_mm512_maskz_loadu_epi16(mask, rows[r] + c);
      for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int t = 0; t < NT; ++t) y[t * ldy + r] = _mm512_reduce_add_ps(acc[r][t]);
  }
}

template <int NT>
inline void TokenTile(const uint16_t* const* rows, int64_t n_rows, const uint16_t* x, int64_t cols,
                      float* y, int64_t ldy) {
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) Tile<4, NT>(rows + r, x, cols, y + r, ldy);
  for (; r < n_rows; ++r) Tile<1, NT>(rows + r, x, cols, y + r, ldy);
}

// Token tiles outer (a tile of activations stays in L1), row blocks of 64 (in L2).
void MatMulRowsBf16(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const uint16_t* x,
                    int64_t n_tokens, float* y, int64_t ldy) {
  constexpr int64_t kBlockRows = 64;
  const int64_t cols = w.cols;
  const uint16_t* base = static_cast<const uint16_t*>(w.data);
  const uint16_t* rows[kBlockRows];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kBlockRows) {
    const int64_t n = std::min(kBlockRows, row_end - r0);
    for (int64_t i = 0; i < n; ++i) rows[i] = base + (r0 + i) * cols;
    float* out = y + (r0 - row_begin);
    ForEachTokenTile(n_tokens, [&](auto nt, int64_t t) {
      TokenTile<decltype(nt)::value>(rows, n, x + t * cols, cols, out + t * ldy, ldy);
    });
  }
}

}  // namespace

}  // namespace mlarun::avx512bf16

namespace mlarun::detail {

const KernelTable& Avx512Bf16KernelTable() {
  static const KernelTable table = [] {
    KernelTable t = Avx512KernelTable();
    t.isa = Isa::kAvx512Bf16;
    t.matmul_rows_bf16 = avx512bf16::MatMulRowsBf16;
    return t;
  }();
  return table;
}

}  // namespace mlarun::detail
