// In-register transposes and lane-pair sums of AVX-512 accumulators shared by the AVX512-BF16
// attention kernels
// (kernels_avx512bf16.cc, attention_i8_avx512bf16.cc; both compiled with AVX512-BF16 flags, so
// these inline functions live in that namespace only).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/unrolled.h"

namespace mlarun::avx512bf16 {

// s[l * lds + i] = lane l of acc[i] for the 16 lanes and 8 rows: an in-register transpose
// (unpack pairs of rows, then pairs of pairs, then gather 128-bit blocks) and one 8-float store per
// lane, instead of 128 scalar stores.
inline void StoreTransposed8x16(const __m512 (&acc)[8], float* s, int64_t lds) {
  __m512 pairs[8];  // block b of pairs[2k]: lanes 4b, 4b+1 of rows 2k, 2k+1; of [2k+1]: 4b+2, 4b+3
  Unrolled<4>([&](auto k) {
    pairs[2 * k] = _mm512_unpacklo_ps(acc[2 * k], acc[2 * k + 1]);
    pairs[2 * k + 1] = _mm512_unpackhi_ps(acc[2 * k], acc[2 * k + 1]);
  });
  // quads[h][m]: block b holds lane 4b + m of rows 4h .. 4h + 3.
  __m512 quads[2][4];
  Unrolled<2>([&](auto h) {
    const __m512d a = _mm512_castps_pd(pairs[4 * h]);
    const __m512d b = _mm512_castps_pd(pairs[4 * h + 1]);
    const __m512d c = _mm512_castps_pd(pairs[4 * h + 2]);
    const __m512d d = _mm512_castps_pd(pairs[4 * h + 3]);
    quads[h][0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    quads[h][1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    quads[h][2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    quads[h][3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  });
  Unrolled<4>([&](auto m) {
    // [rows 0-3 of lane m, rows 4-7 of lane m, the same for lane 4 + m], then lanes 8 + m, 12 + m.
    const __m512 low = _mm512_shuffle_f32x4(quads[0][m], quads[1][m], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 high = _mm512_shuffle_f32x4(quads[0][m], quads[1][m], _MM_SHUFFLE(3, 2, 3, 2));
    const __m512 lanes01 = _mm512_shuffle_f32x4(low, low, _MM_SHUFFLE(3, 1, 2, 0));
    const __m512 lanes23 = _mm512_shuffle_f32x4(high, high, _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_ps(s + m * lds, _mm512_castps512_ps256(lanes01));
    _mm256_storeu_ps(s + (4 + m) * lds, _mm512_extractf32x8_ps(lanes01, 1));
    _mm256_storeu_ps(s + (8 + m) * lds, _mm512_castps512_ps256(lanes23));
    _mm256_storeu_ps(s + (12 + m) * lds, _mm512_extractf32x8_ps(lanes23, 1));
  });
}

// s[l * lds + i] = lane l of acc[i] for the 16 lanes and R rows (R = 8: StoreTransposed8x16).
template <int R>
inline void StoreTransposedRx16(const __m512 (&acc)[R], float* s, int64_t lds) {
  if constexpr (R == 8) {
    StoreTransposed8x16(acc, s, lds);
  } else {
    alignas(64) float lanes[R][16];
    Unrolled<R>([&](auto i) { _mm512_store_ps(lanes[i], acc[i]); });
    for (int l = 0; l < 16; ++l) {
      for (int i = 0; i < R; ++i) s[l * lds + i] = lanes[i][l];
    }
  }
}

// Lane l of a pair-lane sum: lane 2l (even) / 2l + 1 (odd) of the first vector for l < 8, of the
// second after (_mm512_permutex2var_*).
inline __m512i EvenLanes() {
  return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}
inline __m512i OddLanes() { return _mm512_add_epi32(EvenLanes(), _mm512_set1_epi32(1)); }

// Heads in pair lanes (low: heads 0-7, high: 8-15, head m in lanes 2m, 2m + 1) to one lane per
// head: lane h = even lane + odd lane of head h.
inline __m512 AddLanePairs(__m512 low, __m512 high) {
  return _mm512_add_ps(_mm512_permutex2var_ps(low, EvenLanes(), high),
                       _mm512_permutex2var_ps(low, OddLanes(), high));
}

}  // namespace mlarun::avx512bf16
