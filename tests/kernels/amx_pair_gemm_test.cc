// The AMX pair GEMM's blocking (kernels/cpu/amx_pair_gemm.h) run on the software model of the
// tile unit (amx_tile_model.h), so that it is tested on every CPU. The same kernel on the real
// tiles is tested by SimdAttentionTest.Bf16PairGemmMatchesDoubleReference where the CPU has AMX.
#include "kernels/cpu/amx_pair_gemm.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "kernels/amx_tile_model.h"

namespace mlarun {
namespace {

using amx::TileConfig;
using test::EmulatedTiles;

std::vector<uint32_t> RandomPairs(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint32_t> out(n);
  for (uint32_t& w : out) {
    const uint16_t lo = F32ToBF16(rng.NextSymmetric());
    w = BF16Pair(lo, F32ToBF16(rng.NextSymmetric()));
  }
  return out;
}

float Lo(uint32_t w) { return BF16ToF32(static_cast<uint16_t>(w)); }
float Hi(uint32_t w) { return BF16ToF32(static_cast<uint16_t>(w >> 16)); }

TEST(AmxPairGemmTest, TileConfigBytesFollowTheLdtilecfgLayout) {
  const TileConfig config = amx::TileConfigFor({.rows = {16, 5}, .cols = {16, 3}});
  const auto* bytes = reinterpret_cast<const uint8_t*>(&config);
  EXPECT_EQ(bytes[0], 1);  // palette
  // colsb of tile t at bytes 16 + 2t (little endian), rows at byte 48 + t.
  const int colsb[8] = {64, 12, 64, 12, 64, 64, 64, 12};
  const int rows[8] = {16, 16, 5, 5, 16, 5, 16, 16};
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(bytes[16 + 2 * t] | (bytes[17 + 2 * t] << 8), colsb[t]) << t;
    EXPECT_EQ(bytes[48 + t], rows[t]) << t;
  }
  // Unused halves stay unconfigured (zero rows and bytes).
  const TileConfig one = amx::TileConfigFor({.rows = {7, 0}, .cols = {2, 0}});
  const auto* b1 = reinterpret_cast<const uint8_t*>(&one);
  for (int t : {1, 2, 3, 5, 7}) EXPECT_EQ(b1[48 + t], 0) << t;
  EXPECT_EQ(b1[48 + 0], 7);
  EXPECT_EQ(b1[16 + 2 * 0], 8);
  EXPECT_EQ(b1[48 + 6], 16);
}

// Every output equals, bitwise, the float32 sum over k pairs in order of lo * lo then hi * hi:
// each product enters once, in order, and nothing else does (the padding of the last step only
// adds zeros). Sizes reach full and partial row and column halves, depth tails and several
// chunks of steps; the operands' padding holds NaN and C's holds a sentinel, which must stay.
TEST(AmxPairGemmTest, EmulatedTilesGiveTheSequentialSumOfEveryOutput) {
  amx::PairGemmScratch scratch;
  for (int64_t m : {1, 16, 17, 32, 45, 130}) {
    for (int64_t n : {1, 15, 16, 17, 32, 33, 130}) {
      for (int64_t k_pairs : {0, 1, 16, 17, 96, 131, 300}) {
        const int64_t lda = k_pairs + 3, ldb = n + 5, ldc = n + 2;
        std::vector<uint32_t> a = RandomPairs(static_cast<size_t>(m * lda), 11 + m);
        std::vector<uint32_t> b = RandomPairs(static_cast<size_t>(k_pairs * ldb), 12 + n);
        const uint32_t nan_pair = BF16Pair(0x7fc0, 0x7fc0);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t kk = k_pairs; kk < lda; ++kk)
            a[static_cast<size_t>(i * lda + kk)] = nan_pair;
        }
        for (int64_t kk = 0; kk < k_pairs; ++kk) {
          for (int64_t j = n; j < ldb; ++j) b[static_cast<size_t>(kk * ldb + j)] = nan_pair;
        }
        std::vector<float> c(static_cast<size_t>(m * ldc), -7.0f);
        EmulatedTiles tiles;
        amx::AmxPairGemm(tiles,
                         amx::PairGemmArgs{.m = m,
                                           .n = n,
                                           .k_pairs = k_pairs,
                                           .a = a.data(),
                                           .lda = lda,
                                           .b = b.data(),
                                           .ldb = ldb,
                                           .c = c.data(),
                                           .ldc = ldc},
                         scratch);
        // One configuration per shape: full or partial rows, times full or partial columns.
        EXPECT_LE(tiles.configurations, 4) << m << " " << n << " " << k_pairs;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            float expected = 0.0f;
            for (int64_t kk = 0; kk < k_pairs; ++kk) {
              const uint32_t wa = a[static_cast<size_t>(i * lda + kk)];
              const uint32_t wb = b[static_cast<size_t>(kk * ldb + j)];
              expected += Lo(wa) * Lo(wb);
              expected += Hi(wa) * Hi(wb);
            }
            ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], expected)
                << m << " " << n << " " << k_pairs << " at " << i << " " << j;
          }
          for (int64_t j = n; j < ldc; ++j) {
            ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], -7.0f) << "wrote past n";
          }
        }
        // The kernel released the tiles: any further tile op faults.
        EXPECT_THROW(tiles.ZeroAcc(0), std::logic_error);
      }
    }
  }
}

TEST(AmxPairGemmTest, TheTileModelFaultsOnMismatchedShapes) {
  EmulatedTiles tiles;
  EXPECT_THROW(tiles.Dot(0), std::logic_error);  // no configuration
  // A with 8 pairs per row against B with 16 rows: A.colsb / 4 != B.rows.
  TileConfig config = amx::TileConfigFor({.rows = {16, 0}, .cols = {16, 0}});
  config.colsb[4] = 32;
  tiles.Configure(config);
  EXPECT_THROW(tiles.Dot(0), std::logic_error);
  EXPECT_THROW(tiles.Dot(1), std::logic_error);  // tile 1 unconfigured
  config.colsb[4] = 64;
  config.rows[0] = 8;  // C.rows != A.rows
  tiles.Configure(config);
  EXPECT_THROW(tiles.Dot(0), std::logic_error);
  config.rows[0] = 16;
  tiles.Configure(config);
  EXPECT_NO_THROW(tiles.Dot(0));
}

}  // namespace
}  // namespace mlarun
