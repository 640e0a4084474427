// Attention over int8 cache rows read in place (AVX512-BF16 table, which implies AVX512-VNNI):
// the scores by vpdpbusd (64 multiply-adds per instruction, twice vdpbf16ps), P V by vpdpwssd on
// probabilities quantised to int16. Compiled with the AVX512-BF16 flags plus VNNI.
//
// Symbols (kv_row.h, kernel_table.h): a row is [body int8 + 128 (body_dim)][f32 scale per group of
// quant_group][tail int8 + 128 (tail_dim)][f32 scale per tail group]; k_r = body_r *
// scale_r(group) ++ tail_r * tail_scale_r(tail group); V_r = the first dv values of body_r *
// scale_r. q[h] = q_int[h] * q_scale[h](group) ++ qt_int[h] * qt_scale[h](tail group);
// the tail groups t are more groups like the body's:
//   s[h, r] = sum_g q_scale[h, g] * row_scale[r, g] * (sum_{c in g} q_int[h, c] * body_r[c])
//           + sum_t qt_scale[h, t] * tail_scale[r, t] * (sum_{c in t} qt_int[h, c] * tail_r[c])
//   acc[h, :] += sum_r p[h, r] * row_scale[r, g] * body_r[:]   (per column group g)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/scratch_vector.h"
#include "kernels/cpu/lane_transpose.h"
#include "kernels/cpu/unrolled.h"
#include "kernels/kernel_table.h"

namespace mlarun::avx512bf16 {

namespace {

// vpdpbusd / vpdpwssd with the accumulator tied in place. With the intrinsics GCC 12 copied every
// accumulator of these tiles to another register and back on each step (two vmovdqa per
// instruction in `perf annotate`); the asm operand "+v" keeps it where it is.
inline __m512i DpBusd(__m512i acc, __m512i u8, __m512i s8) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u8), "v"(s8));
  return acc;
}
inline __m512i DpWssd(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

// Adds to acc[i] (lane m: head m of the block, row i) one group of int8 values of R rows against
// 16 heads of the query: the group's 8 * n_pairs + last_bytes values start at byte `at` of each
// row, its f32 scale at byte `scale_at`; qw holds the query's values of the group (I8Query's
// layout, the pair past n_pairs zero where the group ends mid-pair), q_scales and q_offsets its
// scales and offsets (16 lanes). The rows hold value + 128 (kv_row.h), vpdpbusd's unsigned
// operand, read in place; the offsets hold -128 * sum(q_int), which makes the group's sum the
// exact signed dot product. A row's 8 bytes (2 quads) are broadcast against two vectors of q
// (heads 0-7 and 8-15, each head in two lanes, one per quad), so one broadcast feeds 2 vpdpbusd
// and a row has 2 chains; the two lanes of a head are added (exact in int32) at the end. With one
// 4-byte broadcast per vpdpbusd (heads in the lanes) a core issued 5.4-5.6 G vpdpbusd per second
// in a register-and-L1 loop of this kernel's shape, with 8-byte broadcasts 6.4-6.6 (of ~6.7: two
// per cycle; 2026-12-04, AMD VM).
template <int R>
inline void AddGroupTo(const uint8_t* const* rows, int64_t at, int64_t n_pairs, int last_bytes,
                       const int32_t* qw, const int32_t* q_offsets, const float* q_scales,
                       int64_t scale_at, __m512 (&acc)[R]) {
  const __m512i even = EvenLanes();
  const __m512i odd = OddLanes();
  __m512i low[R];   // heads 0-7, two lanes each
  __m512i high[R];  // heads 8-15
  Unrolled<R>([&](auto i) { low[i] = high[i] = _mm512_setzero_si512(); });
  auto step = [&](int64_t p, auto load_pair) {
    const __m512i q_low = _mm512_loadu_si512(qw + p * 32);
    const __m512i q_high = _mm512_loadu_si512(qw + p * 32 + 16);
    Unrolled<R>([&](auto i) {
      const __m512i b = _mm512_set1_epi64(load_pair(rows[i] + at + 8 * p));
      low[i] = DpBusd(low[i], b, q_low);
      high[i] = DpBusd(high[i], b, q_high);
    });
  };
  for (int64_t p = 0; p < n_pairs; ++p) {
    step(p, [](const uint8_t* bytes) {
      int64_t pair;
      std::memcpy(&pair, bytes, sizeof(pair));
      return pair;
    });
  }
  if (last_bytes > 0) {  // the group's end: only its bytes read (the query is 0 past them)
    step(n_pairs, [&](const uint8_t* bytes) {
      int64_t pair = 0;
      std::memcpy(&pair, bytes, static_cast<size_t>(last_bytes));
      return pair;
    });
  }
  const __m512i offset = _mm512_loadu_si512(q_offsets);
  const __m512 qs = _mm512_loadu_ps(q_scales);
  Unrolled<R>([&](auto i) {
    const __m512i isum =
        _mm512_add_epi32(_mm512_add_epi32(_mm512_permutex2var_epi32(low[i], even, high[i]),
                                          _mm512_permutex2var_epi32(low[i], odd, high[i])),
                         offset);
    float row_scale;
    std::memcpy(&row_scale, rows[i] + scale_at, sizeof(row_scale));
    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(qs, _mm512_set1_ps(row_scale)),
                             acc[i]);
  });
}

// Scores of R rows against the 16 heads of head block `hb`: each body group of the row (byte
// layout kv_row.h: [body][body group scales][tail][tail group scales]), then each tail group.
template <int R>
inline void DotRowsI8Tile(const uint8_t* const* rows, const I8Query& q, int hb, float* s,
                          int64_t lds) {
  const int n_groups = q.body_dim / q.quant_group;
  const int quad_pairs = q.quant_group / 8;
  const int32_t* body = q.body + static_cast<int64_t>(hb) * (q.body_dim / 4) * 16;
  const float* q_scales = q.scales + static_cast<int64_t>(hb) * n_groups * 16;
  const int32_t* offsets = q.offsets + static_cast<int64_t>(hb) * n_groups * 16;
  __m512 acc[R];
  Unrolled<R>([&](auto i) { acc[i] = _mm512_setzero_ps(); });
  for (int64_t g = 0; g < n_groups; ++g) {
    AddGroupTo<R>(rows, g * q.quant_group, quad_pairs, 0, body + g * quad_pairs * 32,
                  offsets + g * 16, q_scales + g * 16, q.body_dim + 4 * g, acc);
  }
  const int64_t tail_at = q.body_dim + 4 * int64_t{n_groups};
  for (int64_t g = 0; g < q.tail_groups; ++g) {
    const int64_t begin = std::min<int64_t>(q.tail_dim, g * q.tail_group);
    const int64_t n = std::min<int64_t>(q.tail_dim - begin, q.tail_group);
    const int64_t block_group = int64_t{hb} * q.tail_groups + g;
    AddGroupTo<R>(rows, tail_at + begin, n / 8, static_cast<int>(n % 8),
                  q.tail + block_group * q.TailQuadPairs() * 32, q.tail_offsets + block_group * 16,
                  q.tail_scales + block_group * 16, tail_at + q.tail_dim + 4 * g, acc);
  }
  StoreTransposedRx16<R>(acc, s + static_cast<int64_t>(hb) * 16 * lds, lds);
}

// Prefetches the `n_next` rows `next` (row_bytes each) into L1.
inline void PrefetchRows(const uint8_t* const* next, int n_next, int64_t row_bytes) {
  for (int i = 0; i < n_next; ++i) {
    for (int64_t b = 0; b < row_bytes; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(next[i]) + b, _MM_HINT_T0);
  }
}

void DotRowsI8(const uint8_t* const* rows, int n_rows, const I8Query& q, float* s, int lds_int) {
  constexpr int kRows = 8;
  const int64_t lds = lds_int;
  int r = 0;
  for (; r + kRows <= n_rows; r += kRows) {
    const int n_next = std::min(kRows, n_rows - r - kRows);
    if (n_next > 0) PrefetchRows(rows + r + kRows, n_next, q.row_bytes);
    for (int hb = 0; hb < q.n_heads / 16; ++hb) DotRowsI8Tile<kRows>(rows + r, q, hb, s + r, lds);
  }
  for (; r < n_rows; ++r) {
    for (int hb = 0; hb < q.n_heads / 16; ++hb) DotRowsI8Tile<1>(rows + r, q, hb, s + r, lds);
  }
}

// P V for NH heads and the 32 columns [c, c + 32) of column group g: rows in pairs, their int8
// values (the stored bytes xor 0x80) widened to int16 and interleaved (vpunpck{l,h}wd) so one
// vpdpwssd adds p[2i] v[2i] + p[2i+1] v[2i+1] for 16 columns, exactly in int32. The interleave
// permutes the columns as in the bf16 P V (kernels_avx512bf16.cc): lane 4L + i of `lo` is
// column 8L + i and of `hi` column 8L + 4 + i; the sums are permuted back when added to acc.
// pairs: [NH, ldq] int16 pairs, low = even row; unit: [NH] the float value of one int16 step.
// GCC's first scheduling pass, pressure-aware, for this loop: without it GCC 12 kept accumulators
// in other registers and copied them in and out on every step (5 vmovdqa64 per 16 vpdpwssd;
// BM_AttentionTileI8/pv:1 12.3 -> 11.7 us with it and the loop in one basic block, 2026-12-05).
#if defined(__GNUC__) && !defined(__clang__)
#define MLARUN_PRESSURE_AWARE_SCHEDULING \
  __attribute__((optimize("schedule-insns", "sched-pressure")))
#else
#define MLARUN_PRESSURE_AWARE_SCHEDULING
#endif

template <int NH>
MLARUN_PRESSURE_AWARE_SCHEDULING inline void PvSliceI8(const uint32_t* pairs, int64_t ldq,
                                                       const float* unit, int n_pairs,
                                                       const uint8_t* const* rows, int n_rows,
                                                       int64_t dv, int64_t c, float* acc) {
  const __m512i back0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i back1 = _mm512_add_epi32(back0, _mm512_set1_epi32(8));
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  auto load = [&](const uint8_t* p) {
    return _mm512_cvtepi8_epi16(
        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), bias));
  };
  __m512i lo[NH];
  __m512i hi[NH];
  Unrolled<NH>([&](auto h) { lo[h] = hi[h] = _mm512_setzero_si512(); });
  // A pair of rows a step, the loop one basic block: with the odd last row's test inside it, GCC
  // kept some heads' accumulators in other registers and copied them in and out on every step
  // (see MLARUN_PRESSURE_AWARE_SCHEDULING).
  auto add_pair = [&](int64_t i, __m512i v0, __m512i v1) {
    const __m512i vlo = _mm512_unpacklo_epi16(v0, v1);
    const __m512i vhi = _mm512_unpackhi_epi16(v0, v1);
    Unrolled<NH>([&](auto h) {
      const __m512i p = _mm512_set1_epi32(static_cast<int>(pairs[h * ldq + i]));
      lo[h] = DpWssd(lo[h], vlo, p);
      hi[h] = DpWssd(hi[h], vhi, p);
    });
  };
  const int64_t full_pairs = n_rows / 2;
  for (int64_t i = 0; i < full_pairs; ++i) {
    add_pair(i, load(rows[2 * i] + c), load(rows[2 * i + 1] + c));
  }
  // An odd last row: its pair's second probability is 0 (PvAccumulateI8 pads with 0), so any
  // values stand in for the missing row's and add exactly 0.
  if (full_pairs < n_pairs) {
    const __m512i v0 = load(rows[2 * full_pairs] + c);
    add_pair(full_pairs, v0, v0);
  }
  Unrolled<NH>([&](auto h) {
    const __m512 u = _mm512_set1_ps(unit[h]);
    const __m512 flo = _mm512_mul_ps(_mm512_cvtepi32_ps(lo[h]), u);
    const __m512 fhi = _mm512_mul_ps(_mm512_cvtepi32_ps(hi[h]), u);
    float* out = acc + h * dv + c;
    _mm512_storeu_ps(out,
                     _mm512_add_ps(_mm512_loadu_ps(out), _mm512_permutex2var_ps(flo, back0, fhi)));
    _mm512_storeu_ps(out + 16, _mm512_add_ps(_mm512_loadu_ps(out + 16),
                                             _mm512_permutex2var_ps(flo, back1, fhi)));
  });
}

void PvAccumulateI8(const float* p, int ldp, int n_heads, int n_rows, const uint8_t* const* rows,
                    int body_dim, int quant_group, int dv_int, float* acc) {
  const int64_t dv = dv_int;
  const int n_groups = (dv_int + quant_group - 1) / quant_group;
  const int n_pairs = (n_rows + 1) / 2;
  const int64_t ldq = int64_t{(n_pairs + 15) / 16} * 16;
  const int64_t padded_rows = 2 * ldq;
  thread_local std::vector<float> steps;     // [n_groups, padded_rows], 0 past n_rows
  thread_local std::vector<uint32_t> pairs;  // [n_groups, n_heads, ldq]
  thread_local std::vector<float> units;     // [n_groups, n_heads]
  AssignScratch(&steps, static_cast<size_t>(n_groups * padded_rows), 0.0f);
  ResizeScratch(&pairs, static_cast<size_t>(n_groups) * static_cast<size_t>(n_heads) *
                            static_cast<size_t>(ldq));
  ResizeScratch(&units, static_cast<size_t>(n_groups) * static_cast<size_t>(n_heads));
  // p <= 1 (exp of a score minus the running maximum), so with unit = max_j row_scale[j, g] / 32767
  // the int16 value of p * row_scale[j, g] is round(p * row_scale[j, g] / unit): one pass, no
  // per-head maximum (half the preparation time in BM_AbsorbedMlaDecode), and an absolute step of
  // at most 2^-15 of the largest weight a probability of 1 would get.
  for (int j = 0; j < n_rows; ++j) {  // a row's group scales are adjacent
    for (int g = 0; g < n_groups; ++g) {
      std::memcpy(&steps[static_cast<size_t>(g * padded_rows + j)],
                  rows[j] + body_dim + int64_t{4} * g, sizeof(float));
    }
  }
  for (int g = 0; g < n_groups; ++g) {
    float* steps_g = steps.data() + g * padded_rows;
    // Scales are >= 0 and the padding rows 0: one vector maximum over the padded rows (a scalar
    // running maximum was a 256-long dependency chain per group and tile).
    __m512 top_lanes = _mm512_setzero_ps();
    for (int64_t j = 0; j < padded_rows; j += 16)
      top_lanes = _mm512_max_ps(top_lanes, _mm512_loadu_ps(steps_g + j));
    const float top = _mm512_reduce_max_ps(top_lanes);
    const __m512 inv = _mm512_set1_ps(top > 0.0f ? 32767.0f / top : 0.0f);
    for (int64_t j = 0; j < padded_rows; j += 16)
      _mm512_storeu_ps(steps_g + j, _mm512_mul_ps(_mm512_loadu_ps(steps_g + j), inv));
    std::fill_n(units.data() + static_cast<ptrdiff_t>(g) * n_heads, n_heads, top / 32767.0f);
  }
  for (int h = 0; h < n_heads; ++h) {
    const float* p_h = p + static_cast<int64_t>(h) * ldp;
    for (int64_t j = 0; j < padded_rows; j += 16) {
      const int left = static_cast<int>(std::clamp<int64_t>(n_rows - j, 0, 16));
      const __m512 pv = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << left) - 1u), p_h + j);
      for (int g = 0; g < n_groups; ++g) {
        // Saturated: a p rounded a little above 1 stays 32767.
        const __m512i v = _mm512_cvtps_epi32(
            _mm512_mul_ps(pv, _mm512_loadu_ps(steps.data() + g * padded_rows + j)));
        uint32_t* out = pairs.data() + (static_cast<int64_t>(g) * n_heads + h) * ldq;
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + j / 2), _mm512_cvtsepi32_epi16(v));
      }
    }
  }
  for (int64_t c = 0; c < dv; c += 32) {
    const int g = static_cast<int>(c / quant_group);
    const uint32_t* pairs_g = pairs.data() + static_cast<int64_t>(g) * n_heads * ldq;
    const float* units_g = units.data() + static_cast<int64_t>(g) * n_heads;
    int64_t h = 0;
    for (; h + 8 <= n_heads; h += 8) {
      PvSliceI8<8>(pairs_g + h * ldq, ldq, units_g + h, n_pairs, rows, n_rows, dv, c, acc + h * dv);
    }
    for (; h < n_heads; ++h) {
      PvSliceI8<1>(pairs_g + h * ldq, ldq, units_g + h, n_pairs, rows, n_rows, dv, c, acc + h * dv);
    }
  }
}

}  // namespace

// Installed into the AVX512-BF16 table by kernels_avx512bf16.cc.
void InstallI8Attention(KernelTable* t) {
  t->dot_rows_i8 = DotRowsI8;
  t->pv_accumulate_i8 = PvAccumulateI8;
}

}  // namespace mlarun::avx512bf16
