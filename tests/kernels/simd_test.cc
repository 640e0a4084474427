// The SIMD matmul, GEMM, quantisation and elementwise kernels against the scalar reference, for
// every ISA this CPU supports (the scalar path itself is covered by the other kernel tests), and
// batching invariance per ISA. The attention kernels: simd_attention_test.cc; the row-wise
// kernels (RMSNorm, RoPE, softmax, top-k): ops_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/error.h"
#include "kernels/fp8_test_util.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/packed_bf16.h"
#include "kernels/quant.h"
#include "kernels/simd_test_util.h"

namespace mlarun {
namespace {

class SimdTest : public SimdKernelTest {};

TEST_P(SimdTest, MatMulMatchesScalarForEveryDtypeAndBatchSize) {
  for (int64_t cols : {5, 16, 150, 1024 + 3}) {
    const int64_t rows = 37;
    const std::vector<float> w = Random(static_cast<size_t>(rows * cols), 1);
    std::vector<uint16_t> bf16(w.size()), f16(w.size());
    std::vector<uint8_t> fp8(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      bf16[i] = F32ToBF16(w[i]);
      f16[i] = F32ToF16(w[i]);
      fp8[i] = F32ToF8E4M3(w[i] * 200.0f);
    }
    const std::vector<float> scales((rows + 31) / 32 * ((cols + 63) / 64), 0.005f);
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
         .block_cols = 64},
    };
    const int64_t max_tokens = 13;  // crosses the fused-conversion threshold
    const std::vector<float> x = Random(static_cast<size_t>(max_tokens * cols), 2);
    for (const WeightMatrix& m : mats) {
      std::vector<float> expected(static_cast<size_t>(max_tokens * rows));
      std::vector<float> batched(expected.size());
      scalar().matmul_rows(m, 0, rows, x.data(), max_tokens, expected.data(), rows);
      simd().matmul_rows(m, 0, rows, x.data(), max_tokens, batched.data(), rows);
      for (size_t i = 0; i < expected.size(); ++i) {
        EXPECT_NEAR(batched[i], expected[i], 2e-5 * std::sqrt(static_cast<double>(cols)))
            << DTypeName(m.dtype) << " cols " << cols << " i " << i;
      }
      // Each token alone, and odd row ranges, give bitwise the batched result.
      for (int64_t t = 0; t < max_tokens; ++t) {
        std::vector<float> alone(static_cast<size_t>(rows));
        simd().matmul_rows(m, 0, 7, x.data() + t * cols, 1, alone.data(), rows);
        simd().matmul_rows(m, 7, rows, x.data() + t * cols, 1, alone.data() + 7, rows);
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(alone[static_cast<size_t>(r)], batched[static_cast<size_t>(t * rows + r)])
              << DTypeName(m.dtype) << " cols " << cols << " token " << t << " row " << r;
        }
      }
    }
  }
}

// FP8 E4M3 weights are widened exactly: every byte value, times block scales from subnormal to
// 2^100, read through a one-hot x gives bitwise F8E4M3ToF32(byte) * scale, in registers (one
// token) and through converted rows (13 tokens); a NaN byte (0x7f, 0xff) makes its row's
// products NaN, in the vectors or the tail.
TEST_P(SimdTest, Fp8WeightsWidenBitwiseForEveryByteAndScale) {
  const int64_t rows = 4;
  std::vector<uint8_t> w = EveryFp8ByteRows(rows);
  // Blocks of 2 rows x 64 columns: [2, 4] scales.
  const std::vector<float> scales = {1.0f,     0.0123f, -3.5f, 1e-40f,
                                     0x1p100f, 2.0e-3f, 7.0f,  0x1p-120f};
  const WeightMatrix m = Fp8Matrix(w, rows, 256, scales, 2, 64);
  for (const int64_t n_tokens : {1, 13}) {
    ForEachOneHotColumn(simd().matmul_rows, m, n_tokens, [&](float got, int64_t r, int64_t c) {
      const uint8_t byte = w[static_cast<size_t>(r * m.cols + c)];
      const float scale = scales[static_cast<size_t>(r / 2 * 4 + c / 64)];
      // Other columns add +-0 products: an exact -0 weight may come out +0, hence ==.
      EXPECT_EQ(got, F8E4M3ToF32(byte) * scale)
          << "byte " << int{byte} << " row " << r << " tokens " << n_tokens;
    });
  }
  for (const uint8_t nan : {uint8_t{0x7f}, uint8_t{0xff}}) {
    w[5] = nan;  // row 0
    for (const int64_t n_tokens : {1, 13}) {
      const std::vector<float> x(static_cast<size_t>(n_tokens * m.cols), 0.5f);
      std::vector<float> y(static_cast<size_t>(n_tokens * rows));
      simd().matmul_rows(m, 0, rows, x.data(), n_tokens, y.data(), rows);
      for (int64_t t = 0; t < n_tokens; ++t) {
        EXPECT_TRUE(std::isnan(y[static_cast<size_t>(t * rows)])) << int{nan} << " " << n_tokens;
        EXPECT_FALSE(std::isnan(y[static_cast<size_t>(t * rows + 1)]));
      }
    }
  }
  // 21 columns: 16 + a 5-column tail.
  ExpectNanBytesMakeOnlyTheirRowsNan(simd().matmul_rows, 21, {18, 3, 15});
}

// decode_row gives WeightMatrix::DecodeRow bitwise (NaN as NaN): every bf16 and every f16 bit
// pattern (one 65,536-value row, row 1 of two, so the row offset counts), every FP8 byte times
// block scales from subnormal to 2^100 with a column tail past the vectors, f32, and the layouts
// that fall back to DecodeRow (packed bf16, Q8).
TEST_P(SimdTest, DecodeRowIsBitwiseDecodeRowForEveryValue) {
  auto expect_same = [](const WeightMatrix& m, int64_t r, const KernelTable& k) {
    std::vector<float> expected(static_cast<size_t>(m.cols));
    std::vector<float> got(static_cast<size_t>(m.cols), -7.0f);
    m.DecodeRow(r, expected.data());
    k.decode_row(m, r, got.data());
    for (int64_t c = 0; c < m.cols; ++c) {
      const float e = expected[static_cast<size_t>(c)];
      const float g = got[static_cast<size_t>(c)];
      if (std::isnan(e)) {
        ASSERT_TRUE(std::isnan(g)) << DTypeName(m.dtype) << " col " << c;
      } else {
        ASSERT_EQ(std::bit_cast<uint32_t>(e), std::bit_cast<uint32_t>(g))
            << DTypeName(m.dtype) << " col " << c << ": " << e << " vs " << g;
      }
    }
  };
  const int64_t patterns = 65536;
  std::vector<uint16_t> all16(static_cast<size_t>(2 * patterns));
  for (int64_t i = 0; i < patterns; ++i) {
    all16[static_cast<size_t>(patterns + i)] = static_cast<uint16_t>(i);
    all16[static_cast<size_t>(i)] = static_cast<uint16_t>(patterns - 1 - i);
  }
  for (const DType dtype : {DType::kBF16, DType::kF16}) {
    const WeightMatrix m{.dtype = dtype, .rows = 2, .cols = patterns, .data = all16.data()};
    expect_same(m, 1, simd());
    expect_same(m, 0, simd());
  }
  // FP8: rows of 256 + 21 columns (each byte once, then a tail), blocks of 2 rows x 64 columns.
  const int64_t rows = 4;
  const int64_t cols = 256 + 21;
  std::vector<uint8_t> fp8(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < fp8.size(); ++i) fp8[i] = static_cast<uint8_t>(i * 7 % 256 + i / 256);
  const std::vector<float> scales = {1.0f,    0.0123f, -3.5f,     1e-40f, 0x1p100f,
                                     2.0e-3f, 7.0f,    0x1p-120f, 0.5f,   3.0f};
  const WeightMatrix m8{.dtype = DType::kF8E4M3,
                        .rows = rows,
                        .cols = cols,
                        .data = fp8.data(),
                        .block_scale = scales.data(),
                        .block_rows = 2,
                        .block_cols = 64};
  for (int64_t r = 0; r < rows; ++r) expect_same(m8, r, simd());
  const std::vector<float> f32 = Random(static_cast<size_t>(3 * 37), 9);
  const WeightMatrix m32{.dtype = DType::kF32, .rows = 3, .cols = 37, .data = f32.data()};
  for (int64_t r = 0; r < 3; ++r) expect_same(m32, r, simd());
  // Layouts decoded by DecodeRow itself.
  const int64_t packed_cols = 70;
  std::vector<uint16_t> bf16(static_cast<size_t>(20 * packed_cols));
  for (size_t i = 0; i < bf16.size(); ++i)
    bf16[i] = F32ToBF16(static_cast<float>(i) * 0.25f - 9.0f);
  std::vector<uint32_t> packed(PackedBf16Bytes(20, packed_cols) / sizeof(uint32_t));
  PackBf16Rows(bf16.data(), packed_cols, 0, 20, packed.data());
  const WeightMatrix mp{.dtype = DType::kBF16,
                        .rows = 20,
                        .cols = packed_cols,
                        .data = packed.data(),
                        .layout16 = Layout16::kPacked16};
  for (int64_t r = 0; r < 20; ++r) expect_same(mp, r, simd());
  for (int64_t r = 0; r < 3; ++r) expect_same(m8, r, scalar());
}

// pack_bf16_rows and pack_f16_rows (where a table has them) are PackBf16Rows / PackF16Rows
// bitwise, their return value (the largest magnitude) included: whole groups and partial ones,
// column pairs in whole vectors of 16 and a tail, finite rows and rows with inf or NaN.
TEST_P(SimdTest, PackRowsKernelsAreBitwiseTheScalarPackers) {
  if (simd().pack_bf16_rows == nullptr && simd().pack_f16_rows == nullptr) {
    GTEST_SKIP() << "PackBf16Rows and PackF16Rows themselves on this table";
  }
  const int64_t rows = 37;
  for (const bool f16 : {false, true}) {
    if (f16 ? simd().pack_f16_rows == nullptr : simd().pack_bf16_rows == nullptr) continue;
    for (const int64_t cols : {30, 64, 70, 2048 + 38}) {
      std::vector<uint16_t> w(static_cast<size_t>(rows * cols));
      const std::vector<float> values = Random(w.size(), static_cast<uint64_t>(cols));
      for (size_t i = 0; i < w.size(); ++i)
        w[i] = f16 ? F32ToF16(values[i] * 3.0f) : F32ToBF16(values[i] * 3.0f);
      const uint16_t inf = f16 ? 0xfc00 : 0xff80;  // -inf
      const uint16_t nan = f16 ? 0x7e01 : 0x7fc1;
      for (const uint16_t special : {uint16_t{0}, inf, nan}) {
        if (special != 0) w[static_cast<size_t>(20 * cols + cols - 1)] = special;  // row 20, last
        const std::pair<int64_t, int64_t> ranges[] = {{0, rows}, {16, 32}, {3, 20}, {32, rows}};
        for (const auto& [begin, end] : ranges) {
          std::vector<uint32_t> expected(PackedBf16Bytes(rows, cols) / sizeof(uint32_t), 7u);
          std::vector<uint32_t> got(expected.size(), 7u);
          const uint16_t largest = f16 ? PackF16Rows(w.data(), cols, begin, end,
                                                     reinterpret_cast<uint16_t*>(expected.data()))
                                       : PackBf16Rows(w.data(), cols, begin, end, expected.data());
          const uint16_t got_largest =
              f16 ? simd().pack_f16_rows(w.data(), cols, begin, end,
                                         reinterpret_cast<uint16_t*>(got.data()))
                  : simd().pack_bf16_rows(w.data(), cols, begin, end, got.data());
          const std::string where = std::string(f16 ? "f16 " : "bf16 ") + std::to_string(cols) +
                                    " [" + std::to_string(begin) + ", " + std::to_string(end) +
                                    ") " + std::to_string(special);
          ASSERT_EQ(got_largest, largest) << where;
          ASSERT_EQ(got, expected) << where;
        }
      }
    }
  }
}

// pack_f8_rows (where a table has it) is PackF8Rows bitwise, its NaN flag included: whole groups
// and partial ones, column pairs in whole vectors of 32 and a tail, a NaN byte (either sign) in a
// vector's columns, in the tail, or in a partial group's rows, or none.
TEST_P(SimdTest, PackF8RowsKernelIsBitwisePackF8Rows) {
  if (simd().pack_f8_rows == nullptr) GTEST_SKIP() << "PackF8Rows itself on this table";
  const int64_t rows = 37;
  for (const int64_t cols : {30, 64, 70, 2048 + 38}) {
    std::vector<uint8_t> clean(static_cast<size_t>(rows * cols));
    uint64_t state = static_cast<uint64_t>(cols);
    for (uint8_t& b : clean) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      b = static_cast<uint8_t>(state >> 56);
      if ((b & 0x7f) == 0x7f) b ^= 1;  // no NaN unless placed
    }
    // (row, column, byte): none, in a whole group's vector columns, in its tail, in a partial
    // group.
    const std::tuple<int64_t, int64_t, uint8_t> nans[] = {
        {0, 0, 0}, {20, 1, 0xff}, {20, cols - 1, 0x7f}, {33, cols / 2, 0x7f}};
    for (const auto& [nan_row, nan_col, nan_byte] : nans) {
      std::vector<uint8_t> w = clean;
      if (nan_byte != 0) w[static_cast<size_t>(nan_row * cols + nan_col)] = nan_byte;
      const std::pair<int64_t, int64_t> ranges[] = {{0, rows}, {16, 32}, {3, 20}, {32, rows}};
      for (const auto& [begin, end] : ranges) {
        std::vector<uint8_t> expected(PackedF8Bytes(rows, cols), 7);
        std::vector<uint8_t> got(expected.size(), 7);
        const bool nan = PackF8Rows(w.data(), cols, begin, end, expected.data());
        const std::string where = std::to_string(cols) + " [" + std::to_string(begin) + ", " +
                                  std::to_string(end) + ") NaN at " + std::to_string(nan_row) +
                                  ", " + std::to_string(nan_col);
        ASSERT_EQ(nan, nan_byte != 0 && nan_row >= begin && nan_row < end) << where;
        ASSERT_EQ(simd().pack_f8_rows(w.data(), cols, begin, end, got.data()), nan) << where;
        ASSERT_EQ(got, expected) << where;
      }
    }
  }
}

// bf16 row-major weights with x in pair form (AVX2): close to the scalar product, and each token
// alone, in odd row ranges, bitwise equal to the batched result on both sides of the
// fused-conversion threshold (8 tokens: 13 converts the rows, 1 widens them in registers).
TEST_P(SimdTest, Bf16PairFormMatMulMatchesScalarAndIsBatchInvariant) {
  if (simd().matmul_rows_pair_x == nullptr) GTEST_SKIP() << "no pair-form matmul in this ISA";
  for (int64_t cols : {5, 16, 40, 150, 1024 + 3}) {
    const int64_t rows = 37;
    const std::vector<float> w = Random(static_cast<size_t>(rows * cols), 5);
    std::vector<uint16_t> bf16(w.size());
    for (size_t i = 0; i < w.size(); ++i) bf16[i] = F32ToBF16(w[i]);
    const WeightMatrix m{.dtype = DType::kBF16, .rows = rows, .cols = cols, .data = bf16.data()};
    const int64_t n_tokens = 13;
    const std::vector<float> x = Random(static_cast<size_t>(n_tokens * cols), 6);
    std::vector<float> x_pairs(x.size());
    for (int64_t t = 0; t < n_tokens; ++t)
      simd().bf16_pair_form(x.data() + t * cols, cols, x_pairs.data() + t * cols);
    std::vector<float> expected(static_cast<size_t>(n_tokens * rows));
    std::vector<float> batched(expected.size());
    scalar().matmul_rows(m, 0, rows, x.data(), n_tokens, expected.data(), rows);
    simd().matmul_rows_pair_x(m, 0, rows, x_pairs.data(), n_tokens, batched.data(), rows);
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_NEAR(batched[i], expected[i], 2e-5 * std::sqrt(static_cast<double>(cols)))
          << "cols " << cols << " i " << i;
    }
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::vector<float> alone(static_cast<size_t>(rows));
      simd().matmul_rows_pair_x(m, 0, 7, x_pairs.data() + t * cols, 1, alone.data(), rows);
      simd().matmul_rows_pair_x(m, 7, rows, x_pairs.data() + t * cols, 1, alone.data() + 7, rows);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(alone[static_cast<size_t>(r)], batched[static_cast<size_t>(t * rows + r)])
            << "cols " << cols << " token " << t << " row " << r;
      }
    }
  }
}

TEST_P(SimdTest, GemmIsBitwiseScalarAndMatchesDoubles) {
  for (int64_t m : {1, 3, 8, 13, 16, 50}) {  // 50: B packed in panels
    for (int64_t n : {5, 16, 31, 32, 47, 128}) {
      for (int64_t k : {1, 7, 192, 600}) {  // 600: two k chunks
        const int64_t lda = k + 3, ldb = n + 5, ldc = n + 2;
        const std::vector<float> a = Random(static_cast<size_t>(m * lda), 31);
        const std::vector<float> b = Random(static_cast<size_t>(k * ldb), 32);
        // Sentinels around C catch writes outside [m, n].
        std::vector<float> c_ref(static_cast<size_t>(m * ldc), -7.0f), c(c_ref.size(), -7.0f);
        scalar().gemm(m, n, k, a.data(), lda, b.data(), ldb, c_ref.data(), ldc);
        simd().gemm(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc);
        ASSERT_EQ(c, c_ref) << m << " " << n << " " << k;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < ldc; ++j) {
            const float got = c_ref[static_cast<size_t>(i * ldc + j)];
            if (j >= n) {
              ASSERT_EQ(got, -7.0f);
              continue;
            }
            double want = 0;
            for (int64_t kk = 0; kk < k; ++kk)
              want += double{a[static_cast<size_t>(i * lda + kk)]} *
                      b[static_cast<size_t>(kk * ldb + j)];
            ASSERT_NEAR(got, want, 1e-5 * static_cast<double>(k));
          }
        }
      }
    }
  }
}

TEST_P(SimdTest, ActivationQuantisationIsBitwiseScalar) {
  for (int64_t cols : {1, 17, 32, 100, 2048}) {
    std::vector<float> x = Random(static_cast<size_t>(cols), 21, 3.0f);
    if (cols >= 32) {
      // A block whose values hit rounding ties exactly (max 127: scale 1, x * inv = x).
      for (int i = 0; i < 32; ++i) x[static_cast<size_t>(i)] = -15.5f + static_cast<float>(i);
      x[31] = 127.0f;
    }
    const int64_t padded = Q8PaddedCols(cols);
    const int64_t blocks = padded / kQ8Block;
    std::vector<int8_t> q_ref(static_cast<size_t>(padded)), q(q_ref.size());
    std::vector<float> s_ref(static_cast<size_t>(blocks)), s(s_ref.size());
    std::vector<int32_t> offsets_ref(static_cast<size_t>(blocks)), offsets(offsets_ref.size());
    scalar().quantize_row_q8(x.data(), cols, q_ref.data(), s_ref.data(), offsets_ref.data());
    simd().quantize_row_q8(x.data(), cols, q.data(), s.data(), offsets.data());
    EXPECT_EQ(q, q_ref) << cols;
    EXPECT_EQ(s, s_ref) << cols;
    EXPECT_EQ(offsets, offsets_ref) << cols;
    if (cols >= 32) {
      EXPECT_EQ(q_ref[0], -16);  // -15.5 rounds to even
      EXPECT_EQ(q_ref[1], -14);  // -14.5 too
    }
  }
}

TEST_P(SimdTest, Q8SignSplitIsBitwiseScalar) {
  if (simd().split_q8_row == nullptr) GTEST_SKIP() << "this table's Q8 tiles read no sign split";
  const int64_t padded = 256;
  std::vector<int8_t> q(static_cast<size_t>(padded));
  Rng rng(31);
  for (int8_t& v : q) v = static_cast<int8_t>(static_cast<int>(rng.NextU64() % 255) - 127);
  for (int i = 0; i < kQ8Block; ++i) q[static_cast<size_t>(i)] = -127;  // the largest magnitudes
  q[32] = 0;
  q[33] = 127;
  q[34] = -1;
  std::vector<uint8_t> mag_ref(q.size()), mag(q.size(), 1), mask_ref(q.size()), mask(q.size(), 1);
  std::vector<int32_t> neg_ref(static_cast<size_t>(padded / kQ8Block)), neg(neg_ref.size(), 1);
  SplitQ8Row(q.data(), padded, mag_ref.data(), mask_ref.data(), neg_ref.data());
  simd().split_q8_row(q.data(), padded, mag.data(), mask.data(), neg.data());
  EXPECT_EQ(mag, mag_ref);
  EXPECT_EQ(mask, mask_ref);
  EXPECT_EQ(neg, neg_ref);
  // Hand-checked values of the reference.
  EXPECT_EQ(neg_ref[0], 32 * 127);
  EXPECT_EQ(mag_ref[0], 127);
  EXPECT_EQ(mask_ref[0], 0x7f);
  EXPECT_EQ(mag_ref[32], 0);
  EXPECT_EQ(mask_ref[32], 0x80);
  EXPECT_EQ(mask_ref[33], 0x80);
  EXPECT_EQ(mag_ref[34], 1);
  EXPECT_EQ(mask_ref[34], 0x7f);
  // The table's product refuses activations quantised without the split, naming what is missing.
  const std::vector<float> x = Random(64, 32);
  Q8Activations unsplit;
  QuantizeActivationsQ8(x.data(), 1, 64, &unsplit);
  std::vector<uint8_t> values(static_cast<size_t>(PackedQ8ValueBytes(16, 64)));
  std::vector<uint16_t> scales(static_cast<size_t>(PackedQ8ScaleCount(16, 64)));
  InitPackedQ8(16, 64, values.data(), scales.data());
  const WeightMatrix m{.dtype = DType::kI8,
                       .rows = 16,
                       .cols = 64,
                       .data = values.data(),
                       .q8_scales = scales.data(),
                       .q8_layout = Q8Layout::kPacked16};
  std::vector<float> y(16);
  try {
    simd().matmul_rows_q8(m, 0, 16, unsplit, y.data(), 16);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lack the sign split"), std::string::npos) << e.what();
  }
}

TEST_P(SimdTest, WeightQuantisationIsBitwiseScalar) {
  for (int64_t cols : {1, 17, 32, 100, 2048 + 5}) {
    // Rows from 1e-9 (float16-subnormal and zero scales) past 8.3e6 (scales that overflow
    // float16 to inf, so every value quantises to 0).
    for (float magnitude : {1e-9f, 1e-7f, 1e-5f, 1e-3f, 0.1f, 1.0f, 37.0f, 6e4f, 1e6f, 1e7f}) {
      std::vector<float> w = Random(static_cast<size_t>(cols), 23, magnitude);
      if (cols >= 64) std::fill(w.begin() + 32, w.begin() + 64, -0.0f);  // an all-zero block
      if (cols >= 128) {
        // Scales exactly halfway between two float16 values round to the even one: 1 + 2^-11
        // to 1, 1 + 3 * 2^-11 to 1 + 2^-9.
        w[64] = 127.0f * (1.0f + 0x1p-11f);
        w[96] = -127.0f * (1.0f + 3 * 0x1p-11f);
      }
      const int64_t padded = Q8PaddedCols(cols);
      std::vector<int8_t> q_ref(static_cast<size_t>(padded), 1), q(q_ref.size(), 2);
      std::vector<uint16_t> s_ref(static_cast<size_t>(padded / kQ8Block)), s(s_ref.size());
      scalar().quantize_weight_row_q8(w.data(), cols, q_ref.data(), s_ref.data());
      simd().quantize_weight_row_q8(w.data(), cols, q.data(), s.data());
      EXPECT_EQ(q, q_ref) << cols << " " << magnitude;
      EXPECT_EQ(s, s_ref) << cols << " " << magnitude;
      if (cols >= 128 && magnitude < 1.0f) {  // the two halfway scales rounded to even
        EXPECT_EQ(s[2], F32ToF16(1.0f));
        EXPECT_EQ(s[3], F32ToF16(1.0f + 0x1p-9f));
      }
      // The values were computed with the float16 scale: each within half a step of w.
      for (int64_t i = 0; i < cols; ++i) {
        const float scale = F16ToF32(s[static_cast<size_t>(i / kQ8Block)]);
        const float wi = w[static_cast<size_t>(i)];
        if (scale > 0.0f && std::isfinite(scale) && std::abs(wi / scale) < 127.0f) {
          ASSERT_LE(std::abs(q[static_cast<size_t>(i)] * scale - wi), 0.5f * scale * 1.0001f)
              << cols << " " << magnitude << " " << i;
        }
      }
    }
  }
}

TEST_P(SimdTest, GroupQuantisationIsBitwiseScalar) {
  for (int64_t n : {16, 128, 512}) {
    std::vector<float> x = Random(static_cast<size_t>(n), 23, 2.0f);
    // Rounding ties exactly (max 127: scale 1, x * inv = x), and a zero group.
    for (int i = 0; i < 16; ++i) x[static_cast<size_t>(i)] = -7.5f + static_cast<float>(i);
    x[15] = -127.0f;
    std::vector<int8_t> q_ref(static_cast<size_t>(n)), q(q_ref.size());
    float s_ref = -1.0f, s = -2.0f;
    const int32_t sum_ref = scalar().quantize_group_i8(x.data(), n, q_ref.data(), &s_ref);
    const int32_t sum = simd().quantize_group_i8(x.data(), n, q.data(), &s);
    EXPECT_EQ(q, q_ref) << n;
    EXPECT_EQ(s, s_ref) << n;
    EXPECT_EQ(sum, sum_ref) << n;
    if (n == 16) {
      EXPECT_EQ(s_ref, 1.0f);
      EXPECT_EQ(q_ref[0], -8);  // -7.5 rounds to even
      EXPECT_EQ(q_ref[1], -6);  // -6.5 too
      int32_t want = 0;
      for (int8_t v : q_ref) want += v;
      EXPECT_EQ(sum_ref, want);
    }
    const std::vector<float> zeros(static_cast<size_t>(n), 0.0f);
    EXPECT_EQ(simd().quantize_group_i8(zeros.data(), n, q.data(), &s), 0);
    EXPECT_EQ(s, 0.0f);
    EXPECT_EQ(q, std::vector<int8_t>(static_cast<size_t>(n), 0));
  }
}

TEST_P(SimdTest, PackedQ8MatMulIsBitwiseScalarCloseToFloatAndBatchInvariant) {
  // 21 rows: one full group of 16 rows and a partial one; 150 rows: three 64-row blocks, the last
  // partial, so the second token tile's prefetch of the next block runs too; 200 rows: 13 groups,
  // so a single token's product takes tiles of 8, 4 and 1 groups (the AMD table's, for rows
  // [3, 200)).
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {21, 24}, {21, 64}, {21, 160}, {21, 2048}, {150, 160}, {150, 2048}, {200, 160}}) {
    const int64_t stride = Q8PaddedCols(cols);
    const std::vector<float> w = Random(static_cast<size_t>(rows * cols), 7);
    std::vector<int8_t> q(static_cast<size_t>(stride));
    std::vector<uint16_t> s(static_cast<size_t>(stride / kQ8Block));
    std::vector<uint8_t> values(static_cast<size_t>(PackedQ8ValueBytes(rows, cols)));
    std::vector<uint16_t> scales(static_cast<size_t>(PackedQ8ScaleCount(rows, cols)));
    InitPackedQ8(rows, cols, values.data(), scales.data());
    for (int64_t r = 0; r < rows; ++r) {
      QuantizeWeightRowQ8(w.data() + r * cols, cols, q.data(), s.data());
      PackQ8Row(r, cols, q.data(), s.data(), values.data(), scales.data());
    }
    const WeightMatrix m{.dtype = DType::kI8,
                         .rows = rows,
                         .cols = cols,
                         .data = values.data(),
                         .q8_scales = scales.data(),
                         .q8_layout = Q8Layout::kPacked16};
    const int64_t n = 9;
    const std::vector<float> x = Random(static_cast<size_t>(n * cols), 8);
    Q8Activations acts;
    QuantizeActivationsQ8(x.data(), n, cols, &acts, nullptr, QuantizeActivationRowQ8,
                          simd().split_q8_row);
    std::vector<float> expected(static_cast<size_t>(n * rows)), got(expected.size());
    scalar().matmul_rows_q8(m, 0, rows, acts, expected.data(), rows);
    simd().matmul_rows_q8(m, 0, rows, acts, got.data(), rows);
    EXPECT_EQ(got, expected) << cols;
    // The quantised product is close to the float product (int8 error, measured ~1% of |y|).
    std::vector<float> exact(expected.size());
    scalar().matmul_rows(
        WeightMatrix{.dtype = DType::kF32, .rows = rows, .cols = cols, .data = w.data()}, 0, rows,
        x.data(), n, exact.data(), rows);
    double err = 0, norm = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      err += (got[i] - exact[i]) * (got[i] - exact[i]);
      norm += exact[i] * exact[i];
    }
    EXPECT_LT(std::sqrt(err / norm), 0.02) << cols;
    for (int64_t t = 0; t < n; ++t) {
      Q8Activations one;
      QuantizeActivationsQ8(x.data() + t * cols, 1, cols, &one, nullptr, QuantizeActivationRowQ8,
                            simd().split_q8_row);
      std::vector<float> alone(static_cast<size_t>(rows));
      simd().matmul_rows_q8(m, 0, 3, one, alone.data(), rows);
      simd().matmul_rows_q8(m, 3, rows, one, alone.data() + 3, rows);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(alone[static_cast<size_t>(r)], got[static_cast<size_t>(t * rows + r)])
            << "token " << t;
      }
    }
  }
}

TEST_P(SimdTest, Bf16ActivationMatMulMatchesRoundedScalarAndIsBatchInvariant) {
  if (simd().matmul_rows_bf16 == nullptr) GTEST_SKIP() << "no bf16 dot products in this ISA";
  for (int64_t cols : {7, 32, 150, 2048}) {
    const int64_t rows = 19, n = 9;
    const std::vector<float> w = Random(static_cast<size_t>(rows * cols), 11);
    const std::vector<float> x = Random(static_cast<size_t>(n * cols), 12);
    std::vector<uint16_t> wb(w.size()), xb(x.size());
    std::vector<float> x_rounded(x.size());
    for (size_t i = 0; i < w.size(); ++i) wb[i] = F32ToBF16(w[i]);
    for (size_t i = 0; i < x.size(); ++i) {
      xb[i] = F32ToBF16(x[i]);
      x_rounded[i] = BF16ToF32(xb[i]);
    }
    const WeightMatrix m{.dtype = DType::kBF16, .rows = rows, .cols = cols, .data = wb.data()};
    std::vector<float> expected(static_cast<size_t>(n * rows)), got(expected.size());
    scalar().matmul_rows(m, 0, rows, x_rounded.data(), n, expected.data(), rows);
    simd().matmul_rows_bf16(m, 0, rows, xb.data(), n, got.data(), rows);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], expected[i], 1e-4 * std::sqrt(cols)) << cols;
    for (int64_t t = 0; t < n; ++t) {
      std::vector<float> alone(static_cast<size_t>(rows));
      simd().matmul_rows_bf16(m, 0, rows, xb.data() + t * cols, 1, alone.data(), rows);
      for (int64_t r = 0; r < rows; ++r)
        ASSERT_EQ(alone[static_cast<size_t>(r)], got[static_cast<size_t>(t * rows + r)]);
    }
  }
}

TEST_P(SimdTest, ExpMatchesStdExpToFloatPrecision) {
  std::vector<float> x;
  for (float v = -90.0f; v <= 10.0f; v += 0.0371f) x.push_back(v);
  std::vector<float> y = x;
  simd().exp(y.data(), static_cast<int64_t>(y.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double expected = std::exp(static_cast<double>(std::max(x[i], -87.0f)));
    EXPECT_NEAR(y[i], expected, 1e-6 * expected + 1e-37) << x[i];
  }
  // NaN propagates (as std::exp's does) through exp, SwiGLU and the softmax tile steps.
  std::vector<float> with_nan = {1.0f, NAN, -2.0f, 0.5f, 3.0f, -1.0f, 2.0f, 0.0f, NAN};
  const auto n = static_cast<int64_t>(with_nan.size());
  std::vector<float> e = with_nan;
  simd().exp(e.data(), n);
  std::vector<float> gate = with_nan;
  const std::vector<float> up(with_nan.size(), 1.0f);
  simd().silu_mul(gate.data(), up.data(), n);
  std::vector<float> tile = with_nan;
  simd().exp_shift_sum(tile.data(), 3.0f, n);
  for (size_t i = 0; i < with_nan.size(); ++i) {
    EXPECT_EQ(std::isnan(e[i]), std::isnan(with_nan[i])) << i;
    EXPECT_EQ(std::isnan(gate[i]), std::isnan(with_nan[i])) << i;
    EXPECT_EQ(std::isnan(tile[i]), std::isnan(with_nan[i])) << i;
  }
}

TEST_P(SimdTest, PvAccumulateMatchesScalar) {
  for (int n_heads : {1, 3, 16, 21}) {
    for (int dv : {7, 32, 44, 512}) {
      const int n_rows = 13;
      const int64_t stride = dv + 5;
      const std::vector<float> p = Random(static_cast<size_t>(n_heads * n_rows), 31);
      const std::vector<float> v = Random(static_cast<size_t>(n_rows * stride), 32);
      std::vector<float> a = Random(static_cast<size_t>(n_heads * dv), 33), b = a;
      simd().pv_accumulate(p.data(), n_heads, n_rows, v.data(), stride, dv, a.data());
      scalar().pv_accumulate(p.data(), n_heads, n_rows, v.data(), stride, dv, b.data());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << n_heads << " " << dv;
    }
  }
}

TEST_P(SimdTest, VectorOpsMatchScalar) {
  for (int64_t n : {1, 7, 16, 33, 576}) {
    const std::vector<float> a = Random(static_cast<size_t>(n), 3),
                             b = Random(static_cast<size_t>(n), 4);
    EXPECT_NEAR(simd().dot(a.data(), b.data(), n), scalar().dot(a.data(), b.data(), n), 1e-5 * n);
    double exact_sum = 0.0;
    for (float v : a) exact_sum += v;
    EXPECT_NEAR(simd().stream_sum(a.data(), n), exact_sum, 1e-5 * n);
    EXPECT_NEAR(scalar().stream_sum(a.data(), n), exact_sum, 1e-5 * n);
    std::vector<float> y1 = b, y2 = b;
    simd().axpy(0.7f, a.data(), y1.data(), n);
    scalar().axpy(0.7f, a.data(), y2.data(), n);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(y1[static_cast<size_t>(i)], y2[static_cast<size_t>(i)], 1e-6);
    simd().scale(1.5f, y1.data(), n);
    scalar().scale(1.5f, y2.data(), n);
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(y1[static_cast<size_t>(i)], y2[static_cast<size_t>(i)], 1e-6);
    std::vector<uint16_t> h(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      h[static_cast<size_t>(i)] = F32ToBF16(a[static_cast<size_t>(i)]);
    std::vector<float> f1(static_cast<size_t>(n)), f2(static_cast<size_t>(n));
    simd().bf16_to_f32(h.data(), f1.data(), n);
    scalar().bf16_to_f32(h.data(), f2.data(), n);
    EXPECT_EQ(f1, f2);
  }
}
// A packed (Layout16::kPacked16) matrix of `dtype` (kBF16 or kF16) through `k`: close to a double
// reference, and each token alone, row ranges that split groups and a pair of tokens bitwise the
// batch's values (batch invariance on both sides of the tables' token-tile and widening sizes).
void CheckPackedMatMul(const KernelTable& k, DType dtype) {
  // Two whole blocks of 64 rows and a partial group of 16 (the AVX512-BF16 kernel prefetches the
  // next block of a range while the later token tiles run over one).
  const int64_t rows = 133;
  // AVX-512: token tiles of 8, 8, 8 and 3; AVX512-BF16: 6, then three of 6 sharing that prefetch,
  // and 3; AVX2: widened weights.
  const int64_t max_tokens = 27;
  for (int64_t cols : {2, 64, 150, 2050}) {
    SCOPED_TRACE(std::string(DTypeName(dtype)) + " cols " + std::to_string(cols));
    const std::vector<float> wf = Random(static_cast<size_t>(rows * cols), 91);
    std::vector<uint16_t> w(wf.size());
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = dtype == DType::kBF16 ? F32ToBF16(wf[i]) : F32ToF16(wf[i]);
    auto widen = [&](uint16_t h) { return dtype == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h); };
    std::vector<uint32_t> packed(PackedBf16Bytes(rows, cols) / sizeof(uint32_t), 0);
    auto* halves = reinterpret_cast<uint16_t*>(packed.data());
    if (dtype == DType::kBF16) {
      PackBf16Rows(w.data(), cols, 0, rows, packed.data());
    } else {
      PackF16Rows(w.data(), cols, 0, rows, halves);
    }
    std::vector<uint16_t> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
      if (dtype == DType::kBF16) {
        UnpackBf16Row(packed.data(), cols, r, row.data());
      } else {
        for (int64_t c = 0; c < cols; ++c)
          row[static_cast<size_t>(c)] = PackedF16At(halves, cols, r, c);
      }
      ASSERT_TRUE(std::equal(row.begin(), row.end(), w.begin() + r * cols)) << r;
    }
    const WeightMatrix m{.dtype = dtype,
                         .rows = rows,
                         .cols = cols,
                         .data = packed.data(),
                         .layout16 = Layout16::kPacked16};
    const std::vector<float> x = Random(static_cast<size_t>(max_tokens * cols), 92);
    std::vector<uint16_t> xb(x.size());
    for (size_t i = 0; i < x.size(); ++i) xb[i] = F32ToBF16(x[i]);
    // Tables with bf16 dot products take x rounded to bf16 for bf16 weights; otherwise x is
    // float32 (the packed rows widened exactly in registers, or decoded per row).
    const bool bf16_x = dtype == DType::kBF16 && k.matmul_rows_bf16 != nullptr;
    auto run = [&](int64_t row_begin, int64_t row_end, int64_t t0, int64_t n_tokens, float* y) {
      if (bf16_x) {
        k.matmul_rows_bf16(m, row_begin, row_end, xb.data() + t0 * cols, n_tokens, y, rows);
      } else {
        k.matmul_rows(m, row_begin, row_end, x.data() + t0 * cols, n_tokens, y, rows);
      }
    };
    run(0, rows, 0, 0, nullptr);  // no tokens: no access
    std::vector<float> batched(static_cast<size_t>(max_tokens * rows));
    run(0, rows, 0, max_tokens, batched.data());
    for (int64_t t = 0; t < max_tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        double expected = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
          const size_t xi = static_cast<size_t>(t * cols + c);
          expected += static_cast<double>(bf16_x ? BF16ToF32(xb[xi]) : x[xi]) *
                      widen(w[static_cast<size_t>(r * cols + c)]);
        }
        // Float32 sums of cols products of values in [-1, 1].
        ASSERT_NEAR(batched[static_cast<size_t>(t * rows + r)], expected, 1e-6 * cols)
            << t << " " << r;
      }
      // One token alone, and a row range that splits groups: bitwise the batch's values.
      std::vector<float> single(static_cast<size_t>(rows));
      run(0, rows, t, 1, single.data());
      std::vector<float> part(static_cast<size_t>(rows), -9.0f);
      run(5, 29, t, 1, part.data() + 5);
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(single[static_cast<size_t>(r)], batched[static_cast<size_t>(t * rows + r)])
            << t << " " << r;
        ASSERT_EQ(part[static_cast<size_t>(r)],
                  r >= 5 && r < 29 ? batched[static_cast<size_t>(t * rows + r)] : -9.0f)
            << t << " " << r;
      }
    }
    // Smaller batches, bitwise the first tokens of the whole one: AVX512-BF16 runs 3-5 tokens as
    // one tile that brings the weights in, 7 / 13 / 20 as halves of 32 columns in one or two
    // tiles each (PairGemmHalves), and 22 / 23 / 26 as tiles of 6 and a last one of 4, 5 and 2.
    for (int64_t n_tokens : {3, 4, 5, 7, 13, 20, 22, 23, 26}) {
      std::vector<float> fewer(static_cast<size_t>(n_tokens * rows));
      run(0, rows, 0, n_tokens, fewer.data());
      ASSERT_TRUE(std::equal(fewer.begin(), fewer.end(), batched.begin())) << n_tokens;
    }
    // Two tokens and rows 3..21 (a range inside one tile of two groups): bitwise the batch's.
    std::vector<float> pair(static_cast<size_t>(2 * rows), -9.0f);
    run(3, 21, 4, 2, pair.data() + 3);
    for (int64_t t = 0; t < 2; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        ASSERT_EQ(pair[static_cast<size_t>(t * rows + r)],
                  r >= 3 && r < 21 ? batched[static_cast<size_t>((4 + t) * rows + r)] : -9.0f)
            << t << " " << r;
      }
    }
  }
}

TEST_P(SimdTest, PackedBf16MatMulIsBatchInvariantAndMatchesReference) {
  CheckPackedMatMul(simd(), DType::kBF16);
}

TEST_P(SimdTest, PackedF16MatMulIsBatchInvariantAndMatchesReference) {
  CheckPackedMatMul(simd(), DType::kF16);
}

TEST(PackedF16Test, ScalarTableDecodesPackedRows) {
  CheckPackedMatMul(GetKernelTable(Isa::kScalar), DType::kF16);
}

TEST_P(SimdTest, SiluMulMatchesScalar) {
  for (int64_t n : {1, 7, 16, 37}) {
    std::vector<float> a = Random(static_cast<size_t>(n), 71, 12.0f), b = a;
    a[0] = -100.0f;  // silu(-100) = -100 / (1 + e^100) ~ -4e-42
    b[0] = -100.0f;
    const std::vector<float> up = Random(static_cast<size_t>(n), 72);
    simd().silu_mul(a.data(), up.data(), n);
    scalar().silu_mul(b.data(), up.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(a[static_cast<size_t>(i)], b[static_cast<size_t>(i)],
                  1e-6 * (1.0 + std::abs(b[static_cast<size_t>(i)])))
          << i;
    }
    EXPECT_NEAR(a[0], 0.0f, 1e-30f);
  }
}

TEST_P(SimdTest, RoundToBf16IsBitwiseF32ToBF16) {
  if (simd().round_to_bf16 == nullptr) GTEST_SKIP() << "scalar rounding in this ISA";
  std::vector<float> x = Random(37, 73, 100.0f);
  const float specials[] = {0.0f,
                            -0.0f,
                            INFINITY,
                            -INFINITY,
                            NAN,
                            1e-40f,  // denormal
                            -3e-39f,
                            BitsToF32(0x3f808000u),   // a tie, rounds to even (down)
                            BitsToF32(0x3f818000u),   // a tie, rounds to even (up)
                            BitsToF32(0x7f7fffffu),   // FLT_MAX rounds to inf
                            BitsToF32(0x7f800001u)};  // signalling NaN becomes quiet
  x.insert(x.begin() + 5, std::begin(specials), std::end(specials));
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint16_t> out(x.size() + 1, 0xabcd);
  simd().round_to_bf16(x.data(), n, out.data());
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(out[static_cast<size_t>(i)], F32ToBF16(x[static_cast<size_t>(i)])) << i;
  EXPECT_EQ(out.back(), 0xabcd);  // nothing written past n
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, SimdTest, ::testing::ValuesIn(SimdIsas()), IsaTestName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SimdTest);

}  // namespace
}  // namespace mlarun
