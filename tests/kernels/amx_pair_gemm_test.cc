// The AMX pair GEMM's blocking (kernels/cpu/amx_pair_gemm.h) run on a software model of the tile
// unit, so that it is tested on every CPU: the model follows the ISA reference's definitions of
// LDTILECFG, TILELOADD, TILESTORED, TILEZERO and TDPBF16PS (Intel Architecture Instruction Set
// Extensions Programming Reference, ch. 3) and fails the test on any configuration or operand
// shape the hardware would fault on (#UD), or any use of an unconfigured tile. The same kernel on
// the real tiles is tested by SimdAttentionTest.Bf16PairGemmMatchesDoubleReference where the CPU
// has AMX.
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

namespace mlarun {
namespace {

using amx::TileConfig;

// Eight tiles of up to 16 rows of 64 bytes, with the palette-1 configuration.
class EmulatedTiles {
 public:
  int configurations = 0;

  void Configure(const TileConfig& config) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(&config);
    Require(bytes[0] == 1, "palette must be 1");
    for (int i = 2; i < 16; ++i) Require(bytes[i] == 0, "reserved byte " + std::to_string(i));
    for (int i = 32; i < 48; ++i) Require(bytes[i] == 0, "reserved byte " + std::to_string(i));
    for (int i = 56; i < 64; ++i) Require(bytes[i] == 0, "reserved byte " + std::to_string(i));
    for (int t = 0; t < 8; ++t) {
      uint16_t colsb = 0;
      std::memcpy(&colsb, bytes + 16 + ptrdiff_t{2} * t, 2);
      const int rows = bytes[48 + t];
      Require(rows <= 16 && colsb <= 64 && colsb % 4 == 0, "tile " + std::to_string(t) + " shape");
      Require((rows == 0) == (colsb == 0), "tile " + std::to_string(t) + " half configured");
      rows_[t] = rows;
      colsb_[t] = colsb;
    }
    for (auto& tile : data_) tile.fill(0u);  // LDTILECFG zeroes the tiles
    configured_ = true;
    ++configurations;
  }
  void Release() { configured_ = false; }
  void ZeroAcc(int acc) {
    Check(acc);
    data_[acc].fill(0u);
  }
  void LoadAcc(int acc, const float* p, int64_t stride) { Load(acc, p, stride); }
  void StoreAcc(int acc, float* p, int64_t stride) {
    Check(acc);
    for (int r = 0; r < rows_[acc]; ++r) {
      std::memcpy(reinterpret_cast<char*>(p) + r * stride, &data_[acc][size_t{16} * r],
                  colsb_[acc]);
    }
  }
  void LoadA(int half, const uint32_t* p, int64_t stride) { Load(4 + half, p, stride); }
  void LoadB(int half, const uint32_t* p, int64_t stride) { Load(6 + half, p, stride); }
  // TDPBF16PS acc, tile 4 + acc / 2, tile 6 + acc % 2: for each row m, k pair and column n,
  // c += a.lo * b.lo, then c += a.hi * b.hi, in float32 (input denormals read as zero, output
  // denormals flushed).
  void Dot(int acc) {
    const int a = 4 + acc / 2, b = 6 + acc % 2;
    Check(acc);
    Check(a);
    Check(b);
    Require(colsb_[a] / 4 == rows_[b], "A.colsb / 4 != B.rows");
    Require(rows_[acc] == rows_[a], "C.rows != A.rows");
    Require(colsb_[acc] == colsb_[b], "C.colsb != B.colsb");
    for (int m = 0; m < rows_[acc]; ++m) {
      for (int k = 0; k < colsb_[a] / 4; ++k) {
        const uint32_t wa = data_[a][m * 16 + k];
        for (int n = 0; n < colsb_[acc] / 4; ++n) {
          const uint32_t wb = data_[b][k * 16 + n];
          float c = 0.0f;
          std::memcpy(&c, &data_[acc][m * 16 + n], 4);
          c = Flush(c + Bf16(wa) * Bf16(wb));
          c = Flush(c + Bf16(wa >> 16) * Bf16(wb >> 16));
          std::memcpy(&data_[acc][m * 16 + n], &c, 4);
        }
      }
    }
  }

 private:
  static void Require(bool ok, const std::string& what) {
    if (!ok) throw std::logic_error("AMX fault: " + what);
  }
  static float Flush(float x) { return std::fpclassify(x) == FP_SUBNORMAL ? 0.0f * x : x; }
  static float Bf16(uint32_t word) { return Flush(BF16ToF32(static_cast<uint16_t>(word))); }
  void Check(int t) const {
    Require(configured_, "tile op without a configuration");
    Require(rows_[t] > 0, "tile " + std::to_string(t) + " not configured");
  }
  // Reads rows x colsb bytes; the rest of the tile reads as zero.
  void Load(int t, const void* p, int64_t stride) {
    Check(t);
    data_[t].fill(0u);
    for (int r = 0; r < rows_[t]; ++r) {
      std::memcpy(&data_[t][size_t{16} * r], static_cast<const char*>(p) + r * stride, colsb_[t]);
    }
  }

  bool configured_ = false;
  std::array<int, 8> rows_{};
  std::array<int, 8> colsb_{};
  std::array<std::array<uint32_t, 256>, 8> data_{};
};

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
