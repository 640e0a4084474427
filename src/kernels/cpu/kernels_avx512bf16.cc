// AVX512-BF16 kernels: the AVX-512 table with bf16-weight matmuls done by vdpbf16ps on
// activations rounded to bf16 (32 multiply-adds per instruction, weights used as stored).
// Compiled with -mavx512bf16 on top of the AVX-512 flags; only called on CPUs that have it.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/scratch_vector.h"
#include "kernels/cpu/lane_transpose.h"
#include "kernels/cpu/pair_gemm_avx512bf16.h"
#include "kernels/cpu/row_prefetch.h"
#include "kernels/cpu/token_tiles.h"
#include "kernels/cpu/unrolled.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/packed_bf16.h"

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

void MatMulRowsPackedBf16(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                          const uint16_t* x_bf16, int64_t n_tokens, float* y, int64_t ldy);

// Token tiles outer (a tile of activations stays in L1), row blocks of 64 (in L2). Packed
// weights go to the outer-product kernel below.
void MatMulRowsBf16(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const uint16_t* x,
                    int64_t n_tokens, float* y, int64_t ldy) {
  if (w.layout16 == Layout16::kPacked16) {
    MatMulRowsPackedBf16(w, row_begin, row_end, x, n_tokens, y, ldy);
    return;
  }
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

// --- Attention over bf16 cache rows with bf16 queries and probabilities (vdpbf16ps). ---

// Returns v with lane i = the sum of the 16 lanes of v[i], for 16 vectors: 45 shuffles and adds
// instead of 16 separate reductions (~8 each).
inline __m512 SumLanes16(const __m512 (&v)[16]) {
  __m512 t[8];
  Unrolled<8>([&](auto i) {  // per 128-bit lane: [a0+a2, b0+b2, a1+a3, b1+b3]
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  });
  __m512 u[4];
  Unrolled<4>([&](auto i) {  // per 128-bit lane: the partial sums of v[4i .. 4i + 3]
    const __m512d a = _mm512_castps_pd(t[2 * i]);
    const __m512d b = _mm512_castps_pd(t[2 * i + 1]);
    u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  });
  // Sum the four 128-bit lanes of u[i] into lane i of the result.
  const __m512 x01 =
      _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], 0x88), _mm512_shuffle_f32x4(u[0], u[1], 0xDD));
  const __m512 x23 =
      _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], 0x88), _mm512_shuffle_f32x4(u[2], u[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(x01, x23, 0x88), _mm512_shuffle_f32x4(x01, x23, 0xDD));
}

// acc[4 h + r] += q[h] . rows[r] over the 32 columns from d (those in `mask`).
__attribute__((always_inline)) inline void DotStep4x4(const uint16_t* const* rows,
                                                      const uint16_t* q, int64_t dim, int64_t d,
                                                      __mmask32 mask, __m512 (&acc)[16]) {
  __m512bh qv[4];
  Unrolled<4>([&](auto h) { qv[h] = (__m512bh)_mm512_maskz_loadu_epi16(mask, q + h * dim + d); });
  Unrolled<4>([&](auto r) {
    const __m512bh kv = (__m512bh)_mm512_maskz_loadu_epi16(mask, rows[r] + d);
    Unrolled<4>([&](auto h) { acc[h * 4 + r] = _mm512_dpbf16_ps(acc[h * 4 + r], kv, qv[h]); });
  });
}

// s[h * lds + r] = q[h] . rows[r] for 4 rows and 4 heads: one accumulator per (row, head), 32
// values per vdpbf16ps, the tail by masked loads. `next` (4 rows, or null) are prefetched one
// cache line per row and step.
inline void DotTile4x4(const uint16_t* const* rows, const uint16_t* const* next, const uint16_t* q,
                       int64_t dim, float* s, int64_t lds) {
  __m512 acc[16];
  Unrolled<16>([&](auto i) { acc[i] = _mm512_setzero_ps(); });
  int64_t d = 0;
  for (; d + 32 <= dim; d += 32) {
    if (next != nullptr) PrefetchRowLine<4>(next, d);
    DotStep4x4(rows, q, dim, d, ~__mmask32{0}, acc);
  }
  if (d < dim) {
    DotStep4x4(rows, q, dim, d, static_cast<__mmask32>((uint64_t{1} << (dim - d)) - 1), acc);
  }
  // Lane 4 h + r of the sums is s[h * lds + r]: one 4-float store per head.
  const __m512 sums = SumLanes16(acc);
  _mm_storeu_ps(s, _mm512_extractf32x4_ps(sums, 0));
  _mm_storeu_ps(s + lds, _mm512_extractf32x4_ps(sums, 1));
  _mm_storeu_ps(s + 2 * lds, _mm512_extractf32x4_ps(sums, 2));
  _mm_storeu_ps(s + 3 * lds, _mm512_extractf32x4_ps(sums, 3));
}

// One (row, head) pair the same way (edges of the 4 x 4 tiling).
inline float DotOne(const uint16_t* row, const uint16_t* q, int64_t dim) {
  __m512 acc = _mm512_setzero_ps();
  int64_t d = 0;
  for (; d + 32 <= dim; d += 32) {
    acc = _mm512_dpbf16_ps(acc, (__m512bh)_mm512_loadu_si512(row + d),
                           (__m512bh)_mm512_loadu_si512(q + d));
  }
  if (d < dim) {
    const __mmask32 mask = static_cast<__mmask32>((uint64_t{1} << (dim - d)) - 1);
    acc = _mm512_dpbf16_ps(acc, (__m512bh)_mm512_maskz_loadu_epi16(mask, row + d),
                           (__m512bh)_mm512_maskz_loadu_epi16(mask, q + d));
  }
  return _mm512_reduce_add_ps(acc);
}

// Scores of R rows against a block of 16 heads by broadcasts of a row's two bf16 pairs (8 bytes)
// against two vectors of the query (heads 0-7 and 8-15, a head in two lanes, one per pair; the
// layout of I8Query's body, kernel_table.h), 2 vdpbf16ps per broadcast and no reduction across
// lanes but each head's two lanes added last. The 4 x 4 tiles (DotTile4x4: 8 loads per 16
// vdpbf16ps, then a 16-vector reduction per tile) ran the core's vdpbf16ps at ~62% of its issue
// rate in BM_AbsorbedMlaDecode (bf16 rows, 16 heads, 2026-12-05). qp: [dim / 4, 2, 16] words.
// ahead (optional): R later rows to prefetch, a cache line per step j in the order this loop
// reads its own (line j / R of row j % R: R rows' lines are read together, 8 steps per line).
template <int R>
inline void DotRowsBf16Block(const uint16_t* const* rows, const uint32_t* qp, int64_t dim, float* s,
                             int64_t lds, const uint16_t* const* ahead = nullptr) {
  __m512 low[R];
  __m512 high[R];
  Unrolled<R>([&](auto i) { low[i] = high[i] = _mm512_setzero_ps(); });
  for (int64_t j = 0; j < dim / 4; ++j) {
    if (ahead != nullptr) {
      _mm_prefetch(reinterpret_cast<const char*>(ahead[j % R] + j / R * 32), _MM_HINT_T0);
    }
    const __m512bh q_low = (__m512bh)_mm512_loadu_si512(qp + j * 32);
    const __m512bh q_high = (__m512bh)_mm512_loadu_si512(qp + j * 32 + 16);
    Unrolled<R>([&](auto i) {
      int64_t pairs;
      std::memcpy(&pairs, rows[i] + 4 * j, sizeof(pairs));
      const __m512bh b = (__m512bh)_mm512_set1_epi64(pairs);
      low[i] = _mm512_dpbf16_ps(low[i], b, q_low);
      high[i] = _mm512_dpbf16_ps(high[i], b, q_high);
    });
  }
  __m512 sums[R];
  Unrolled<R>([&](auto i) { sums[i] = AddLanePairs(low[i], high[i]); });
  StoreTransposedRx16<R>(sums, s, lds);
}

// bf16_query_blocks: head h's values 4j .. 4j + 3 (8 bytes) go to lanes 2 (i % 8), + 1 of
// vector i / 8 of chunk j (i = h % 16).
void Bf16QueryBlocks(const uint16_t* q, int n_heads, int dim_int, uint32_t* out_words) {
  const int64_t dim = dim_int;
  for (int64_t h = 0; h < n_heads; ++h) {
    const int64_t i = h % 16;
    char* out =
        reinterpret_cast<char*>(out_words) + ((h / 16 * (dim / 4)) * 2 + i / 8) * 64 + (i % 8) * 8;
    const uint16_t* qh = q + h * dim;
    for (int64_t j = 0; j < dim / 4; ++j) std::memcpy(out + j * 128, qh + 4 * j, 8);
  }
}

// dot_rows_bf16_blocks: DotRowsBf16Block over 8 rows a step, which prefetches the rows two steps
// ahead a line per inner step; the first 16 and the last rows at once. Against the next 8 rows
// at once per step (a burst of 144 lines that the rows' arrival then waited for):
// BM_AbsorbedMlaDecode bf16 rows, 16 heads, 4,096 rows from memory, 2 threads, 391-407 -> 282-312
// us (medians of 5-7 alternating runs; one step ahead 335-349), in cache 241 -> 219 us;
// bench-v2-lite int8 weights with a bf16 cache at depth 4096: attention 12.1-14.1% -> 9.8-10.6%
// of a decoded token (4 alternating pairs, 2026-12-05).
void DotRowsBf16Blocks(const uint16_t* const* rows, int n_rows_int, const uint32_t* qp, int n_heads,
                       int dim_int, float* s, int lds_int) {
  constexpr int kRows = 8;
  const int64_t n_rows = n_rows_int;
  const int64_t dim = dim_int;
  const int64_t lds = lds_int;
  const int64_t row_bytes = dim * 2;
  for (int64_t block = 0; block < n_heads / 16; ++block) {
    const uint32_t* qb = qp + block * dim * 8;
    float* sb = s + block * 16 * lds;
    constexpr int64_t kAhead = int64_t{2} * kRows;
    int64_t r = 0;
    for (; r + kRows <= n_rows; r += kRows) {
      // The first head block reads the rows from memory: the rows kAhead ahead a line per inner
      // step while they make a full step, the first kAhead and then the rest at once.
      const bool first = block == 0;
      const bool spread = first && r + kAhead + kRows <= n_rows;
      if (first && r == 0) {
        PrefetchRowsAtOnce(rows, 0, spread ? kAhead : n_rows, row_bytes);
      } else if (first && !spread && r + kAhead <= n_rows) {  // the first step without
        PrefetchRowsAtOnce(rows, r + kAhead, n_rows, row_bytes);
      }
      DotRowsBf16Block<kRows>(rows + r, qb, dim, sb + r, lds, spread ? rows + r + kAhead : nullptr);
    }
    for (; r < n_rows; ++r) DotRowsBf16Block<1>(rows + r, qb, dim, sb + r, lds);
  }
}

void DotRowsBf16Rounded(const uint16_t* const* rows, int n_rows, const uint16_t* q, int n_heads,
                        int dim_int, float* s, int lds_int) {
  const int64_t dim = dim_int;
  const int64_t lds = lds_int;
  // Whole blocks of 16 heads by DotRowsBf16Blocks, the rest (fewer than 16) by 4 x 4 tiles: a
  // head's kernel depends only on its index in the call, so AttendParallel's head blocks (of 16)
  // give the same scores as one call over all heads.
  if (dim % 4 == 0 && n_heads >= 16) {
    const int blocked = n_heads / 16 * 16;
    thread_local std::vector<uint32_t> q_blocks;
    ResizeScratch(&q_blocks, static_cast<size_t>(BF16QueryBlockWords(blocked, dim_int)));
    Bf16QueryBlocks(q, blocked, dim_int, q_blocks.data());
    DotRowsBf16Blocks(rows, n_rows, q_blocks.data(), blocked, dim_int, s, lds_int);
    if (blocked == n_heads) return;
    q += blocked * dim;
    s += blocked * lds;
    n_heads -= blocked;
  }
  const int64_t row_bytes = dim * 2;
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) {
    // The first head tile prefetches the next 4 rows a line per row and step (row_prefetch.h;
    // against a burst per tile: BM_AbsorbedMlaDecode @4096 with the cache evicted 0.77-0.99 ->
    // 0.66-0.80 ms in 5 alternating pairs, int8 decode @4096 +1-7% in 5 of 5 pairs). Without a
    // full next tile or a head tile, at once.
    const bool spread = r + 8 <= n_rows && n_heads >= 4;
    if (!spread) PrefetchRowsAtOnce(rows, r + 4, std::min<int64_t>(n_rows, r + 8), row_bytes);
    int64_t h = 0;
    for (; h + 4 <= n_heads; h += 4) {
      DotTile4x4(rows + r, spread && h == 0 ? rows + r + 4 : nullptr, q + h * dim, dim,
                 s + h * lds + r, lds);
    }
    for (; h < n_heads; ++h) {
      for (int64_t i = 0; i < 4; ++i) s[h * lds + r + i] = DotOne(rows[r + i], q + h * dim, dim);
    }
  }
  for (; r < n_rows; ++r) {
    for (int64_t h = 0; h < n_heads; ++h) s[h * lds + r] = DotOne(rows[r], q + h * dim, dim);
  }
}

// P V for NH heads and 32 columns [c, c + 32): rows are taken in pairs, their bf16 values
// interleaved (vpunpck{l,h}wd) so one vdpbf16ps adds p[2i] v[2i] + p[2i+1] v[2i+1] for 16
// columns. The interleave permutes columns: lane 4L + i of `lo` is column 8L + i and of `hi`
// column 8L + 4 + i (L < 4, i < 4); acc is permuted in and out with vpermt2ps.
// pairs: [NH, ldq] bf16 pairs (p[h, 2i], p[h, 2i + 1]) as 32-bit words.
template <int NH>
inline void PvSlice32(const uint32_t* pairs, int64_t ldq, int n_pairs,
                      const uint16_t* const* v_rows, int n_rows, int64_t dv, int64_t c,
                      float* acc) {
  // Gather indices: column of lane e in lo / hi, within the two 16-column halves of acc.
  const __m512i to_lo = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
  const __m512i to_hi = _mm512_add_epi32(to_lo, _mm512_set1_epi32(4));
  // Back: column m < 16 of the first half is lane (m / 8) * 4 + m % 4 of lo (m % 8 < 4) or of hi
  // (index + 16); the second half likewise with lanes 8 + ...
  const __m512i back0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i back1 = _mm512_add_epi32(back0, _mm512_set1_epi32(8));
  __m512 lo[NH];
  __m512 hi[NH];
  for (int h = 0; h < NH; ++h) {
    const __m512 m0 = _mm512_loadu_ps(acc + h * dv + c);
    const __m512 m1 = _mm512_loadu_ps(acc + h * dv + c + 16);
    lo[h] = _mm512_permutex2var_ps(m0, to_lo, m1);
    hi[h] = _mm512_permutex2var_ps(m0, to_hi, m1);
  }
  for (int64_t i = 0; i < n_pairs; ++i) {
    const __m512i v0 = _mm512_loadu_si512(v_rows[2 * i] + c);
    const __m512i v1 =
        2 * i + 1 < n_rows ? _mm512_loadu_si512(v_rows[2 * i + 1] + c) : _mm512_setzero_si512();
    const __m512bh vlo = (__m512bh)_mm512_unpacklo_epi16(v0, v1);
    const __m512bh vhi = (__m512bh)_mm512_unpackhi_epi16(v0, v1);
    for (int h = 0; h < NH; ++h) {
      const __m512bh p = (__m512bh)_mm512_set1_epi32(static_cast<int>(pairs[h * ldq + i]));
      lo[h] = _mm512_dpbf16_ps(lo[h], vlo, p);
      hi[h] = _mm512_dpbf16_ps(hi[h], vhi, p);
    }
  }
  for (int h = 0; h < NH; ++h) {
    _mm512_storeu_ps(acc + h * dv + c, _mm512_permutex2var_ps(lo[h], back0, hi[h]));
    _mm512_storeu_ps(acc + h * dv + c + 16, _mm512_permutex2var_ps(lo[h], back1, hi[h]));
  }
}

void PvAccumulateBf16Rounded(const float* p, int ldp, int n_heads, int n_rows,
                             const uint16_t* const* v_rows, int dv_int, float* acc) {
  const int64_t dv = dv_int;
  // p rounded to bf16 once: [n_heads, ldq] pairs of rows, 32 values per vcvtne2ps2bf16, an odd
  // last row paired with 0.
  const int n_pairs = (n_rows + 1) / 2;
  const int64_t ldq = int64_t{(n_pairs + 15) / 16} * 16;
  thread_local std::vector<uint32_t> pairs_buffer;
  ResizeScratch(&pairs_buffer, static_cast<size_t>(n_heads) * static_cast<size_t>(ldq));
  uint32_t* pairs = pairs_buffer.data();
  for (int64_t h = 0; h < n_heads; ++h) {
    const float* row = p + h * ldp;
    uint32_t* out = pairs + h * ldq;
    int j = 0;
    for (; j + 32 <= n_rows; j += 32) {
      const __m512bh b =
          _mm512_cvtne2ps_pbh(_mm512_loadu_ps(row + j + 16), _mm512_loadu_ps(row + j));
      _mm512_storeu_si512(out + j / 2, (__m512i)b);
    }
    for (; j < n_rows; j += 2) {
      out[j / 2] =
          BF16Pair(F32ToBF16(row[j]), j + 1 < n_rows ? F32ToBF16(row[j + 1]) : uint16_t{0});
    }
  }
  int64_t c = 0;
  for (; c + 32 <= dv; c += 32) {
    int64_t h = 0;
    for (; h + 8 <= n_heads; h += 8)
      PvSlice32<8>(pairs + h * ldq, ldq, n_pairs, v_rows, n_rows, dv, c, acc + h * dv);
    for (; h < n_heads; ++h)
      PvSlice32<1>(pairs + h * ldq, ldq, n_pairs, v_rows, n_rows, dv, c, acc + h * dv);
  }
  // Columns past the last multiple of 32: the same products one at a time.
  for (; c < dv; ++c) {
    for (int64_t h = 0; h < n_heads; ++h) {
      float sum = acc[h * dv + c];
      for (int j = 0; j < n_rows; ++j) {
        const uint32_t pair = pairs[h * ldq + j / 2];
        const auto pj = static_cast<uint16_t>(j % 2 == 0 ? pair & 0xffffu : pair >> 16);
        sum += BF16ToF32(pj) * BF16ToF32(v_rows[j][c]);
      }
      acc[h * dv + c] = sum;
    }
  }
}

// --- GEMM over bf16 pairs (the tiled attention of prefill, `--isa fast`). ---

// Columns of C per panel: 4 vectors of 16 floats, each from one 64-byte row of pairs.
constexpr int64_t kPairPanelCols = 64;
// Pairs of k per panel: a [128, 64] panel of words is 32 KB, which stays in L1 while the row
// tiles of A pass over it.
constexpr int64_t kPairPanelDepth = 128;

// Rows [0, m) against one panel of B in L1 (GemmBf16Pairs): as PairGemmRows, except that a
// remainder of 1 or 2 rows takes the last full tile along as 4 + 3 or 4 + 4 rows. A tile of 1 or
// 2 rows keeps too few accumulator chains for the issue rate, and a panel in L1 is cheap to read
// once more (the weights' 256 KB blocks come from L2, where the same split measured slower).
// BM_AttentionGemmBf16, medians of alternating runs (2026-12-05): 128 queries x 4,608 keys (dk
// 192) 0.609 -> 0.588 and 0.588 -> 0.581 ms, P V of 128 x 4,608 0.395 -> 0.383 and 0.388 -> 0.383;
// 32 queries 0.186 -> 0.176 and 0.117 -> 0.114 (a first version with the split inline in
// GemmBf16Pairs: -4 to -9%).
inline void PairGemmPanelRows(int64_t m, int64_t k_pairs, const uint32_t* a, int64_t lda,
                              const PairColumns& cols, float* c, int64_t ldc, bool accumulate) {
  const int64_t rest = m % 6;
  if (m < 6 || rest == 0 || rest > 2) {
    PairGemmRows<false>(m, k_pairs, a, lda, cols, c, ldc, accumulate);
    return;
  }
  const int64_t head = m - 6 - rest;  // the full tiles before the last 7 or 8 rows
  PairGemmRows<false>(head, k_pairs, a, lda, cols, c, ldc, accumulate);
  PairGemmTile<4, PairPrefetch::kNone>(k_pairs, a + head * lda, lda, cols, c + head * ldc, ldc,
                                       accumulate);
  PairGemmShortTile<PairPrefetch::kNone>(2 + rest, k_pairs, a + (head + 4) * lda, lda, cols,
                                         c + (head + 4) * ldc, ldc, accumulate);
}

// Panels of B (kPairPanelDepth x kPairPanelCols, copied contiguous and zero-padded, so the tile
// needs no masked loads and rows of B a power of two apart do not share L1 sets) against all the
// rows of A; between depth chunks the accumulators pass through C.
void GemmBf16Pairs(int64_t m, int64_t n, int64_t k_pairs, const uint32_t* a, int64_t lda,
                   const uint32_t* b, int64_t ldb, float* c, int64_t ldc) {
  thread_local std::vector<uint32_t> panel_buffer;
  ResizeScratch(&panel_buffer, static_cast<size_t>(kPairPanelDepth * kPairPanelCols));
  uint32_t* panel = panel_buffer.data();
  for (int64_t k0 = 0; k0 < k_pairs || k0 == 0; k0 += kPairPanelDepth) {
    const int64_t kc = std::min(kPairPanelDepth, k_pairs - k0);
    for (int64_t j = 0; j < n; j += kPairPanelCols) {
      const int64_t width = std::min(kPairPanelCols, n - j);
      for (int64_t kk = 0; kk < kc; ++kk) {
        const uint32_t* src = b + (k0 + kk) * ldb + j;
        uint32_t* dst = panel + kk * kPairPanelCols;
        std::copy_n(src, width, dst);
        std::fill(dst + width, dst + kPairPanelCols, 0u);
      }
      PairColumns cols{.ldb = kPairPanelCols};
      for (int64_t v = 0; v < 4; ++v) {
        cols.b[v] = panel + v * 16;
        const int64_t lanes = std::clamp<int64_t>(width - v * 16, 0, 16);
        cols.masks[v] = static_cast<__mmask16>((1u << lanes) - 1u);
      }
      PairGemmPanelRows(m, kc, a + k0, lda, cols, c + j, ldc, k0 > 0);
    }
  }
}

// Packed bf16 weights (packed_bf16.h), rows [row_begin, row_end), against x_bf16 [n_tokens, cols]:
// C = y with the tokens as rows and the weight rows as columns, 4 groups (64 rows) per tile, the
// groups' words read in place (ldb 16) over the whole depth (a block of 64 rows, 256 KB at 2,048
// columns, stays in L2 while the token tiles pass). The first token tile brings the block in from
// memory; for 24-53 tokens (a prefill MoE expert's ~48) the later ones share the prefetch of the
// range's next block into L2 (BM_MatMul 32,768 rows x 48 tokens from memory 19.7 -> 17.1 ms on one
// thread and 9.8 -> 8.7 on two, medians of 6 alternating runs; bench-v2-lite bf16 prefill of 512
// tokens with and without it alternating prefill by prefill in one process, 2 runs of 6 pairs: @0
// median +2.3% and +3.2%, @4096 +3.7% and +6.4%; 2026-12-05). Every output is the same chain of
// pair products in column order for any batch or range. Blocks that do not cover 64 rows of the
// range are computed into a scratch tile and copied (no store outside the range).
void MatMulRowsPackedBf16(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                          const uint16_t* x_bf16, int64_t n_tokens, float* y, int64_t ldy) {
  if (n_tokens <= 0) return;
  const int64_t cols = w.cols;
  const int64_t pairs = cols / 2;
  const auto* x = reinterpret_cast<const uint32_t*>(x_bf16);
  const auto* base = static_cast<const uint32_t*>(w.data);
  const int64_t g_end = PackedBf16Groups(w.rows);
  thread_local std::vector<float> edge;  // [n_tokens, 64]
  for (int64_t g0 = row_begin / kBf16GroupRows; g0 * kBf16GroupRows < row_end; g0 += 4) {
    const int64_t block_row = g0 * kBf16GroupRows;
    const bool whole = block_row >= row_begin && block_row + 64 <= row_end && g0 + 4 <= g_end;
    float* c = whole ? y + (block_row - row_begin) : nullptr;
    int64_t ldc = ldy;
    if (!whole) {
      ResizeScratch(&edge, static_cast<size_t>(n_tokens * 64));
      c = edge.data();
      ldc = 64;
    }
    PairColumns columns{.ldb = kBf16GroupRows};
    for (int64_t v = 0; v < 4; ++v) {
      // Groups past the end read group g0's words; their columns are discarded.
      columns.b[v] = base + PackedBf16GroupWords(g0 + v < g_end ? g0 + v : g0, cols);
      columns.masks[v] = 0xffff;
    }
    // The next block of the range, if any, is fetched into L2 while this one is in use.
    const int64_t next_words =
        (g0 + 4) * kBf16GroupRows < row_end && g0 + 4 < g_end ? PackedBf16GroupWords(4, cols) : 0;
    if (n_tokens >= kHalfTileMinRows && n_tokens <= kHalfTileMaxRows) {
      PairGemmHalves(n_tokens, pairs, x, pairs, columns, c, ldc);
    } else {
      PairGemmRows<true>(n_tokens, pairs, x, pairs, columns, c, ldc, false, next_words);
    }
    if (!whole) {
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t j = 0; j < 64; ++j) {
          const int64_t r = block_row + j;
          if (r >= row_begin && r < row_end) y[t * ldy + (r - row_begin)] = edge[t * 64 + j];
        }
      }
    }
  }
}

}  // namespace

// attention_i8_avx512bf16.cc: attention over int8 cache rows.
void InstallI8Attention(KernelTable* t);
// f8_matmul_avx512bf16.cc: FP8 weights against bf16 activations.
void InstallF8MatMul(KernelTable* t);

}  // namespace mlarun::avx512bf16

namespace mlarun::detail {

const KernelTable& Avx512Bf16KernelTable() {
  static const KernelTable table = [] {
    KernelTable t = Avx512KernelTable();
    t.isa = Isa::kAvx512Bf16;
    t.matmul_rows_bf16 = avx512bf16::MatMulRowsBf16;
    t.dot_rows_bf16_rounded = avx512bf16::DotRowsBf16Rounded;
    t.bf16_query_blocks = avx512bf16::Bf16QueryBlocks;
    t.dot_rows_bf16_blocks = avx512bf16::DotRowsBf16Blocks;
    t.pv_accumulate_bf16_rounded = avx512bf16::PvAccumulateBf16Rounded;
    t.gemm_bf16_pairs = avx512bf16::GemmBf16Pairs;
    t.packed_bf16_fastest = true;
    avx512bf16::InstallI8Attention(&t);
    avx512bf16::InstallF8MatMul(&t);
    return t;
  }();
  return table;
}

}  // namespace mlarun::detail
