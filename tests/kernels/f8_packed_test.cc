// Packed FP8 weights (Layout16::kPacked16, packed_bf16.h): PackF8Rows's layout and NaN report,
// row decoding in every table, the exact kernels on packed rows, and the AVX512-BF16 kernel
// (KernelTable::matmul_rows_f8_bf16) on them against hand-computed values, a double-precision
// reference, its row-major form, and itself over other batches and row ranges.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/fp8_test_util.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/packed_bf16.h"
#include "kernels/simd_test_util.h"

namespace mlarun {
namespace {

// `row_major` (an FP8 matrix over row-major bytes) packed into `storage`.
WeightMatrix PackedFp8(const WeightMatrix& row_major, std::vector<uint8_t>* storage) {
  storage->assign(PackedF8Bytes(row_major.rows, row_major.cols), 0);
  PackF8Rows(static_cast<const uint8_t*>(row_major.data), row_major.cols, 0, row_major.rows,
             storage->data());
  WeightMatrix packed = row_major;
  packed.data = storage->data();
  packed.layout16 = Layout16::kPacked16;
  return packed;
}

// Random FP8 bytes (no NaN: |w| <= 300 < 448) for a rows x cols matrix.
std::vector<uint8_t> RandomFp8(int64_t rows, int64_t cols, uint64_t seed) {
  const std::vector<float> wf = Random(static_cast<size_t>(rows * cols), seed);
  std::vector<uint8_t> w(wf.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = F32ToF8E4M3(wf[i] * 300.0f);
  return w;
}

// Block scales in [0.0004, 0.0076] for a rows x cols matrix in blocks of block_rows x block_cols.
std::vector<float> RandomScales(int64_t rows, int64_t cols, int block_rows, int block_cols,
                                uint64_t seed) {
  const int64_t row_blocks = (rows + block_rows - 1) / block_rows;
  const int64_t col_blocks = (cols + block_cols - 1) / block_cols;
  const std::vector<float> noise = Random(static_cast<size_t>(row_blocks * col_blocks), seed);
  std::vector<float> scales(noise.size());
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = 0.004f * (1.0f + 0.9f * noise[i]);
  return scales;
}

// Every byte lands at PackedF8Index (32 bytes per group and column pair, row i's pair at 2 i);
// the padding rows of the last group stay 0; a range packs only its rows; NaN bytes (0x7f, 0xff)
// are reported wherever they are, other bytes never.
TEST(PackF8RowsTest, PlacesEveryByteAndReportsNan) {
  const int64_t rows = 21;
  const int64_t cols = 6;
  std::vector<uint8_t> w(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(1 + i % 126);  // no NaN
  std::vector<uint8_t> packed(PackedF8Bytes(rows, cols), 0);
  ASSERT_EQ(packed.size(), size_t{32 * cols});
  EXPECT_FALSE(PackF8Rows(w.data(), cols, 0, 5, packed.data()));
  EXPECT_EQ(packed[static_cast<size_t>(PackedF8Index(cols, 5, 0))], 0) << "row 5 not packed yet";
  EXPECT_FALSE(PackF8Rows(w.data(), cols, 5, rows, packed.data()));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      // Group r / 16, pair c / 2: bytes (r / 16) * 16 * cols + (c / 2) * 32 + (r % 16) * 2 + c % 2.
      const size_t at = static_cast<size_t>(r / 16 * 16 * cols + c / 2 * 32 + r % 16 * 2 + c % 2);
      EXPECT_EQ(PackedF8Index(cols, r, c), static_cast<int64_t>(at));
      EXPECT_EQ(packed[at], w[static_cast<size_t>(r * cols + c)]) << r << ", " << c;
    }
  }
  for (int64_t r = rows; r < 32; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      EXPECT_EQ(packed[static_cast<size_t>(PackedF8Index(cols, r, c))], 0);
  }
  for (const uint8_t nan : {uint8_t{0x7f}, uint8_t{0xff}}) {
    for (const int64_t c : {0, 3, 5}) {
      std::vector<uint8_t> bad = w;
      bad[static_cast<size_t>(17 * cols + c)] = nan;
      EXPECT_TRUE(PackF8Rows(bad.data(), cols, 0, rows, packed.data())) << int{nan} << " " << c;
      EXPECT_FALSE(PackF8Rows(bad.data(), cols, 0, 17, packed.data()));
    }
  }
}

class F8PackedTest : public SimdKernelTest {};

// DecodeRow and every table's decode_row read packed rows bitwise as the row-major ones; the
// exact matmul_rows (scalar and SIMD) gives bitwise its row-major result on packed weights.
TEST_P(F8PackedTest, ExactKernelsReadPackedRowsAsRowMajor) {
  const int64_t rows = 37;
  const int64_t cols = 150;
  const std::vector<uint8_t> w = RandomFp8(rows, cols, 51);
  const std::vector<float> scales = RandomScales(rows, cols, 16, 64, 52);
  const WeightMatrix m = Fp8Matrix(w, rows, cols, scales, 16, 64);
  std::vector<uint8_t> storage;
  const WeightMatrix packed = PackedFp8(m, &storage);
  std::vector<float> expected(static_cast<size_t>(cols));
  std::vector<float> got(expected.size());
  for (int64_t r = 0; r < rows; ++r) {
    m.DecodeRow(r, expected.data());
    packed.DecodeRow(r, got.data());
    ASSERT_EQ(got, expected) << "DecodeRow, row " << r;
    simd().decode_row(packed, r, got.data());
    ASSERT_EQ(got, expected) << "decode_row, row " << r;
  }
  for (const KernelTable* k : {&scalar(), &simd()}) {
    for (const int64_t n_tokens : {1, 3, 40}) {
      const std::vector<float> x = Random(static_cast<size_t>(n_tokens * cols), 53);
      std::vector<float> y_row_major(static_cast<size_t>(n_tokens * rows));
      std::vector<float> y_packed(y_row_major.size());
      k->matmul_rows(m, 0, rows, x.data(), n_tokens, y_row_major.data(), rows);
      k->matmul_rows(packed, 0, rows, x.data(), n_tokens, y_packed.data(), rows);
      EXPECT_EQ(y_packed, y_row_major) << IsaName(k->isa) << ", " << n_tokens << " tokens";
    }
  }
}

class F8PackedBf16Test : public SimdKernelTest {
 protected:
  void SetUp() override {
    if (simd().matmul_rows_f8_packed == nullptr) GTEST_SKIP() << "no packed FP8 kernel here";
  }
};

// x rounded to bf16, as float: what the kernel multiplies the weights / 256 by.
float Bf16(float x) { return BF16ToF32(F32ToBF16(x)); }

// Every byte but the NaNs is widened exactly from the packed layout: through a one-hot x, the
// column's block gives (value / 256) * 1 exactly and y = that times 256 scale, rounded once: the
// float32 product value * scale, for scales of both signs and several sizes per block (the other
// blocks add zeros); 37 rows (two full groups and a padded one) in row blocks of 16, one token at
// a time (tiles in registers) and 40 (4 widening into the buffer, 6-token tiles reading it).
TEST_P(F8PackedBf16Test, WidensEveryByteExactly) {
  const int64_t rows = 37;
  const std::vector<uint8_t> w = EveryFp8ByteRows(rows);
  const std::vector<float> scales = {1.0f / 256, 0.0123f, -3.5f, 1e-3f, 0x1p20f, 2.0e-3f,
                                     7.0f,       -0.75f,  1.0f,  5.0f,  -2.0f,   0.5f};
  const WeightMatrix m = Fp8Matrix(w, rows, 256, scales, 16, 64);  // [3, 4] blocks
  std::vector<uint8_t> storage;
  const WeightMatrix packed = PackedFp8(m, &storage);
  for (const int64_t n_tokens : {1, 40}) {
    ForEachOneHotColumn(simd().matmul_rows_f8_bf16, packed, n_tokens,
                        [&](float got, int64_t r, int64_t c) {
                          const uint8_t byte = w[static_cast<size_t>(r * m.cols + c)];
                          const float scale = scales[static_cast<size_t>(r / 16 * 4 + c / 64)];
                          EXPECT_EQ(got, F8E4M3ToF32(byte) * scale)
                              << "byte " << int{byte} << " row " << r << " tokens " << n_tokens;
                        });
  }
}

// Random weights and scales, row blocks of 16, 32 and 128 over 150 rows (full 64-row tiles,
// tiles cut by a row block, a padded last group), columns 2 to 2,100 (past the 1,024 pairs the
// buffer holds at a time), 3 tokens (one tile of 4 groups), 8 and 13 (tiles of 2 groups, one or
// two per half of a 64-row tile), 40 (a first tile of 4 tokens widening into the buffer, then
// 6-token tiles reading it): within float32 summation error
// of sum_c w s bf16(x) in double, within the activations' bf16 rounding (relative 2^-8) of the
// exact kernel, and within two such roundings of the row-major one (which rounds s x instead); each
// token alone over row ranges that cut groups and tiles (registers) bitwise the batched results.
TEST_P(F8PackedBf16Test, MatchesDoubleReferenceAndIsBatchInvariant) {
  const int64_t rows = 150;
  for (const int64_t cols : {2, 150, 2100}) {
    for (const int block_rows : {16, 32, 128}) {
      const int block_cols = 128;
      const std::vector<uint8_t> w = RandomFp8(rows, cols, 61);
      const std::vector<float> scales = RandomScales(rows, cols, block_rows, block_cols, 62);
      const WeightMatrix m = Fp8Matrix(w, rows, cols, scales, block_rows, block_cols);
      std::vector<uint8_t> storage;
      const WeightMatrix packed = PackedFp8(m, &storage);
      for (const int64_t n_tokens : {3, 8, 13, 40}) {
        const std::vector<float> x = Random(static_cast<size_t>(n_tokens * cols), 63, 2.0f);
        std::vector<float> got(static_cast<size_t>(n_tokens * rows));
        std::vector<float> row_major(got.size());
        std::vector<float> exact(got.size());
        simd().matmul_rows_f8_bf16(packed, 0, rows, x.data(), n_tokens, got.data(), rows);
        simd().matmul_rows_f8_bf16(m, 0, rows, x.data(), n_tokens, row_major.data(), rows);
        scalar().matmul_rows(m, 0, rows, x.data(), n_tokens, exact.data(), rows);
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            const RowReference ref = Fp8RowReference(m, w, scales, x.data() + t * cols, r,
                                                     [](float value, float scale, float xc) {
                                                       return double{value} * scale * Bf16(xc);
                                                     });
            const double expected = ref.sum;
            const double magnitude = ref.magnitude;
            const size_t i = static_cast<size_t>(t * rows + r);
            ASSERT_NEAR(got[i], expected, 1e-6 * magnitude + 1e-30)
                << "cols " << cols << " block rows " << block_rows << " row " << r << " token " << t
                << " of " << n_tokens;
            ASSERT_NEAR(got[i], row_major[i], 0x1p-7 * magnitude + 1e-30);
            ASSERT_NEAR(got[i], exact[i], 0x1p-8 * magnitude + 1e-30);
          }
        }
        for (const int64_t t : {int64_t{0}, n_tokens - 1}) {
          std::vector<float> alone(static_cast<size_t>(rows));
          int64_t begin = 0;
          for (const int64_t end : {int64_t{7}, int64_t{19}, int64_t{100}, rows}) {
            simd().matmul_rows_f8_bf16(packed, begin, end, x.data() + t * cols, 1,
                                       alone.data() + begin, rows);
            begin = end;
          }
          for (int64_t r = 0; r < rows; ++r) {
            ASSERT_EQ(alone[static_cast<size_t>(r)], got[static_cast<size_t>(t * rows + r)])
                << "cols " << cols << " block rows " << block_rows << " token " << t << " of "
                << n_tokens << " row " << r;
          }
        }
      }
    }
  }
}

// MatMulBatch sends packed FP8 weights to the kernel, in parallel items, bitwise.
TEST_P(F8PackedBf16Test, MatMulBatchUsesItForPackedWeights) {
  const int64_t rows = 300;
  const int64_t cols = 256;
  const std::vector<uint8_t> w = RandomFp8(rows, cols, 71);
  const std::vector<float> scales = RandomScales(rows, cols, 128, 128, 72);
  std::vector<uint8_t> storage;
  const WeightMatrix packed = PackedFp8(Fp8Matrix(w, rows, cols, scales, 128, 128), &storage);
  for (const int64_t n_tokens : {1, 33}) {
    const std::vector<float> x = Random(static_cast<size_t>(n_tokens * cols), 73);
    std::vector<float> direct(static_cast<size_t>(n_tokens * rows));
    std::vector<float> batched(direct.size());
    simd().matmul_rows_f8_bf16(packed, 0, rows, x.data(), n_tokens, direct.data(), rows);
    ThreadPool pool(2);
    Exec exec{pool, simd()};
    MatMul(exec, packed, x.data(), n_tokens, batched.data());
    EXPECT_EQ(batched, direct) << n_tokens << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, F8PackedTest, ::testing::ValuesIn(SimdIsas()), IsaTestName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(F8PackedTest);
INSTANTIATE_TEST_SUITE_P(SupportedIsas, F8PackedBf16Test, ::testing::ValuesIn(SimdIsas()),
                         IsaTestName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(F8PackedBf16Test);

}  // namespace
}  // namespace mlarun
