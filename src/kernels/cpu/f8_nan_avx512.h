// The AVX-512 scan for FP8 E4M3 NaN bytes, shared by the exact FP8 row tiles (kernels_avx512.cc)
// and the bf16 dot-product FP8 kernel (f8_matmul_avx512bf16.cc). Defined once, in
// kernels_avx512.cc (compiled for AVX-512); call only on CPUs that have it.
#pragma once

#include <cstdint>

namespace mlarun::avx512 {

// Whether any of the n bytes at p is an FP8 E4M3 NaN (0x7f or 0xff: low 7 bits set).
bool AnyF8Nan(const uint8_t* p, int64_t n);

}  // namespace mlarun::avx512
