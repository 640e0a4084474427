// Measures how many multiply-adds per second `vdpbf16ps` (AVX512-BF16: 32 per instruction) does
// against the 512-bit float32 FMA (16 per instruction) on this core. Its throughput differs by
// microarchitecture: the same rate as an FMA on AMD Zen 4 (twice the multiply-adds), a quarter of
// it on the Intel Xeon VMs measured here (half the multiply-adds, docs/performance.md), where
// float32 FMAs on exactly widened bf16 weights are the faster kernels. Compiled with
// -mavx512bf16; only called on CPUs that have it.
#include <immintrin.h>

#include <algorithm>
#include <chrono>

#include "kernels/kernel_table.h"

namespace mlarun::detail {

namespace {

constexpr int64_t kIterations = 4000;  // x 12 instructions: ~0.05 ms (FMA) to ~0.2 ms

// Seconds for kIterations x 12 independent instructions, `op` applied to 12 accumulators (12
// chains hide the 4-5 cycle latency of two issues per cycle).
template <typename Acc, typename Op>
double Time(Acc init, Op op) {
  Acc a0 = init, a1 = init, a2 = init, a3 = init, a4 = init, a5 = init;
  Acc a6 = init, a7 = init, a8 = init, a9 = init, a10 = init, a11 = init;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < kIterations; ++i) {
    a0 = op(a0), a1 = op(a1), a2 = op(a2), a3 = op(a3), a4 = op(a4), a5 = op(a5);
    a6 = op(a6), a7 = op(a7), a8 = op(a8), a9 = op(a9), a10 = op(a10), a11 = op(a11);
    // Keeps the chains in registers and the loop from being folded.
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5));
    __asm__ volatile("" : "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

double MeasureBf16DotSpeedup() {
  const __m512 w = _mm512_set1_ps(0.999f);
  const __m512 b = _mm512_set1_ps(1e-3f);
  const __m512bh p = (__m512bh)_mm512_set1_epi16(0x3f80);  // bf16 1.0
  const __m512bh q = (__m512bh)_mm512_set1_epi16(0x3a83);  // bf16 ~1e-3
  auto fma = [&](__m512 a) { return _mm512_fmadd_ps(a, w, b); };
  auto dot = [&](__m512 a) { return _mm512_dpbf16_ps(a, p, q); };
  // Best of 5 after one warm-up of each (the core may raise its AVX-512 clock on first use).
  double fma_s = Time(_mm512_setzero_ps(), fma);
  double dot_s = Time(_mm512_setzero_ps(), dot);
  for (int i = 0; i < 5; ++i) {
    fma_s = std::min(fma_s, Time(_mm512_setzero_ps(), fma));
    dot_s = std::min(dot_s, Time(_mm512_setzero_ps(), dot));
  }
  // Multiply-adds per second: 32 per vdpbf16ps, 16 per FMA.
  return (32.0 / dot_s) / (16.0 / fma_s);
}

}  // namespace mlarun::detail
