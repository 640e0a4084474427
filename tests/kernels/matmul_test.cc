// MatMul for every weight dtype against a double-precision product of the decoded weights.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "kernels/quant.h"

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

// The bytes a product reads (what `mlarun bench` divides by time), hand-computed per format.
TEST(MatMulTest, WeightBytesCountValuesAndScales) {
  const WeightMatrix bf16{.dtype = DType::kBF16, .rows = 3, .cols = 5};
  const uint16_t dummy = 0;
  WeightMatrix with_data = bf16;
  with_data.data = &dummy;
  EXPECT_EQ(WeightBytes(bf16, 0, 3), 0);  // an empty matrix reads nothing
  EXPECT_EQ(WeightBytes(with_data, 1, 3), 2 * 5 * 2);
  EXPECT_EQ(WeightBytes(with_data, 2, 2), 0);
  // Q8: 2,048 columns are 64 blocks of 32 values plus a 2-byte scale each (34 per 32, Q8_0's).
  const WeightMatrix q8{.dtype = DType::kI8, .rows = 16, .cols = 2048, .data = &dummy};
  EXPECT_EQ(WeightBytes(q8, 0, 16), 16 * 2048 * 34 / 32);
  // 100 columns are padded to 128 (Q8PaddedCols): 128 values and 4 scales per row.
  const WeightMatrix q8_narrow{.dtype = DType::kI8, .rows = 40, .cols = 100, .data = &dummy};
  EXPECT_EQ(WeightBytes(q8_narrow, 5, 8), 3 * (128 + 4 * 2));
  // FP8 with 128 x 128 block scales: rows [100, 200) touch scale rows 0 and 1, 2 column blocks.
  const float scale = 1.0f;
  const WeightMatrix fp8{.dtype = DType::kF8E4M3,
                         .rows = 300,
                         .cols = 256,
                         .data = &dummy,
                         .block_scale = &scale,
                         .block_rows = 128,
                         .block_cols = 128};
  EXPECT_EQ(WeightBytes(fp8, 100, 200), 100 * 256 + 2 * 2 * 4);
  EXPECT_EQ(WeightBytes(fp8, 0, 300), 300 * 256 + 3 * 2 * 4);
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

// A packed Q8 matrix built from row-major Q8 rows (what the loader does), with the rows kept.
struct PackedQ8Fixture {
  int64_t rows, cols;
  std::vector<int8_t> q;         // row-major [rows, padded cols]
  std::vector<uint16_t> scales;  // [rows, blocks]
  std::vector<uint8_t> packed_values;
  std::vector<uint16_t> packed_scales;
  WeightMatrix m;

  PackedQ8Fixture(int64_t n_rows, int64_t n_cols, uint64_t seed) : rows(n_rows), cols(n_cols) {
    const int64_t stride = Q8PaddedCols(cols);
    const int64_t blocks = stride / kQ8Block;
    q.resize(static_cast<size_t>(rows * stride));
    scales.resize(static_cast<size_t>(rows * blocks));
    Rng rng(seed);
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = rng.NextSymmetric();
      QuantizeWeightRowQ8(row.data(), cols, q.data() + r * stride, scales.data() + r * blocks);
    }
    packed_values.resize(static_cast<size_t>(PackedQ8ValueBytes(rows, cols)));
    packed_scales.resize(static_cast<size_t>(PackedQ8ScaleCount(rows, cols)));
    InitPackedQ8(rows, cols, packed_values.data(), packed_scales.data());
    for (int64_t r = 0; r < rows; ++r) {
      PackQ8Row(r, cols, q.data() + r * stride, scales.data() + r * blocks, packed_values.data(),
                packed_scales.data());
    }
    m = {.dtype = DType::kI8,
         .rows = rows,
         .cols = cols,
         .data = packed_values.data(),
         .q8_scales = packed_scales.data(),
         .q8_layout = Q8Layout::kPacked16};
  }
};

// A batch of jobs with uneven row counts (cut by MatMulBatch into work items of shrinking sizes,
// some ending at a job's end) gives bitwise what one MatMulRows per job gives on one thread, on
// 2 and 3 threads, and covers every row exactly once.
TEST(PackedQ8Test, BatchOfUnevenJobsEqualsSeparateProductsOnAnyThreadCount) {
  const PackedQ8Fixture a(3000, 256, 21), b(200, 256, 22);
  Rng rng(23);
  std::vector<float> x(size_t{2} * 256), x2(256);
  for (float& v : x) v = rng.NextSymmetric();
  for (float& v : x2) v = rng.NextSymmetric();
  const int64_t n = 2;
  // Jobs over rows [0, 1408), [1408, 1417), [1417, 3000) of a (two tokens) and all of b (one).
  struct Part {
    const WeightMatrix* w;
    int64_t begin, end, n_tokens;
    const float* x;
  };
  const Part parts[] = {{&a.m, 0, 1408, n, x.data()},
                        {&a.m, 1408, 1417, n, x.data()},
                        {&a.m, 1417, 3000, n, x.data()},
                        {&b.m, 0, 200, 1, x2.data()}};
  for (Isa isa : SupportedIsas()) {
    ThreadPool one(1);
    Exec exec1{one, GetKernelTable(isa)};
    std::vector<std::vector<float>> expected;
    for (const Part& p : parts) {
      expected.emplace_back(static_cast<size_t>((p.end - p.begin) * p.n_tokens));
      MatMulRows(exec1, *p.w, p.begin, p.end, p.x, p.n_tokens, expected.back().data());
    }
    for (int threads : {2, 3}) {
      ThreadPool pool(threads);
      Exec exec{pool, GetKernelTable(isa)};
      std::vector<std::vector<float>> got;
      std::vector<MatMulJob> jobs;
      for (const Part& p : parts) {
        got.emplace_back(static_cast<size_t>((p.end - p.begin) * p.n_tokens), std::nanf(""));
      }
      for (size_t i = 0; i < std::size(parts); ++i) {
        const Part& p = parts[i];
        jobs.push_back({p.w, p.begin, p.end, p.x, p.n_tokens, got[i].data()});
      }
      MatMulBatch(exec, jobs);
      for (size_t i = 0; i < std::size(parts); ++i) {
        // NaN-filled outputs: a row no item covered would differ (NaN != anything).
        EXPECT_EQ(got[i], expected[i]) << IsaName(isa) << " threads " << threads << " job " << i;
      }
    }
  }
}

TEST(PackedQ8Test, RowsRoundTripThroughThePackedLayout) {
  const PackedQ8Fixture f(37, 100, 3);  // a partial last group, padded columns
  const int64_t stride = Q8PaddedCols(f.cols);
  const int64_t blocks = stride / kQ8Block;
  // 3 groups of 16 rows x 128 padded columns.
  EXPECT_EQ(PackedQ8ValueBytes(f.rows, f.cols), 3 * 16 * 128);
  std::vector<int8_t> q(static_cast<size_t>(stride));
  std::vector<uint16_t> s(static_cast<size_t>(blocks));
  for (int64_t r = 0; r < f.rows; ++r) {
    f.m.Q8Row(r, q.data(), s.data());
    ASSERT_TRUE(std::equal(q.begin(), q.end(), f.q.begin() + r * stride)) << r;
    ASSERT_TRUE(std::equal(s.begin(), s.end(), f.scales.begin() + r * blocks)) << r;
  }
  // Row 17, column 5 sits in group 1, block 0, quad 1, lane 1, byte 1, offset by 128.
  EXPECT_EQ(f.packed_values[1 * 4 * 512 + 64 + 4 + 1], uint8_t(f.q[17 * stride + 5] + 128));
  // Padding rows are zero weights with zero scales.
  f.m.Q8Row(47, q.data(), s.data());
  EXPECT_TRUE(std::all_of(q.begin(), q.end(), [](int8_t v) { return v == 0; }));
  EXPECT_TRUE(std::all_of(s.begin(), s.end(), [](uint16_t v) { return v == 0; }));
}

TEST(PackedQ8Test, EveryIsaMatchesBlockwiseDoublesAndIsBitwiseEqualToScalar) {
  for (int64_t cols : {24, 64, 160, 2048}) {
    // 165 rows = 10 groups and a partial one, so the single-token tiles of 4 groups run too
    // (also from the unaligned start of the last range below).
    const PackedQ8Fixture f(165, cols, 4);
    const int64_t stride = Q8PaddedCols(cols);
    const int64_t blocks = stride / kQ8Block;
    const int64_t n = 9;
    Rng rng(5);
    std::vector<float> x(static_cast<size_t>(n * cols));
    for (float& v : x) v = rng.NextSymmetric();
    Q8Activations acts;
    QuantizeActivationsQ8(x.data(), n, cols, &acts);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t sum = 0;
        for (int i = 0; i < kQ8Block; ++i) sum += acts.Row(t)[b * kQ8Block + i];
        ASSERT_EQ(acts.Offsets(t)[b], -128 * sum);
      }
    }
    // Independent reference: sum over blocks of (int dot) * w_scale * x_scale, in double.
    std::vector<double> reference(static_cast<size_t>(n * f.rows));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < f.rows; ++r) {
        double acc = 0;
        for (int64_t b = 0; b < blocks; ++b) {
          int64_t dot = 0;
          for (int i = 0; i < kQ8Block; ++i) {
            dot += int64_t{f.q[r * stride + b * kQ8Block + i]} * acts.Row(t)[b * kQ8Block + i];
          }
          acc += static_cast<double>(dot) * F16ToF32(f.scales[r * blocks + b]) * acts.Scales(t)[b];
        }
        reference[static_cast<size_t>(t * f.rows + r)] = acc;
      }
    }
    std::vector<float> scalar(reference.size());
    GetKernelTable(Isa::kScalar).matmul_rows_q8(f.m, 0, f.rows, acts, scalar.data(), f.rows);
    for (size_t i = 0; i < scalar.size(); ++i)
      ASSERT_NEAR(scalar[i], reference[i], 1e-5 * (1 + std::fabs(reference[i])))
          << cols << " " << i;
    ThreadPool pool(2);
    for (Isa isa : SupportedIsas()) {
      Exec exec{pool, GetKernelTable(isa)};
      std::vector<float> y(reference.size());
      MatMul(exec, f.m, x.data(), n, y.data());
      EXPECT_EQ(y, scalar) << IsaName(isa) << " cols " << cols;
      // Unaligned row ranges (partial groups at both ends) and one token at a time.
      for (int64_t t = 0; t < n; ++t) {
        std::vector<float> part(static_cast<size_t>(f.rows));
        MatMulRows(exec, f.m, 0, 5, x.data() + t * cols, 1, part.data());
        MatMulRows(exec, f.m, 5, 21, x.data() + t * cols, 1, part.data() + 5);
        MatMulRows(exec, f.m, 21, f.rows, x.data() + t * cols, 1, part.data() + 21);
        for (int64_t r = 0; r < f.rows; ++r) {
          ASSERT_EQ(part[static_cast<size_t>(r)], scalar[static_cast<size_t>(t * f.rows + r)])
              << IsaName(isa) << " cols " << cols << " token " << t << " row " << r;
        }
      }
    }
  }
}

// The largest products: weights and activations of magnitude 127 in every sign pattern (the
// pair sums of vpmaddubsw-based kernels at their bound), each block's integer dot product
// checked by hand: x = +-127 everywhere (scale 1 / 127 for inputs +-1), w = +-127.
TEST(PackedQ8Test, ExtremeValuesGiveExactBlockDotsOnEveryIsa) {
  const int64_t rows = 32, cols = 128;
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      // Row r: sign pattern by bits of (r + c) so rows differ; row 0 all +1, row 1 all -1.
      const bool negative = r == 1 || (r >= 2 && ((r * 7 + c * 3) / (1 + r % 5)) % 2 == 1);
      w[static_cast<size_t>(r * cols + c)] = negative ? -1.0f : 1.0f;
    }
  }
  std::vector<float> x(static_cast<size_t>(2 * cols));
  for (int64_t c = 0; c < cols; ++c) {
    x[static_cast<size_t>(c)] = -1.0f;                             // token 0: all -127
    x[static_cast<size_t>(cols + c)] = c % 3 == 0 ? 1.0f : -1.0f;  // token 1: mixed
  }
  const int64_t stride = Q8PaddedCols(cols), blocks = stride / kQ8Block;
  std::vector<int8_t> q(static_cast<size_t>(rows * stride));
  std::vector<uint16_t> scales(static_cast<size_t>(rows * blocks));
  std::vector<uint8_t> values(static_cast<size_t>(PackedQ8ValueBytes(rows, cols)));
  std::vector<uint16_t> packed_scales(static_cast<size_t>(PackedQ8ScaleCount(rows, cols)));
  InitPackedQ8(rows, cols, values.data(), packed_scales.data());
  for (int64_t r = 0; r < rows; ++r) {
    QuantizeWeightRowQ8(w.data() + r * cols, cols, q.data() + r * stride,
                        scales.data() + r * blocks);
    PackQ8Row(r, cols, q.data() + r * stride, scales.data() + r * blocks, values.data(),
              packed_scales.data());
  }
  ASSERT_EQ(q[0], 127);
  ASSERT_EQ(q[static_cast<size_t>(stride)], -127);
  const WeightMatrix m{.dtype = DType::kI8,
                       .rows = rows,
                       .cols = cols,
                       .data = values.data(),
                       .q8_scales = packed_scales.data(),
                       .q8_layout = Q8Layout::kPacked16};
  // y = sum over blocks of (127 * 127 * sum of sign products) * (1 / 127)^2 in float: exactly
  // the sum of sign products, an integer, when the float16 scale of 1 / 127 is used for w.
  const float w_scale = F16ToF32(scales[0]);
  ThreadPool pool(2);
  for (Isa isa : SupportedIsas()) {
    Exec exec{pool, GetKernelTable(isa)};
    std::vector<float> y(static_cast<size_t>(2 * rows));
    MatMul(exec, m, x.data(), 2, y.data());
    for (int64_t t = 0; t < 2; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        double expected = 0;
        for (int64_t b = 0; b < blocks; ++b) {
          int64_t dot = 0;
          for (int64_t c = b * kQ8Block; c < (b + 1) * kQ8Block; ++c) {
            const int64_t wq = w[static_cast<size_t>(r * cols + c)] > 0 ? 127 : -127;
            const int64_t xq = x[static_cast<size_t>(t * cols + c)] > 0 ? 127 : -127;
            dot += wq * xq;
          }
          expected += static_cast<double>(dot) * w_scale * (1.0 / 127.0);
        }
        EXPECT_NEAR(y[static_cast<size_t>(t * rows + r)], expected, 1e-3)
            << IsaName(isa) << " token " << t << " row " << r;
      }
    }
    // Row 0 (all +127) against token 0 (all -127): -127 * 127 * 128 scaled back: about -128.
    EXPECT_NEAR(y[0], -128.0 * w_scale * 127.0, 1e-3) << IsaName(isa);
  }
}

TEST(PackedQ8Test, RowMajorQ8IsRefusedByMatMul) {
  const PackedQ8Fixture f(16, 64, 6);
  WeightMatrix row_major = f.m;
  row_major.q8_layout = Q8Layout::kRowMajor;
  row_major.data = f.q.data();
  row_major.q8_scales = f.scales.data();
  ThreadPool pool(1);
  Exec exec{pool, GetKernelTable(Isa::kScalar)};
  std::vector<float> x(64, 0.5f), y(16);
  EXPECT_THROW(MatMul(exec, row_major, x.data(), 1, y.data()), Error);
}

}  // namespace
}  // namespace mlarun
