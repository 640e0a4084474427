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
};

}  // namespace mlarun::avx512

#define SIMD_NAMESPACE avx512
#include "kernels/cpu/simd_impl.h"

namespace mlarun::detail {
const KernelTable& Avx512KernelTable() { return avx512::kTable; }
}  // namespace mlarun::detail
