// The SIMD versions of KernelTable::matmul_rows_blocks (GGUF block formats against Q8
// activations, block_formats.h): y[t * ldy + (r - row_begin)] = dot_q8(row r, token t) for
// r in [row_begin, row_end), t < x.n_tokens, for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and
// Q6_K (other formats: MatMulRowsBlocksScalar). Each is defined in a file compiled for its ISA
// (cpu/blocks_avx2.cc, cpu/blocks_avx512.cc) and only called on CPUs that support it. Every
// (r, t) output is computed by the same operations in the same order whatever the batch and the
// row range (batch invariant); the sums run in another order than the scalar reference's.
#pragma once

#include <cstdint>

namespace mlarun {

struct WeightMatrix;
struct Q8Activations;

namespace detail {

// AVX2 + FMA + F16C (vpmaddubsw).
void MatMulRowsBlocksAvx2(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                          const Q8Activations& x, float* y, int64_t ldy);
// AVX-512 F/BW/VL/DQ + VNNI (vpdpbusd).
void MatMulRowsBlocksAvx512(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                            const Q8Activations& x, float* y, int64_t ldy);

}  // namespace detail
}  // namespace mlarun
