// KernelTable::matmul_rows_f8_bf16 (FP8 weights against activations rounded to bf16 after their
// block scale; the AVX512-BF16 tables) against hand-computed values and a double-precision
// reference, and its batch invariance.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "kernels/fp8_test_util.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/simd_test_util.h"

namespace mlarun {
namespace {

class F8Bf16MatMulTest : public SimdKernelTest {
 protected:
  void SetUp() override {
    if (simd().matmul_rows_f8_bf16 == nullptr) GTEST_SKIP() << "no FP8 bf16 kernel in this ISA";
  }
};

// bf16(256 scale x) as float: what the kernel multiplies the weights / 256 by.
float ScaledBf16(float scale, float x) { return BF16ToF32(F32ToBF16(scale * 256.0f * x)); }

// Every byte but the NaNs is widened exactly: through a one-hot x, y = (value / 256) *
// bf16(256 scale), a product of 4 and 8 significant bits, exact in float32, for scales of both
// signs and several sizes per column block; in tiles of 1 and of 8 + 5 tokens, rows of 4 and 1.
TEST_P(F8Bf16MatMulTest, WidensEveryByteExactly) {
  const int64_t rows = 5;
  const std::vector<uint8_t> w = EveryFp8ByteRows(rows);
  // Blocks of 2 rows x 64 columns: [3, 4] scales.
  const std::vector<float> scales = {1.0f / 256, 0.0123f, -3.5f, 1e-3f, 0x1p20f, 2.0e-3f,
                                     7.0f,       -0.75f,  1.0f,  5.0f,  -2.0f,   0.5f};
  const WeightMatrix m = Fp8Matrix(w, rows, 256, scales, 2, 64);
  for (const int64_t n_tokens : {1, 13}) {
    ForEachOneHotColumn(simd().matmul_rows_f8_bf16, m, n_tokens,
                        [&](float got, int64_t r, int64_t c) {
                          const uint8_t byte = w[static_cast<size_t>(r * m.cols + c)];
                          const float scale = scales[static_cast<size_t>(r / 2 * 4 + c / 64)];
                          // Other columns add +-0 products: -0 may come out +0, hence ==.
                          EXPECT_EQ(got, F8E4M3ToF32(byte) / 256.0f * ScaledBf16(scale, 1.0f))
                              << "byte " << int{byte} << " row " << r << " tokens " << n_tokens;
                        });
  }
}

// A NaN byte (0x7f, 0xff) in a row's 32-column steps or in its tail (45 columns: 32 + 13) makes
// that row's products NaN for every token, whatever the x (zeros too); the other rows are
// untouched.
TEST_P(F8Bf16MatMulTest, NanWeightMakesItsRowNan) {
  ExpectNanBytesMakeOnlyTheirRowsNan(simd().matmul_rows_f8_bf16, 45, {40, 3, 31});
}

// Random weights and per-block scales (row blocks of 16 and 32 across 37 rows, so row ranges and
// tiles cross them; column blocks of 64 and 128; tails past the 32-column steps): within float32
// summation error of sum_c (w / 256) * bf16(256 scale x) in double, within the activations'
// bf16 rounding of the exact kernel, and each token alone over split row ranges bitwise the
// batched result (13 tokens: a tile of 8 and one of 5).
TEST_P(F8Bf16MatMulTest, MatchesDoubleReferenceAndIsBatchInvariant) {
  for (const int64_t cols : {5, 32, 150, 1027}) {
    for (const int block_rows : {16, 32}) {
      const int block_cols = cols > 500 ? 128 : 64;
      const int64_t rows = 37;
      const int64_t n_tokens = 13;
      const std::vector<float> wf = Random(static_cast<size_t>(rows * cols), 31);
      std::vector<uint8_t> w(wf.size());
      for (size_t i = 0; i < w.size(); ++i) w[i] = F32ToF8E4M3(wf[i] * 300.0f);
      const int64_t row_blocks = (rows + block_rows - 1) / block_rows;
      const int64_t col_blocks = (cols + block_cols - 1) / block_cols;
      const std::vector<float> noise = Random(static_cast<size_t>(row_blocks * col_blocks), 32);
      std::vector<float> scales(noise.size());
      for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.004f * (1.0f + 0.9f * noise[i]);
      const WeightMatrix m = Fp8Matrix(w, rows, cols, scales, block_rows, block_cols);
      const std::vector<float> x = Random(static_cast<size_t>(n_tokens * cols), 33, 2.0f);
      std::vector<float> got(static_cast<size_t>(n_tokens * rows));
      std::vector<float> exact(got.size());
      simd().matmul_rows_f8_bf16(m, 0, rows, x.data(), n_tokens, got.data(), rows);
      scalar().matmul_rows(m, 0, rows, x.data(), n_tokens, exact.data(), rows);
      for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          const RowReference ref = Fp8RowReference(
              m, w, scales, x.data() + t * cols, r, [](float value, float scale, float xc) {
                return double{value} / 256 * ScaledBf16(scale, xc);
              });
          const double expected = ref.sum;
          const double magnitude = ref.magnitude;
          const size_t i = static_cast<size_t>(t * rows + r);
          EXPECT_NEAR(got[i], expected, 1e-6 * magnitude + 1e-30)
              << "cols " << cols << " row " << r << " token " << t;
          EXPECT_NEAR(got[i], exact[i], 0x1p-8 * magnitude + 1e-30)
              << "cols " << cols << " row " << r << " token " << t;
        }
      }
      for (int64_t t = 0; t < n_tokens; ++t) {
        std::vector<float> alone(static_cast<size_t>(rows));
        simd().matmul_rows_f8_bf16(m, 0, 7, x.data() + t * cols, 1, alone.data(), rows);
        simd().matmul_rows_f8_bf16(m, 7, 19, x.data() + t * cols, 1, alone.data() + 7, rows);
        simd().matmul_rows_f8_bf16(m, 19, rows, x.data() + t * cols, 1, alone.data() + 19, rows);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(alone[static_cast<size_t>(r)], got[static_cast<size_t>(t * rows + r)])
              << "cols " << cols << " token " << t << " row " << r;
        }
      }
    }
  }
}

// MatMulBatch sends FP8 weights to the kernel where the table has it.
TEST_P(F8Bf16MatMulTest, MatMulBatchUsesItForFp8Weights) {
  const int64_t rows = 70;
  const int64_t cols = 300;
  const std::vector<float> wf = Random(static_cast<size_t>(rows * cols), 41);
  std::vector<uint8_t> w(wf.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = F32ToF8E4M3(wf[i] * 100.0f);
  const std::vector<float> scales(static_cast<size_t>(1 * 3), 0.01f);
  const WeightMatrix m = Fp8Matrix(w, rows, cols, scales, 128, 128);
  const std::vector<float> x = Random(static_cast<size_t>(3 * cols), 42);
  std::vector<float> direct(static_cast<size_t>(3 * rows));
  std::vector<float> batched(direct.size());
  simd().matmul_rows_f8_bf16(m, 0, rows, x.data(), 3, direct.data(), rows);
  ThreadPool pool(2);
  Exec exec{pool, simd()};
  MatMul(exec, m, x.data(), 3, batched.data());
  EXPECT_EQ(batched, direct);
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, F8Bf16MatMulTest, ::testing::ValuesIn(SimdIsas()),
                         IsaTestName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(F8Bf16MatMulTest);

}  // namespace
}  // namespace mlarun
