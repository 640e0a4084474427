// FP8 E4M3 test inputs and checks shared by the exact kernels' tests (simd_test.cc) and the bf16
// dot-product kernel's (f8_bf16_matmul_test.cc): both kernels have matmul_rows's signature.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "kernels/matmul.h"

namespace mlarun {

using MatMulRowsFn = void (*)(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                              const float* x, int64_t n_tokens, float* y, int64_t ldy);

// An FP8 matrix over `w` [rows, cols] with `scales` [ceil(rows / block_rows), ceil(cols /
// block_cols)].
inline WeightMatrix Fp8Matrix(const std::vector<uint8_t>& w, int64_t rows, int64_t cols,
                              const std::vector<float>& scales, int block_rows, int block_cols) {
  return {.dtype = DType::kF8E4M3,
          .rows = rows,
          .cols = cols,
          .data = w.data(),
          .block_scale = scales.data(),
          .block_rows = block_rows,
          .block_cols = block_cols};
}

// A double-precision reference for row r of the FP8 matrix `m` over bytes `w` with `scales` (as
// Fp8Matrix takes them) and one token's x [m.cols]: the sum over columns c of term(w's value,
// its block's scale, x[c]), and the sum of their magnitudes (for error bounds).
struct RowReference {
  double sum = 0.0;
  double magnitude = 0.0;
};
template <typename Term>
RowReference Fp8RowReference(const WeightMatrix& m, const std::vector<uint8_t>& w,
                             const std::vector<float>& scales, const float* x, int64_t r,
                             Term&& term) {
  const int64_t col_blocks = (m.cols + m.block_cols - 1) / m.block_cols;
  RowReference ref;
  for (int64_t c = 0; c < m.cols; ++c) {
    const float scale =
        scales[static_cast<size_t>(r / m.block_rows * col_blocks + c / m.block_cols)];
    const double t = term(F8E4M3ToF32(w[static_cast<size_t>(r * m.cols + c)]), scale, x[c]);
    ref.sum += t;
    ref.magnitude += std::fabs(t);
  }
  return ref;
}

// [rows, 256] bytes, row r holding every E4M3 byte but the two NaNs, rotated per row (byte c +
// 37 r; a NaN byte replaced by the one below it).
inline std::vector<uint8_t> EveryFp8ByteRows(int64_t rows) {
  const int64_t cols = 256;
  std::vector<uint8_t> w(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      const auto byte = static_cast<uint8_t>(c + 37 * r);
      w[static_cast<size_t>(r * cols + c)] = (byte & 0x7f) == 0x7f ? byte - 1 : byte;
    }
  }
  return w;
}

// Reads every column c of `m` through a one-hot x, n_tokens columns per call (token t's x is 1 at
// column c0 + t, 0 elsewhere), and calls expect(got, r, c) for every row r.
template <typename Expect>
void ForEachOneHotColumn(MatMulRowsFn matmul, const WeightMatrix& m, int64_t n_tokens,
                         Expect&& expect) {
  const int64_t rows = m.rows;
  const int64_t cols = m.cols;
  std::vector<float> x(static_cast<size_t>(n_tokens * cols));
  std::vector<float> y(static_cast<size_t>(n_tokens * rows));
  for (int64_t c0 = 0; c0 < cols; c0 += n_tokens) {
    std::fill(x.begin(), x.end(), 0.0f);
    for (int64_t t = 0; t < n_tokens && c0 + t < cols; ++t)
      x[static_cast<size_t>(t * cols + c0 + t)] = 1.0f;
    matmul(m, 0, rows, x.data(), n_tokens, y.data(), rows);
    for (int64_t t = 0; t < n_tokens && c0 + t < cols; ++t) {
      for (int64_t r = 0; r < rows; ++r) expect(y[static_cast<size_t>(t * rows + r)], r, c0 + t);
    }
  }
}

// A NaN byte in a row's vectors or in its tail past them, in tiles of several rows and of one:
// a 9 x n_cols matrix of 1.0 (0x38, block scales 1, blocks of 16 x 32) with 0x7f, 0xff and 0x7f
// at columns nan_cols of rows 1, 2 and 8. For 1, 2 and 13 tokens and x all 0 or all 0.5, those
// rows give NaN and the others value * n_cols.
inline void ExpectNanBytesMakeOnlyTheirRowsNan(MatMulRowsFn matmul, int64_t n_cols,
                                               const int64_t (&nan_cols)[3]) {
  const int64_t n_rows = 9;
  std::vector<uint8_t> w(static_cast<size_t>(n_rows * n_cols), 0x38);
  w[static_cast<size_t>(1 * n_cols + nan_cols[0])] = 0x7f;
  w[static_cast<size_t>(2 * n_cols + nan_cols[1])] = 0xff;
  w[static_cast<size_t>(8 * n_cols + nan_cols[2])] = 0x7f;
  const std::vector<float> ones(static_cast<size_t>((n_cols + 31) / 32), 1.0f);
  const WeightMatrix m = Fp8Matrix(w, n_rows, n_cols, ones, 16, 32);
  for (const int64_t n_tokens : {1, 2, 13}) {
    for (const float value : {0.0f, 0.5f}) {
      const std::vector<float> x(static_cast<size_t>(n_tokens * n_cols), value);
      std::vector<float> y(static_cast<size_t>(n_tokens * n_rows));
      matmul(m, 0, n_rows, x.data(), n_tokens, y.data(), n_rows);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < n_rows; ++r) {
          const float got = y[static_cast<size_t>(t * n_rows + r)];
          if (r == 1 || r == 2 || r == 8) {
            EXPECT_TRUE(std::isnan(got)) << "row " << r << " tokens " << n_tokens;
          } else {
            EXPECT_EQ(got, value * static_cast<float>(n_cols)) << "row " << r;
          }
        }
      }
    }
  }
}

}  // namespace mlarun
