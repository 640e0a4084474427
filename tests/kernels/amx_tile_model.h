// A software model of the AMX tile unit (kernels/cpu/amx_tiles.h's interface) for testing the
// tile kernels on any CPU. It follows the ISA reference's definitions of LDTILECFG, TILELOADD,
// TILESTORED, TILEZERO, TDPBF16PS and TDPBSUD (Intel Architecture Instruction Set Extensions
// Programming Reference, ch. 3) and throws std::logic_error on any configuration or operand shape
// the hardware faults on (#UD), and on any use of an unconfigured tile. Its TDPBF16PS sums in the
// reference's order (for each k pair: low product, then high), which real tiles do not follow
// bit for bit.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "core/dtype.h"
#include "kernels/cpu/amx_tiles.h"

namespace mlarun::test {

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
  void LoadAcc(int acc, const void* p, int64_t stride) { Load(acc, p, stride); }
  void StoreAcc(int acc, void* p, int64_t stride) {
    Check(acc);
    for (int r = 0; r < rows_[acc]; ++r) {
      std::memcpy(reinterpret_cast<char*>(p) + r * stride, &data_[acc][size_t{16} * r],
                  colsb_[acc]);
    }
  }
  void LoadA(int half, const void* p, int64_t stride) { Load(4 + half, p, stride); }
  void LoadB(int half, const void* p, int64_t stride) { Load(6 + half, p, stride); }
  // TDPBF16PS acc, tile 4 + acc / 2, tile 6 + acc % 2: for each row m, k pair and column n,
  // c += a.lo * b.lo, then c += a.hi * b.hi, in float32 (input denormals read as zero, output
  // denormals flushed).
  void Dot(int acc) {
    ForEachProduct(acc, [](uint32_t& c_word, uint32_t wa, uint32_t wb) {
      float c = 0.0f;
      std::memcpy(&c, &c_word, 4);
      c = Flush(c + Bf16(wa) * Bf16(wb));
      c = Flush(c + Bf16(wa >> 16) * Bf16(wb >> 16));
      std::memcpy(&c_word, &c, 4);
    });
  }
  // TDPBSUD acc, tile 4 + acc / 2, tile 6 + acc % 2: for each row m, column n and k, the int32
  // c += sum over i < 4 of int8 a.byte[4k + i] * uint8 b.byte[4n + i] (wrapping, as the tiles).
  void DotI8(int acc) {
    ForEachProduct(acc, [](uint32_t& c, uint32_t wa, uint32_t wb) {
      for (int i = 0; i < 4; ++i) {
        const auto sa = static_cast<int8_t>(static_cast<uint8_t>(wa >> (8 * i)));
        const auto ub = static_cast<uint8_t>(wb >> (8 * i));
        c += static_cast<uint32_t>(int32_t{sa} * int32_t{ub});
      }
    });
  }

 private:
  // Checks the shapes of a dot product into `acc`, then calls product(c, a_word, b_word) for each
  // row m, k and column n in that order, c being accumulator word (m, n).
  template <class Product>
  void ForEachProduct(int acc, Product product) {
    const int a = 4 + acc / 2, b = 6 + acc % 2;
    Check(acc);
    Check(a);
    Check(b);
    Require(colsb_[a] / 4 == rows_[b], "A.colsb / 4 != B.rows");
    Require(rows_[acc] == rows_[a], "C.rows != A.rows");
    Require(colsb_[acc] == colsb_[b], "C.colsb != B.colsb");
    for (int m = 0; m < rows_[acc]; ++m) {
      for (int k = 0; k < colsb_[a] / 4; ++k) {
        for (int n = 0; n < colsb_[acc] / 4; ++n) {
          product(data_[acc][m * 16 + n], data_[a][m * 16 + k], data_[b][k * 16 + n]);
        }
      }
    }
  }
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

}  // namespace mlarun::test
