// The AMX-INT8 products of packed Q8 weights (cpu/amx_packed_q8.h): bitwise the scalar reference
// (exact int32 block sums, then the reference's fma per block in order) at sizes that reach every
// path of the blocking: blocks of 32 tokens plus a remainder of 1..31 (one or two token halves),
// several chunks of groups, an odd number of groups (the last pair's second group past the
// matrix), a partial last group, row ranges that split groups, padded columns. Run on the
// software model of the tile unit (amx_tile_model.h) on every CPU, and on the real tiles where the
// CPU has AMX-INT8.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "kernels/amx_tile_model.h"
#include "kernels/cpu/amx_packed_q8.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace mlarun {
namespace {

struct PackedQ8Matrix {
  std::vector<uint8_t> values;
  std::vector<uint16_t> scales;
  WeightMatrix m;

  PackedQ8Matrix(int64_t rows, int64_t cols, uint64_t seed) {
    Rng rng(seed);
    values.resize(static_cast<size_t>(PackedQ8ValueBytes(rows, cols)));
    scales.resize(static_cast<size_t>(PackedQ8ScaleCount(rows, cols)));
    InitPackedQ8(rows, cols, values.data(), scales.data());
    std::vector<float> row(static_cast<size_t>(cols));
    std::vector<int8_t> q(static_cast<size_t>(Q8PaddedCols(cols)));
    std::vector<uint16_t> s(static_cast<size_t>(Q8PaddedCols(cols) / kQ8Block));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = rng.NextSymmetric();
      QuantizeWeightRowQ8(row.data(), cols, q.data(), s.data());
      PackQ8Row(r, cols, q.data(), s.data(), values.data(), scales.data());
    }
    m = {.dtype = DType::kI8,
         .rows = rows,
         .cols = cols,
         .data = values.data(),
         .q8_scales = scales.data(),
         .q8_layout = Q8Layout::kPacked16};
  }
};

Q8Activations RandomActivations(int64_t n_tokens, int64_t cols, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n_tokens * cols));
  for (float& v : x) v = rng.NextSymmetric();
  Q8Activations q;
  QuantizeActivationsQ8(x.data(), n_tokens, cols, &q);
  return q;
}

bool HasAmxInt8() {
  const bool has = IsaSupported(Isa::kAmx) && DetectCpuFeatures().amx_int8;
  EXPECT_EQ(has, has && GetKernelTable(Isa::kAmx).matmul_rows_q8_tiles != nullptr);
  return has;
}

// y [x.n_tokens, end - begin] by the tile kernel (on the model of the tiles or the hardware's
// table entry) and by the scalar reference.
std::vector<float> TileProduct(const WeightMatrix& w, int64_t begin, int64_t end,
                               const Q8Activations& x, bool on_model) {
  std::vector<float> y(static_cast<size_t>(x.n_tokens * (end - begin)), -1.0f);
  if (on_model) {
    test::EmulatedTiles model;
    amx::MatMulPackedQ8Tiles<test::EmulatedTiles, amx::ScalarQ8Lanes>(model, w, begin, end, x,
                                                                      y.data(), end - begin);
    EXPECT_THROW(model.ZeroAcc(0), std::logic_error) << "tiles not released";
  } else {
    GetKernelTable(Isa::kAmx).matmul_rows_q8_tiles(w, begin, end, x, y.data(), end - begin);
  }
  return y;
}

std::vector<float> ScalarProduct(const WeightMatrix& w, int64_t begin, int64_t end,
                                 const Q8Activations& x) {
  std::vector<float> y(static_cast<size_t>(x.n_tokens * (end - begin)));
  GetKernelTable(Isa::kScalar).matmul_rows_q8(w, begin, end, x, y.data(), end - begin);
  return y;
}

class PackedQ8TilesTest : public testing::TestWithParam<bool> {};  // on the model?

TEST_P(PackedQ8TilesTest, BitwiseTheScalarReference) {
  const bool on_model = GetParam();
  if (!on_model && !HasAmxInt8()) GTEST_SKIP() << "no AMX-INT8 here";
  struct Case {
    int64_t rows, cols, n_tokens, begin, end;
  };
  // 600 x 2048: 38 groups in chunks of 16 (16, 16, 6); 37 rows: 3 groups (the second pair's
  // second group past the matrix), the last partial; 40 columns: padded to 64 (zero blocks).
  std::vector<Case> cases = {
      {600, 2048, 70, 0, 600}, {600, 2048, 33, 21, 587}, {37, 40, 16, 0, 37}, {37, 40, 17, 3, 35},
      {37, 160, 31, 16, 32},   {37, 160, 32, 0, 37},     {48, 96, 48, 17, 18}};
  // And 16 random shapes: 1-120 rows, 1-300 columns, 16-80 tokens, any non-empty row range.
  Rng rng(99);
  auto below = [&rng](int64_t n) {
    return std::min(n - 1, static_cast<int64_t>(rng.NextUniform() * static_cast<float>(n)));
  };
  for (int i = 0; i < 16; ++i) {
    Case c{.rows = 1 + below(120), .cols = 1 + below(300), .n_tokens = 16 + below(65)};
    c.begin = below(c.rows);
    c.end = c.begin + 1 + below(c.rows - c.begin);
    cases.push_back(c);
  }
  for (const Case& c : cases) {
    const PackedQ8Matrix w(c.rows, c.cols, 11 + c.rows + c.cols);
    const Q8Activations x = RandomActivations(c.n_tokens, c.cols, 12 + c.n_tokens);
    const std::vector<float> got = TileProduct(w.m, c.begin, c.end, x, on_model);
    const std::vector<float> expected = ScalarProduct(w.m, c.begin, c.end, x);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], expected[i]) << c.rows << "x" << c.cols << " tokens " << c.n_tokens
                                     << " rows [" << c.begin << ", " << c.end << ") element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ModelAndHardware, PackedQ8TilesTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "model" : "hardware";
                         });

// The model's TDPBSUD: signed A bytes times unsigned B bytes, 4 per int32 lane, added to C.
TEST(AmxQ8Test, ModelDotI8MultipliesSignedByUnsignedBytes) {
  test::EmulatedTiles tiles;
  tiles.Configure(amx::TileConfigFor({.rows = {1, 0}, .cols = {1, 0}, .k_bytes = 8}));
  const int8_t a[8] = {-128, 127, -1, 2, 5, 0, -7, 100};
  const uint8_t b[8] = {255, 255, 128, 1, 3, 9, 0, 200};  // B: 2 rows of one 4-byte column
  const int32_t c0 = 1000;
  tiles.LoadAcc(0, &c0, 4);
  tiles.LoadA(0, a, 8);
  tiles.LoadB(0, b, 4);
  tiles.DotI8(0);
  int32_t c = 0;
  tiles.StoreAcc(0, &c, 4);
  EXPECT_EQ(c, 1000 + (-128 * 255) + 127 * 255 + (-1 * 128) + 2 * 1 + 5 * 3 + 0 * 9 + (-7 * 0) +
                   100 * 200);
  // A.colsb / 4 must equal B.rows.
  amx::TileConfig bad = amx::TileConfigFor({.rows = {1, 0}, .cols = {1, 0}, .k_bytes = 8});
  bad.rows[6] = 3;
  tiles.Configure(bad);
  EXPECT_THROW(tiles.DotI8(0), std::logic_error);
}

// MatMul with the tiles in matmul_rows_q8's place (as kernels_bench times them, and as the AMX
// tables are where the tiles measure faster): any thread
// count, batches below and above 16 tokens, bitwise the scalar reference (the tiles from 16
// tokens, the VNNI kernel below).
TEST(AmxQ8Test, MatMulIsBitwiseScalarOnAnyThreadCount) {
  if (!HasAmxInt8()) GTEST_SKIP() << "no AMX-INT8 here";
  const PackedQ8Matrix w(1000, 512, 3);
  KernelTable tiles = GetKernelTable(Isa::kAmx);
  tiles.matmul_rows_q8 = tiles.matmul_rows_q8_tiles;
  ThreadPool one(1), three(3);
  Exec exec1{one, tiles};
  Exec exec3{three, tiles};
  Exec scalar{one, GetKernelTable(Isa::kScalar)};
  for (int64_t n_tokens : {1, 15, 16, 40}) {
    Rng rng(4);
    std::vector<float> x(static_cast<size_t>(n_tokens * 512));
    for (float& v : x) v = rng.NextSymmetric();
    std::vector<float> y1(static_cast<size_t>(n_tokens * 1000)), y3(y1.size()), ys(y1.size());
    MatMul(exec1, w.m, x.data(), n_tokens, y1.data());
    MatMul(exec3, w.m, x.data(), n_tokens, y3.data());
    MatMul(scalar, w.m, x.data(), n_tokens, ys.data());
    EXPECT_EQ(y1, ys) << n_tokens;
    EXPECT_EQ(y3, ys) << n_tokens;
  }
}

// The start-up measurement that chooses between the tiles and the VNNI kernel: both kernels on
// the documented product, alternating, three times each.
struct Q8Call {
  int kernel;
  int64_t rows, cols, n_tokens, row_begin, row_end, ldy;
};
std::vector<Q8Call>& RecordedCalls() {
  static std::vector<Q8Call> calls;
  return calls;
}
template <int kKernel>
void RecordingKernel(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                     const Q8Activations& x, float* /*y*/, int64_t ldy) {
  RecordedCalls().push_back({kKernel, w.rows, w.cols, x.n_tokens, row_begin, row_end, ldy});
}

TEST(AmxQ8Test, TimeQ8ProductsAlternatesBothKernelsOnOneProduct) {
  RecordedCalls().clear();
  const detail::Q8ProductTimes times =
      detail::TimeQ8Products(RecordingKernel<1>, RecordingKernel<2>);
  ASSERT_EQ(RecordedCalls().size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const Q8Call& c = RecordedCalls()[i];
    EXPECT_EQ(c.kernel, i % 2 == 0 ? 1 : 2) << i;
    EXPECT_EQ(c.rows, 512);
    EXPECT_EQ(c.cols, 2048);
    EXPECT_EQ(c.n_tokens, 64);
    EXPECT_EQ(c.row_begin, 0);
    EXPECT_EQ(c.row_end, 512);
    EXPECT_EQ(c.ldy, 512);
  }
  EXPECT_GE(times.first_seconds, 0.0);
  EXPECT_GE(times.second_seconds, 0.0);
  EXPECT_LT(times.first_seconds, 1.0);
  EXPECT_LT(times.second_seconds, 1.0);
}

// The AMX tables' matmul_rows_q8 chooses between the tiles and the VNNI kernel (measured on its
// first batch of 16+ tokens, not at table build): whichever it takes, bitwise the scalar
// reference for decode-sized and prefill-sized batches.
TEST(AmxQ8Test, TablesChosenKernelIsBitwiseTheReference) {
  const double speedup = Q8TilesSpeedup();
  if (!HasAmxInt8()) {
    EXPECT_EQ(speedup, 0.0);
    GTEST_SKIP() << "no AMX-INT8 here";
  }
  EXPECT_GT(speedup, 0.0);
  const PackedQ8Matrix w(600, 2048, 21);
  for (const int64_t n_tokens : {1, 15, 16, 64}) {
    const Q8Activations x = RandomActivations(n_tokens, 2048, 22 + n_tokens);
    std::vector<float> got(static_cast<size_t>(n_tokens * 580));
    GetKernelTable(Isa::kAmx).matmul_rows_q8(w.m, 10, 590, x, got.data(), 580);
    const std::vector<float> expected = ScalarProduct(w.m, 10, 590, x);
    ASSERT_EQ(got, expected) << n_tokens << " tokens";
  }
}

}  // namespace
}  // namespace mlarun
