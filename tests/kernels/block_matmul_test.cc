// KernelTable::matmul_rows_blocks of every SIMD table this CPU runs (cpu/blocks_avx2.cc,
// cpu/blocks_avx512.cc) against the scalar reference MatMulRowsBlocksScalar (block_formats.h),
// for every multipliable GGUF block format: quantised and random-byte weights, shapes whose
// columns end mid-group and mid-64 (the activations' padding), 1-17 tokens; and batch
// invariance, bitwise: a token alone or in another batch, and a row range, give the same values
// as the full product.
//
// Tolerance: the SIMD kernels sum the same exact per-block terms xs_b (s_b I_b + m_b A_b) in
// another order (and round s_b I_b + m_b A_b with one fused multiply-add), so each output must
// be within 1e-5 * sum_b |term_b| of the scalar reference (terms computed in double from the
// dequantised weights); the reordering costs ~1e-7 of it (measured up to 1.5e-7, 64 blocks).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "kernels/block_formats.h"
#include "kernels/isa.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "simd_test_util.h"

namespace mlarun {
namespace {

constexpr uint32_t kTypes[] = {kGgmlQ4_0, kGgmlQ4_1, kGgmlQ5_0, kGgmlQ5_1,
                               kGgmlQ8_0, kGgmlQ4_K, kGgmlQ5_K, kGgmlQ6_K};

bool IsK(uint32_t type) { return GetBlockFormat(type).block_values == 256; }

// Quantised weights: rows x cols Gaussian-ish values (a per-row scale, a few outliers).
std::vector<uint8_t> QuantizedWeights(const BlockFormat& f, int64_t rows, int64_t cols,
                                      uint64_t seed) {
  Rng rng(seed);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = 0.02f + 0.5f * rng.NextUniform();
    for (int64_t c = 0; c < cols; ++c) {
      float v = scale * (rng.NextSymmetric() + rng.NextSymmetric() + rng.NextSymmetric());
      if (rng.NextU64() % 97 == 0) v *= 8.0f;
      w[static_cast<size_t>(r * cols + c)] = v;
    }
  }
  std::vector<uint8_t> blocks(static_cast<size_t>(rows * f.Bytes(cols)));
  f.quantize(w.data(), rows * cols, blocks.data());
  return blocks;
}

// Random bytes (every bit pattern of the integers, Q4_K / Q5_K's 6-bit scales up to 63, Q6_K's
// int8 scales down to -128) with finite float16 scales.
std::vector<uint8_t> RandomWeights(const BlockFormat& f, int64_t rows, int64_t cols,
                                   uint64_t seed) {
  Rng rng(seed);
  const int64_t n_blocks = rows * cols / f.block_values;
  std::vector<uint8_t> blocks(static_cast<size_t>(n_blocks * f.block_bytes));
  for (uint8_t& b : blocks) b = static_cast<uint8_t>(rng.NextU64());
  auto put_f16 = [&](int64_t at, float v) {
    const uint16_t h = F32ToF16(v);
    blocks[static_cast<size_t>(at)] = static_cast<uint8_t>(h & 0xff);
    blocks[static_cast<size_t>(at) + 1] = static_cast<uint8_t>(h >> 8);
  };
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t at = b * f.block_bytes;
    if (f.ggml_type == kGgmlQ6_K) {
      put_f16(at + 208, 0.001f * rng.NextSymmetric());
      continue;
    }
    put_f16(at, 0.05f * rng.NextSymmetric());
    if (f.ggml_type != kGgmlQ4_0 && f.ggml_type != kGgmlQ5_0 && f.ggml_type != kGgmlQ8_0)
      put_f16(at + 2, 0.05f * rng.NextSymmetric());
  }
  return blocks;
}

Q8Activations Activations(int64_t n_tokens, int64_t cols, uint64_t seed) {
  const std::vector<float> x = Random(static_cast<size_t>(n_tokens * cols), seed, 3.0f);
  Q8Activations q;
  QuantizeActivationsQ8(x.data(), n_tokens, cols, &q);
  return q;
}

// Tokens [t0, t0 + n) of `x` as a batch of their own.
Q8Activations TokenRange(const Q8Activations& x, int64_t t0, int64_t n) {
  Q8Activations q;
  q.n_tokens = n;
  q.cols = x.cols;
  q.padded_cols = x.padded_cols;
  const int64_t nb = x.padded_cols / kQ8Block;
  q.values.assign(x.values.begin() + t0 * x.padded_cols,
                  x.values.begin() + (t0 + n) * x.padded_cols);
  q.scales.assign(x.scales.begin() + t0 * nb, x.scales.begin() + (t0 + n) * nb);
  q.offsets.assign(x.offsets.begin() + t0 * nb, x.offsets.begin() + (t0 + n) * nb);
  return q;
}

// sum_b |xs_b * sum_i w_i a_i| of row r and token t, from the dequantised weights, in double.
double SumAbsTerms(const BlockFormat& f, const std::vector<uint8_t>& blocks, int64_t cols,
                   int64_t r, const Q8Activations& x, int64_t t) {
  std::vector<float> w(static_cast<size_t>(cols));
  f.dequantize(blocks.data() + r * f.Bytes(cols), cols, w.data());
  double sum = 0;
  for (int64_t b = 0; b < cols / kQ8Block; ++b) {
    double term = 0;
    for (int64_t i = b * kQ8Block; i < (b + 1) * kQ8Block; ++i)
      term += static_cast<double>(w[static_cast<size_t>(i)]) * x.Row(t)[i];
    sum += std::fabs(term * x.Scales(t)[b]);
  }
  return sum;
}

std::vector<float> Product(MatMulRowsQ8Fn fn, const WeightMatrix& w, int64_t row_begin,
                           int64_t row_end, const Q8Activations& x) {
  const int64_t n = row_end - row_begin;
  std::vector<float> y(static_cast<size_t>(x.n_tokens * n), NAN);
  fn(w, row_begin, row_end, x, y.data(), n);
  return y;
}

class BlockMatMulTest : public SimdKernelTest {};

TEST_P(BlockMatMulTest, TableHasKernel) { EXPECT_NE(simd().matmul_rows_blocks, nullptr); }

// Every type, quantised and random-byte weights, several shapes and token counts.
TEST_P(BlockMatMulTest, MatchesScalarReference) {
  const MatMulRowsQ8Fn fn = simd().matmul_rows_blocks;
  ASSERT_NE(fn, nullptr);
  for (uint32_t type : kTypes) {
    const BlockFormat& f = GetBlockFormat(type);
    const std::vector<int64_t> col_list = IsK(type) ? std::vector<int64_t>{256, 512, 768, 1280}
                                                    : std::vector<int64_t>{32, 96, 160, 512, 544};
    for (int64_t cols : col_list) {
      for (int random_bytes = 0; random_bytes < 2; ++random_bytes) {
        const int64_t rows = 37;
        const uint64_t seed = type * 1000 + static_cast<uint64_t>(cols) + random_bytes;
        const std::vector<uint8_t> blocks = random_bytes ? RandomWeights(f, rows, cols, seed)
                                                         : QuantizedWeights(f, rows, cols, seed);
        const WeightMatrix w{.dtype = DType::kBlocks,
                             .rows = rows,
                             .cols = cols,
                             .data = blocks.data(),
                             .blocks = &f};
        for (int64_t n_tokens : {1, 3, 8, 17}) {
          SCOPED_TRACE(std::string(f.name) + " cols " + std::to_string(cols) + " tokens " +
                       std::to_string(n_tokens) + (random_bytes ? " random bytes" : " quantised"));
          const Q8Activations x = Activations(n_tokens, cols, seed + 7);
          const std::vector<float> got = Product(fn, w, 0, rows, x);
          const std::vector<float> want = Product(MatMulRowsBlocksScalar, w, 0, rows, x);
          int bad = 0;
          for (int64_t t = 0; t < n_tokens; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const size_t i = static_cast<size_t>(t * rows + r);
              const double tol = 1e-5 * SumAbsTerms(f, blocks, cols, r, x, t);
              if (!(std::fabs(static_cast<double>(got[i]) - want[i]) <= tol) && bad++ < 5) {
                ADD_FAILURE() << "row " << r << " token " << t << ": " << got[i] << " vs "
                              << want[i] << " (tolerance " << tol << ")";
              }
            }
          }
        }
      }
    }
  }
}

// Token t alone, tokens in another batch, and rows [5, 29): bitwise the full product's values.
TEST_P(BlockMatMulTest, BatchInvariant) {
  const MatMulRowsQ8Fn fn = simd().matmul_rows_blocks;
  ASSERT_NE(fn, nullptr);
  for (uint32_t type : kTypes) {
    const BlockFormat& f = GetBlockFormat(type);
    for (int64_t cols :
         IsK(type) ? std::vector<int64_t>{768, 1280} : std::vector<int64_t>{96, 544}) {
      SCOPED_TRACE(std::string(f.name) + " cols " + std::to_string(cols));
      const int64_t rows = 37, n_tokens = 17;
      const std::vector<uint8_t> blocks = QuantizedWeights(f, rows, cols, type + 11);
      const WeightMatrix w{
          .dtype = DType::kBlocks, .rows = rows, .cols = cols, .data = blocks.data(), .blocks = &f};
      const Q8Activations x = Activations(n_tokens, cols, type + 12);
      const std::vector<float> full = Product(fn, w, 0, rows, x);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const std::vector<float> alone = Product(fn, w, 0, rows, TokenRange(x, t, 1));
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(F32ToBits(alone[static_cast<size_t>(r)]),
                    F32ToBits(full[static_cast<size_t>(t * rows + r)]))
              << "token " << t << " row " << r;
        }
      }
      for (auto [t0, n] :
           {std::pair<int64_t, int64_t>{3, 8}, {1, 5}, {9, 3}, {4, 2}, {0, 7}, {10, 4}}) {
        const std::vector<float> part = Product(fn, w, 0, rows, TokenRange(x, t0, n));
        for (int64_t t = 0; t < n; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_EQ(F32ToBits(part[static_cast<size_t>(t * rows + r)]),
                      F32ToBits(full[static_cast<size_t>((t0 + t) * rows + r)]))
                << "tokens [" << t0 << ", " << t0 + n << ") token " << t << " row " << r;
          }
        }
      }
      const int64_t r0 = 5, r1 = 29;
      const std::vector<float> range = Product(fn, w, r0, r1, x);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = r0; r < r1; ++r) {
          ASSERT_EQ(F32ToBits(range[static_cast<size_t>(t * (r1 - r0) + (r - r0))]),
                    F32ToBits(full[static_cast<size_t>(t * rows + r)]))
              << "token " << t << " row " << r;
        }
      }
    }
  }
}

// Long rows: several passes over the tokens (their rearranged activations fill the kernels'
// stack buffer), and rows too long for it (heap scratch).
TEST_P(BlockMatMulTest, LongRows) {
  const MatMulRowsQ8Fn fn = simd().matmul_rows_blocks;
  ASSERT_NE(fn, nullptr);
  for (uint32_t type : {kGgmlQ4_0, kGgmlQ6_K}) {
    const BlockFormat& f = GetBlockFormat(type);
    for (auto [cols, n_tokens] : {std::pair<int64_t, int64_t>{8192, 17}, {50176, 3}}) {
      SCOPED_TRACE(std::string(f.name) + " cols " + std::to_string(cols));
      const int64_t rows = 5;
      const std::vector<uint8_t> blocks = QuantizedWeights(f, rows, cols, type + 21);
      const WeightMatrix w{
          .dtype = DType::kBlocks, .rows = rows, .cols = cols, .data = blocks.data(), .blocks = &f};
      const Q8Activations x = Activations(n_tokens, cols, type + 22);
      const std::vector<float> got = Product(fn, w, 0, rows, x);
      const std::vector<float> want = Product(MatMulRowsBlocksScalar, w, 0, rows, x);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const std::vector<float> alone = Product(fn, w, 0, rows, TokenRange(x, t, 1));
        for (int64_t r = 0; r < rows; ++r) {
          const size_t i = static_cast<size_t>(t * rows + r);
          EXPECT_NEAR(got[i], want[i], 1e-5 * SumAbsTerms(f, blocks, cols, r, x, t))
              << "row " << r << " token " << t;
          EXPECT_EQ(F32ToBits(alone[static_cast<size_t>(r)]), F32ToBits(got[i]));
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, BlockMatMulTest, ::testing::ValuesIn(SimdIsas()), IsaTestName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BlockMatMulTest);

}  // namespace
}  // namespace mlarun
