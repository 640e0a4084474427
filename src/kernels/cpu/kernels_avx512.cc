// AVX-512 (F/BW/VL/DQ) kernels: 16-lane float vectors, masked tails. Compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma; only called when the CPU supports them.
#include <immintrin.h>

#include "kernels/isa.h"

namespace mlarun::avx512 {

struct V {
  using F = __m512;
  static constexpr int kWidth = 16;
  static constexpr Isa kIsa = Isa::kAvx512;
  static F Zero() { return _mm512_setzero_ps(); }
  static F Set1(float a) { return _mm512_set1_ps(a); }
  static F Load(const float* p) { return _mm512_loadu_ps(p); }
  static F LoadTail(const float* p, int n) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
  }
  static F LoadBf16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static F LoadBf16Tail(const uint16_t* p, int n) {
    const __m256i h = _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1u), p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static F Fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F Mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static float Reduce(F a) { return _mm512_reduce_add_ps(a); }
  static void Store(float* p, F a) { _mm512_storeu_ps(p, a); }

  // Q8: 64 int8 values (two blocks) per step; sign trick so that VNNI's u8 x s8 product sees
  // |w| and x * sign(w) (both within [-127, 127], no saturation).
  static constexpr int kQStep = 64;
  using Q = __m512i;
  struct PreparedQ {
    __m512i abs;
    __mmask64 negative;
  };
  static Q LoadQ(const int8_t* p) { return _mm512_loadu_si512(p); }
  static PreparedQ PrepareQ(Q w) { return {_mm512_abs_epi8(w), _mm512_movepi8_mask(w)}; }
  static F DotQ(const PreparedQ& w, Q x) {
    const __m512i signed_x = _mm512_mask_sub_epi8(x, w.negative, _mm512_setzero_si512(), x);
    return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), w.abs, signed_x));
  }
  // Lanes 0-7 carry block 0's scale, lanes 8-15 block 1's.
  static F BlockScales(const float* s) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(s[0])), _mm256_set1_ps(s[1]),
                              1);
  }
  static F BlockScalesF16(const uint16_t* s) {
    const float f[2] = {_cvtsh_ss(s[0]), _cvtsh_ss(s[1])};
    return BlockScales(f);
  }
};

}  // namespace mlarun::avx512

#define SIMD_NAMESPACE avx512
#include "kernels/cpu/simd_impl.h"

namespace mlarun::detail {
const KernelTable& Avx512KernelTable() { return avx512::kTable; }
}  // namespace mlarun::detail
