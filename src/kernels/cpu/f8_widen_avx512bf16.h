// FP8 E4M3 bytes widened exactly to bf16 in AVX-512 registers, for the AVX512-BF16 FP8 kernels:
// row-major weights (f8_matmul_avx512bf16.cc) and packed ones (f8_packed_avx512bf16.cc). Include
// only from translation units compiled with the AVX512-BF16 flags.
#pragma once

#include <immintrin.h>

#include <bit>
#include <cstdint>

#include "kernels/matmul.h"

namespace mlarun::avx512bf16 {

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

// 32 FP8 E4M3 bytes as bf16 of value / 256, exactly (NaN bytes, 0x7f and 0xff, give 480 / 256:
// the row-major kernel finds rows holding one by avx512::AnyF8Nan, packing refuses them). The
// byte sign-extended to 16 bits and shifted left by 4 is s ssss eeee mmm 0000; keeping bits 15
// and 10-4 and ORing 0x3800 into the exponent (e + 112 < 128: no carry) is the bf16
// 2^(e - 15) * 1.mmm = value / 256 for e > 0. For e = 0 (zero and the subnormals m * 2^-9) the
// word is s | 0x3800 | m << 4, which the table's word m (the index: the byte's low 5 bits, 00mmm
// there) corrects by one xor.
inline __m512bh Widen(__m256i bytes, const WidenConstants& k) {
  const __m512i s = _mm512_cvtepi8_epi16(bytes);
  const __m512i normal = _mm512_ternarylogic_epi32(_mm512_slli_epi16(s, 4), k.keep, k.bias, 0xea);
  const __mmask32 subnormal = _mm512_testn_epi16_mask(s, k.exponent);
  return (__m512bh)_mm512_xor_si512(normal,
                                    _mm512_maskz_permutexvar_epi16(subnormal, s, k.subnormal_fix));
}

// KernelTable::matmul_rows_f8_packed (f8_packed_avx512bf16.cc): packed FP8 weights against
// activations rounded to bf16, x_bf16 [n_tokens, w.cols].
void MatMulRowsF8Packed(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                        const uint16_t* x_bf16, int64_t n_tokens, float* y, int64_t ldy);

}  // namespace mlarun::avx512bf16
