// MatMul for every weight dtype against a double-precision product of the decoded weights.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <vector>

#include "core/rng.h"

namespace mlarun {
namespace {

TEST(MatMulTest, AllDtypesMatchDecodedProduct) {
  const int64_t rows = 37, cols = 150, n = 3;
  Rng rng(5);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (float& v : w) v = rng.NextSymmetric();
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (float& v : x) v = rng.NextSymmetric();
  std::vector<uint16_t> bf16(w.size()), f16(w.size());
  std::vector<uint8_t> fp8(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    bf16[i] = F32ToBF16(w[i]);
    f16[i] = F32ToF16(w[i]);
    fp8[i] = F32ToF8E4M3(w[i] * 100.0f);
  }
  const std::vector<float> scales = {0.01f, 0.02f, 0.03f,
                                     0.04f};  // [ceil(37 / 32), ceil(150 / 128)] = [2, 2] blocks
  ThreadPool pool(2);
  Exec exec{pool, GetKernelTable(Isa::kScalar)};
  const WeightMatrix mats[] = {
      {.dtype = DType::kF32, .rows = rows, .cols = cols, .data = w.data()},
      {.dtype = DType::kBF16, .rows = rows, .cols = cols, .data = bf16.data()},
      {.dtype = DType::kF16, .rows = rows, .cols = cols, .data = f16.data()},
      {.dtype = DType::kF8E4M3,
       .rows = rows,
       .cols = cols,
       .data = fp8.data(),
       .block_scale = scales.data(),
       .block_rows = 32,
       .block_cols = 128},
  };
  for (const WeightMatrix& m : mats) {
    std::vector<float> y(static_cast<size_t>(n * rows));
    MatMul(exec, m, x.data(), n, y.data());
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      m.DecodeRow(r, row.data());
      if (m.dtype == DType::kF8E4M3) {
        const float scale = scales[static_cast<size_t>((r / 32) * 2 + 0)];
        EXPECT_EQ(row[0], F8E4M3ToF32(fp8[static_cast<size_t>(r * cols)]) * scale);
      }
      for (int64_t t = 0; t < n; ++t) {
        double expected = 0;
        for (int64_t c = 0; c < cols; ++c)
          expected += static_cast<double>(row[static_cast<size_t>(c)]) *
                      x[static_cast<size_t>(t * cols + c)];
        EXPECT_NEAR(y[static_cast<size_t>(t * rows + r)], expected, 1e-4) << DTypeName(m.dtype);
      }
    }
  }
}

TEST(MatMulTest, ResultIndependentOfThreadCount) {
  const int64_t rows = 100, cols = 64, n = 5;
  Rng rng(9);
  std::vector<float> w(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(n * cols));
  for (float& v : w) v = rng.NextSymmetric();
  for (float& v : x) v = rng.NextSymmetric();
  const WeightMatrix m{.dtype = DType::kF32, .rows = rows, .cols = cols, .data = w.data()};
  std::vector<float> y1(static_cast<size_t>(n * rows)), y3(y1.size());
  ThreadPool one(1), three(3);
  for (Isa isa : SupportedIsas()) {
    Exec exec1{one, GetKernelTable(isa)};
    Exec exec3{three, GetKernelTable(isa)};
    MatMul(exec1, m, x.data(), n, y1.data());
    MatMul(exec3, m, x.data(), n, y3.data());
    EXPECT_EQ(y1, y3) << IsaName(isa);
  }
}

}  // namespace
}  // namespace mlarun
