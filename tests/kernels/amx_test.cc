// The AMX table's products of packed bf16 weights (cpu/kernels_amx.cc) at sizes that reach every
// path of its blocking: blocks of 32 tokens plus a remainder of 1..31, several chunks of groups,
// a partial last group, row ranges that split groups, columns past the last 32-column step.
// Run on the software model of the tile unit (amx_tile_model.h) on every CPU, and on the real
// tiles where the CPU (and the kernel) gives AMX.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "core/thread_pool.h"
#include "kernels/amx_tile_model.h"
#include "kernels/cpu/amx_packed_matmul.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/packed_bf16.h"

namespace mlarun {
namespace {

struct PackedBf16Matrix {
  std::vector<uint16_t> values;  // row-major [rows, cols]
  std::vector<uint32_t> packed;
  WeightMatrix m;

  PackedBf16Matrix(int64_t rows, int64_t cols, uint64_t seed) {
    Rng rng(seed);
    values.resize(static_cast<size_t>(rows * cols));
    for (uint16_t& v : values) v = F32ToBF16(rng.NextSymmetric());
    packed.assign(PackedBf16Bytes(rows, cols) / sizeof(uint32_t), 0);
    PackBf16Rows(values.data(), cols, 0, rows, packed.data());
    m = {.dtype = DType::kBF16,
         .rows = rows,
         .cols = cols,
         .data = packed.data(),
         .layout16 = Layout16::kPacked16};
  }
};

std::vector<uint16_t> RandomBf16(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint16_t> out(n);
  for (uint16_t& v : out) v = F32ToBF16(rng.NextSymmetric());
  return out;
}

// y [n, rows] = the tiles kernel on x [n, cols] (rows [begin, end)), on the real tiles or on the
// model of them.
std::vector<float> TileProduct(const WeightMatrix& w, int64_t begin, int64_t end, const uint16_t* x,
                               int64_t n, bool on_model = false) {
  std::vector<uint16_t> tiles(static_cast<size_t>(Bf16ActivationTileElements(n, w.cols)), 7);
  TileBf16Activations(x, n, w.cols, 0, n, tiles.data());
  std::vector<float> y(static_cast<size_t>(n * (end - begin)));
  if (on_model) {
    test::EmulatedTiles model;
    amx::MatMulPackedBf16Tiles(model, w, begin, end, tiles.data(), n, y.data(), end - begin);
    EXPECT_THROW(model.ZeroAcc(0), std::logic_error) << "tiles not released";
  } else {
    GetKernelTable(Isa::kAmx).matmul_rows_bf16_tiles(w, begin, end, tiles.data(), n, y.data(),
                                                     end - begin);
  }
  return y;
}

TEST(AmxTest, ActivationTilesHoldEveryValueOnceWithZeroPadding) {
  for (int64_t n : {1, 16, 21, 40}) {
    for (int64_t cols : {2, 32, 70}) {
      const std::vector<uint16_t> x = RandomBf16(static_cast<size_t>(n * cols), 5);
      const int64_t size = Bf16ActivationTileElements(n, cols);
      EXPECT_EQ(size, n * ((cols + 31) / 32) * 32);
      std::vector<uint16_t> tiles(static_cast<size_t>(size), 0xffff);
      // Two calls of whole 16-token blocks (as MatMulBatch splits the work).
      TileBf16Activations(x.data(), n, cols, 0, std::min<int64_t>(n, 16), tiles.data());
      TileBf16Activations(x.data(), n, cols, 16, n, tiles.data());
      std::vector<int> hits(tiles.size(), 0);
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t c = 0; c < cols; ++c) {
          const int64_t i = Bf16TileIndex(t, c, n, cols);
          ASSERT_EQ(tiles[static_cast<size_t>(i)], x[static_cast<size_t>(t * cols + c)]);
          ++hits[static_cast<size_t>(i)];
          // Rows of a tile are 32 values apart; a 16-token block's tile is one 1 KB run.
          if (c % 32 < 31 && c + 1 < cols) {
            EXPECT_EQ(Bf16TileIndex(t, c + 1, n, cols), i + 1);
          }
        }
      }
      for (size_t i = 0; i < tiles.size(); ++i) {
        if (hits[i] == 0) {
          EXPECT_EQ(tiles[i], 0) << i;  // the padding of the last step
        }
        EXPECT_LE(hits[i], 1);
      }
    }
  }
}

class PackedTilesTest : public testing::TestWithParam<bool> {};  // on the model?

TEST_P(PackedTilesTest, PackedBf16MatMulMatchesDoublesAndIsBatchInvariant) {
  const bool on_model = GetParam();
  if (!on_model && !IsaSupported(Isa::kAmx)) GTEST_SKIP() << "no AMX here";
  // 2,080 columns: 65 steps, 6-group chunks (13 groups: chunks of 6, 6, 1); 2,090: a 10-column
  // tail; 64: one chunk.
  for (int64_t cols : {int64_t{2080}, int64_t{2090}, int64_t{64}}) {
    const int64_t rows = 200;
    const int64_t n_tokens = 70;  // blocks of 32, 32 and 6
    const PackedBf16Matrix w(rows, cols, 7 + cols);
    const std::vector<uint16_t> x = RandomBf16(static_cast<size_t>(n_tokens * cols), 8);
    const std::vector<float> batched = TileProduct(w.m, 0, rows, x.data(), n_tokens, on_model);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        double expected = 0.0;
        float in_order = 0.0f;  // the model's order: columns from 0 (edge columns after the tiles')
        for (int64_t c = 0; c < cols; ++c) {
          const float product = BF16ToF32(x[static_cast<size_t>(t * cols + c)]) *
                                BF16ToF32(w.values[static_cast<size_t>(r * cols + c)]);
          expected += static_cast<double>(product);
          in_order += product;
        }
        const float got = batched[static_cast<size_t>(t * rows + r)];
        ASSERT_NEAR(got, expected, 1e-6 * cols) << cols << " " << t << " " << r;
        if (on_model) {
          ASSERT_EQ(got, in_order) << cols << " " << t << " " << r;
        }
      }
    }
    // Any token count from 1 to 33 and row ranges that split groups: bitwise the batch's values.
    for (int64_t n : {1, 2, 15, 16, 17, 31, 33}) {
      const int64_t t0 = n_tokens - n;
      const int64_t begin = 5, end = 187;
      const std::vector<float> part =
          TileProduct(w.m, begin, end, x.data() + t0 * cols, n, on_model);
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t r = begin; r < end; ++r) {
          ASSERT_EQ(part[static_cast<size_t>(t * (end - begin) + r - begin)],
                    batched[static_cast<size_t>((t0 + t) * rows + r)])
              << cols << " " << n << " " << t << " " << r;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ModelAndHardware, PackedTilesTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "model" : "hardware";
                         });

// MatMul gives batches of 16 tokens or more to the tiles (on any thread count, bitwise the
// kernel's own results), smaller ones to the AVX512-BF16 kernels: the same products summed in
// another order, so float32 rounding apart.
TEST(AmxTest, MatMulTakesTilesFromSixteenTokensOnAnyThreadCount) {
  if (!IsaSupported(Isa::kAmx)) GTEST_SKIP() << "no AMX here";
  const int64_t rows = 1000, cols = 512;
  const PackedBf16Matrix w(rows, cols, 3);
  ThreadPool one(1), three(3);
  Exec exec1{one, GetKernelTable(Isa::kAmx)};
  Exec exec3{three, GetKernelTable(Isa::kAmx)};
  EXPECT_EQ(exec1.k.bf16_tiles_min_tokens, 16);
  for (int64_t n_tokens : {15, 16, 40}) {
    Rng rng(4);
    std::vector<float> x(static_cast<size_t>(n_tokens * cols));
    for (float& v : x) v = rng.NextSymmetric();
    std::vector<uint16_t> xb(x.size());
    for (size_t i = 0; i < x.size(); ++i) xb[i] = F32ToBF16(x[i]);
    std::vector<float> y1(static_cast<size_t>(n_tokens * rows)), y3(y1.size());
    MatMul(exec1, w.m, x.data(), n_tokens, y1.data());
    MatMul(exec3, w.m, x.data(), n_tokens, y3.data());
    EXPECT_EQ(y1, y3) << n_tokens;
    const std::vector<float> tiles = TileProduct(w.m, 0, rows, xb.data(), n_tokens);
    std::vector<float> dots(y1.size());
    exec1.k.matmul_rows_bf16(w.m, 0, rows, xb.data(), n_tokens, dots.data(), rows);
    EXPECT_EQ(y1, n_tokens >= 16 ? tiles : dots) << n_tokens;
    double max_diff = 0.0;
    for (size_t i = 0; i < y1.size(); ++i)
      max_diff = std::max(max_diff, static_cast<double>(std::fabs(tiles[i] - dots[i])));
    EXPECT_GT(max_diff, 0.0) << n_tokens;  // two different kernels
    EXPECT_LT(max_diff, 1e-4) << n_tokens;
  }
}

}  // namespace
}  // namespace mlarun
