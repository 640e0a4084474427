// The GGUF block format table (block_formats.h): table facts, hand-made blocks decoded by hand,
// quantise / dequantise round trips, dot products with Q8 activations against double precision,
// and the scalar block matmul.
#include "kernels/block_formats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/rng.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace mlarun {
namespace {

// float16 bits of a few exact values.
constexpr uint16_t kF16Eighth = 0x3000;    // 0.125
constexpr uint16_t kF16Quarter = 0x3400;   // 0.25
constexpr uint16_t kF16Half = 0x3800;      // 0.5
constexpr uint16_t kF16MinusOne = 0xbc00;  // -1.0

void PutF16(std::vector<uint8_t>* b, size_t at, uint16_t bits) {
  (*b)[at] = static_cast<uint8_t>(bits & 0xff);
  (*b)[at + 1] = static_cast<uint8_t>(bits >> 8);
}

std::vector<float> Dequantize(const BlockFormat& f, const std::vector<uint8_t>& blocks, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  f.dequantize(blocks.data(), n, out.data());
  return out;
}

std::vector<uint8_t> Quantize(const BlockFormat& f, const std::vector<float>& x) {
  std::vector<uint8_t> blocks(static_cast<size_t>(f.Bytes(static_cast<int64_t>(x.size()))));
  f.quantize(x.data(), static_cast<int64_t>(x.size()), blocks.data());
  return blocks;
}

// Standard normal values (Box-Muller on the deterministic Rng).
std::vector<float> Gaussian(int64_t n, uint64_t seed, float sigma = 1.0f, float mean = 0.0f) {
  Rng rng(seed);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) {
    const double u1 = (static_cast<double>(rng.NextU64() >> 11) + 0.5) * 0x1p-53;
    const double u2 = static_cast<double>(rng.NextU64() >> 11) * 0x1p-53;
    v = mean + sigma * static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2));
  }
  return x;
}

// sqrt(mean (x - y)^2) / sqrt(mean x^2).
double RelativeRms(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
    ref += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

const uint32_t kMultipliable[] = {kGgmlQ4_0, kGgmlQ4_1, kGgmlQ5_0, kGgmlQ5_1,
                                  kGgmlQ8_0, kGgmlQ4_K, kGgmlQ5_K, kGgmlQ6_K};

// ---------------------------------------------------------------------------------------------
// Table.

TEST(BlockFormatsTest, TableListsEveryGgmlTypeWithItsBlockSize) {
  struct Expected {
    uint32_t id;
    const char* name;
    int values, bytes;
    bool convertible, multipliable;
  };
  const Expected expected[] = {
      {0, "F32", 1, 4, true, false},          {1, "F16", 1, 2, true, false},
      {2, "Q4_0", 32, 18, true, true},        {3, "Q4_1", 32, 20, true, true},
      {6, "Q5_0", 32, 22, true, true},        {7, "Q5_1", 32, 24, true, true},
      {8, "Q8_0", 32, 34, true, true},        {9, "Q8_1", 32, 36, false, false},
      {10, "Q2_K", 256, 84, false, false},    {11, "Q3_K", 256, 110, false, false},
      {12, "Q4_K", 256, 144, true, true},     {13, "Q5_K", 256, 176, true, true},
      {14, "Q6_K", 256, 210, true, true},     {15, "Q8_K", 256, 292, false, false},
      {16, "IQ2_XXS", 256, 66, false, false}, {17, "IQ2_XS", 256, 74, false, false},
      {18, "IQ3_XXS", 256, 98, false, false}, {19, "IQ1_S", 256, 50, false, false},
      {20, "IQ4_NL", 32, 18, false, false},   {21, "IQ3_S", 256, 110, false, false},
      {22, "IQ2_S", 256, 82, false, false},   {23, "IQ4_XS", 256, 136, false, false},
      {24, "I8", 1, 1, false, false},         {25, "I16", 1, 2, false, false},
      {26, "I32", 1, 4, false, false},        {27, "I64", 1, 8, false, false},
      {28, "F64", 1, 8, false, false},        {29, "IQ1_M", 256, 56, false, false},
      {30, "BF16", 1, 2, true, false},        {34, "TQ1_0", 256, 54, false, false},
      {35, "TQ2_0", 256, 66, false, false},   {39, "MXFP4", 32, 17, false, false},
  };
  int found = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    const BlockFormat* f = FindBlockFormat(id);
    const Expected* e = nullptr;
    for (const Expected& candidate : expected) {
      if (candidate.id == id) e = &candidate;
    }
    ASSERT_EQ(f != nullptr, e != nullptr) << "id " << id;
    if (f == nullptr) continue;
    ++found;
    EXPECT_EQ(f->ggml_type, id);
    EXPECT_EQ(f->name, e->name);
    EXPECT_EQ(f->block_values, e->values) << e->name;
    EXPECT_EQ(f->block_bytes, e->bytes) << e->name;
    EXPECT_EQ(f->dequantize != nullptr, e->convertible) << e->name;
    EXPECT_EQ(f->quantize != nullptr, e->convertible) << e->name;
    EXPECT_EQ(f->multipliable(), e->multipliable) << e->name;
  }
  EXPECT_EQ(found, 32);
  // Removed ids and ids past the enum.
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 99u, 0xffffffffu}) {
    EXPECT_EQ(FindBlockFormat(id), nullptr) << id;
  }
  EXPECT_EQ(GetBlockFormat(kGgmlQ4_K).Bytes(512), 288);
  EXPECT_EQ(GetBlockFormat(kGgmlQ8_0).Bytes(96), 102);
  EXPECT_EQ(GetBlockFormat(kGgmlBF16).Bytes(3), 6);
}

TEST(BlockFormatsTest, LooksUpNamesCaseInsensitively) {
  ASSERT_NE(FindBlockFormatByName("q4_k"), nullptr);
  EXPECT_EQ(FindBlockFormatByName("q4_k")->ggml_type, kGgmlQ4_K);
  EXPECT_EQ(FindBlockFormatByName("Q8_0")->ggml_type, kGgmlQ8_0);
  EXPECT_EQ(FindBlockFormatByName("bF16")->ggml_type, kGgmlBF16);
  EXPECT_EQ(FindBlockFormatByName("iq2_xxs")->ggml_type, 16u);
  EXPECT_EQ(FindBlockFormatByName("f32")->ggml_type, kGgmlF32);
  for (const char* name : {"", "Q4_2", "q4", "Q4_K ", "Q4_KX", "F8_E4M3"}) {
    EXPECT_EQ(FindBlockFormatByName(name), nullptr) << name;
  }
  EXPECT_EQ(GetBlockFormat(kGgmlQ6_K).name, "Q6_K");
  EXPECT_DEATH(GetBlockFormat(4), "internal check failed");
}

// ---------------------------------------------------------------------------------------------
// Hand-made blocks: bytes written one by one, values worked out by hand.

// The common 4-bit pattern of the tests: byte i holds i % 16 in its low nibble and
// 15 - i % 16 in its high nibble.
uint8_t NibblePattern(int i) { return static_cast<uint8_t>((i & 15) | (15 - (i & 15)) << 4); }

TEST(BlockFormatsTest, DequantizesHandMadeQ4_0) {
  std::vector<uint8_t> b(18);
  PutF16(&b, 0, kF16Half);  // d = 0.5
  for (int i = 0; i < 16; ++i) b[2 + i] = NibblePattern(i);
  const std::vector<float> w = Dequantize(GetBlockFormat(kGgmlQ4_0), b, 32);
  EXPECT_EQ(w[0], -4.0f);   // 0.5 * (0 - 8)
  EXPECT_EQ(w[5], -1.5f);   // 0.5 * (5 - 8)
  EXPECT_EQ(w[16], 3.5f);   // high nibble of byte 0: 15 -> 0.5 * (15 - 8)
  EXPECT_EQ(w[21], 1.0f);   // high nibble of byte 5: 10 -> 0.5 * (10 - 8)
  EXPECT_EQ(w[31], -4.0f);  // high nibble of byte 15: 0
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(w[i], 0.5f * (i - 8));
    EXPECT_EQ(w[16 + i], 0.5f * (7 - i));
  }
}

TEST(BlockFormatsTest, DequantizesHandMadeQ4_1) {
  std::vector<uint8_t> b(20);
  PutF16(&b, 0, kF16Quarter);   // d = 0.25
  PutF16(&b, 2, kF16MinusOne);  // m = -1
  for (int i = 0; i < 16; ++i) b[4 + i] = NibblePattern(i);
  const std::vector<float> w = Dequantize(GetBlockFormat(kGgmlQ4_1), b, 32);
  EXPECT_EQ(w[3], -0.25f);  // 0.25 * 3 - 1
  EXPECT_EQ(w[16], 2.75f);  // 0.25 * 15 - 1
  EXPECT_EQ(w[31], -1.0f);  // 0.25 * 0 - 1
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(w[i], 0.25f * i - 1.0f);
    EXPECT_EQ(w[16 + i], 0.25f * (15 - i) - 1.0f);
  }
}

TEST(BlockFormatsTest, DequantizesHandMadeQ5_0) {
  std::vector<uint8_t> b(22);
  PutF16(&b, 0, kF16Half);  // d = 0.5
  // qh = 0x8001000f: bit 4 set for values 0-3, 16 and 31.
  b[2] = 0x0f, b[3] = 0x00, b[4] = 0x01, b[5] = 0x80;
  for (int i = 0; i < 16; ++i) b[6 + i] = NibblePattern(i);
  const std::vector<float> w = Dequantize(GetBlockFormat(kGgmlQ5_0), b, 32);
  EXPECT_EQ(w[0], 0.0f);    // 0.5 * ((0 | 16) - 16)
  EXPECT_EQ(w[2], 1.0f);    // 0.5 * ((2 | 16) - 16)
  EXPECT_EQ(w[4], -6.0f);   // 0.5 * (4 - 16): bit 4 clear
  EXPECT_EQ(w[5], -5.5f);   // 0.5 * (5 - 16)
  EXPECT_EQ(w[16], 7.5f);   // 0.5 * ((15 | 16) - 16)
  EXPECT_EQ(w[17], -1.0f);  // 0.5 * (14 - 16)
  EXPECT_EQ(w[31], 0.0f);   // 0.5 * ((0 | 16) - 16)
  EXPECT_EQ(w[30], -7.5f);  // 0.5 * (1 - 16): value 30 is the high nibble of byte 14
}

TEST(BlockFormatsTest, DequantizesHandMadeQ5_1) {
  std::vector<uint8_t> b(24);
  PutF16(&b, 0, kF16Quarter);  // d = 0.25
  PutF16(&b, 2, kF16Half);     // m = 0.5
  // qh = 0x40008100: bit 4 set for values 8, 15 and 30.
  b[4] = 0x00, b[5] = 0x81, b[6] = 0x00, b[7] = 0x40;
  for (int i = 0; i < 16; ++i) b[8 + i] = NibblePattern(i);
  const std::vector<float> w = Dequantize(GetBlockFormat(kGgmlQ5_1), b, 32);
  EXPECT_EQ(w[0], 0.5f);    // 0.25 * 0 + 0.5
  EXPECT_EQ(w[8], 6.5f);    // 0.25 * (8 | 16) + 0.5
  EXPECT_EQ(w[9], 2.75f);   // 0.25 * 9 + 0.5
  EXPECT_EQ(w[15], 8.25f);  // 0.25 * (15 | 16) + 0.5
  EXPECT_EQ(w[30], 4.75f);  // high nibble of byte 14 is 1: 0.25 * (1 | 16) + 0.5
  EXPECT_EQ(w[31], 0.5f);   // high nibble of byte 15 is 0
  EXPECT_EQ(w[16], 4.25f);  // 0.25 * 15 + 0.5
}

TEST(BlockFormatsTest, DequantizesHandMadeQ8_0) {
  std::vector<uint8_t> b(34);
  PutF16(&b, 0, kF16Eighth);  // d = 0.125
  for (int i = 0; i < 32; ++i) b[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(8 * i - 128));
  const std::vector<float> w = Dequantize(GetBlockFormat(kGgmlQ8_0), b, 32);
  EXPECT_EQ(w[0], -16.0f);  // 0.125 * -128
  EXPECT_EQ(w[16], 0.0f);
  EXPECT_EQ(w[31], 15.0f);  // 0.125 * 120
  for (int i = 0; i < 32; ++i) EXPECT_EQ(w[i], static_cast<float>(i - 16));
}

// Q4_K / Q5_K scales: sc = {1, 2, 3, 4, 17, 33, 50, 63}, m = {0, 5, 10, 63, 16, 20, 40, 7},
// packed by hand: bytes 0-3 sc_j | (sc_{j+4} >> 4) << 6, bytes 4-7 m_j | (m_{j+4} >> 4) << 6,
// bytes 8-11 (sc_{j+4} & 15) | (m_{j+4} & 15) << 4.
const int kScK[8] = {1, 2, 3, 4, 17, 33, 50, 63};
const int kMinK[8] = {0, 5, 10, 63, 16, 20, 40, 7};
const uint8_t kPackedScalesK[12] = {
    1 | 1 << 6, 2 | 2 << 6, 3 | 3 << 6,  4 | 3 << 6,    // 65, 130, 195, 196
    0 | 1 << 6, 5 | 1 << 6, 10 | 2 << 6, 63 | 0 << 6,   // 64, 69, 138, 63
    1 | 0 << 4, 1 | 4 << 4, 2 | 8 << 4,  15 | 7 << 4};  // 1, 65, 130, 127

std::vector<uint8_t> HandMadeK(int bytes, int qs_at) {
  std::vector<uint8_t> b(static_cast<size_t>(bytes));
  PutF16(&b, 0, kF16Half);     // d = 0.5
  PutF16(&b, 2, kF16Quarter);  // dmin = 0.25
  for (int i = 0; i < 12; ++i) b[4 + i] = kPackedScalesK[i];
  for (int i = 0; i < 128; ++i) b[static_cast<size_t>(qs_at + i)] = NibblePattern(i);
  return b;
}

// The low 4 bits of value v of the pattern: chunk v / 64, byte 32 (v / 64) + v % 32, low
// nibble for the chunk's first 32 values.
int NibbleK(int v) {
  const uint8_t byte = NibblePattern(32 * (v / 64) + v % 32);
  return v % 64 < 32 ? byte & 15 : byte >> 4;
}

TEST(BlockFormatsTest, DequantizesHandMadeQ4_K) {
  const std::vector<float> w = Dequantize(GetBlockFormat(kGgmlQ4_K), HandMadeK(144, 16), 256);
  EXPECT_EQ(w[3], 1.5f);      // sub-block 0: 0.5 * 1 * 3 - 0.25 * 0
  EXPECT_EQ(w[100], 6.25f);   // sub-block 3, high nibble of byte 36 (11): 0.5*4*11 - 0.25*63
  EXPECT_EQ(w[165], 160.0f);  // sub-block 5, high nibble of byte 69 (10): 0.5*33*10 - 0.25*20
  EXPECT_EQ(w[200], 190.0f);  // sub-block 6, low nibble of byte 104 (8): 0.5*50*8 - 0.25*40
  EXPECT_EQ(w[255], -1.75f);  // sub-block 7, high nibble of byte 127 (0): -0.25 * 7
  for (int v = 0; v < 256; ++v) {
    EXPECT_EQ(w[v], 0.5f * kScK[v / 32] * NibbleK(v) - 0.25f * kMinK[v / 32]) << v;
  }
}

// qh[l] = 0xaa for even l, 0x55 for odd l: bit j of qh[l] (bit 4 of value 32 j + l) is set
// for odd j at even l and even j at odd l.
int HighBitQ5_K(int v) {
  const int l = v % 32, j = v / 32;
  return ((l % 2 == 0 ? 0xaa : 0x55) >> j) & 1;
}

TEST(BlockFormatsTest, DequantizesHandMadeQ5_K) {
  std::vector<uint8_t> b = HandMadeK(176, 48);
  for (int l = 0; l < 32; ++l) b[static_cast<size_t>(16 + l)] = l % 2 == 0 ? 0xaa : 0x55;
  const std::vector<float> w = Dequantize(GetBlockFormat(kGgmlQ5_K), b, 256);
  EXPECT_EQ(w[2], 1.0f);       // sub-block 0, l = 2: bit 0 of 0xaa clear: 0.5 * 1 * 2
  EXPECT_EQ(w[3], 9.5f);       // l = 3: bit 0 of 0x55 set: 0.5 * 1 * (3 + 16)
  EXPECT_EQ(w[164], 440.5f);   // sub-block 5, l = 4: bit 5 of 0xaa set, nibble 11:
                               // 0.5 * 33 * 27 - 0.25 * 20
  EXPECT_EQ(w[254], 533.75f);  // sub-block 7, l = 30: bit 7 of 0xaa set, nibble 1:
                               // 0.5 * 63 * 17 - 0.25 * 7
  EXPECT_EQ(w[255], -1.75f);   // l = 31: bit 7 of 0x55 clear, nibble 0
  for (int v = 0; v < 256; ++v) {
    const int q = NibbleK(v) | HighBitQ5_K(v) << 4;
    EXPECT_EQ(w[v], 0.5f * kScK[v / 32] * q - 0.25f * kMinK[v / 32]) << v;
  }
}

TEST(BlockFormatsTest, DequantizesHandMadeQ6_K) {
  const int8_t scales[16] = {1, -1, 2, -2, 3, -3, 4, -4, 5, -5, 6, -6, 7, -7, 8, -8};
  std::vector<uint8_t> b(210);
  for (int i = 0; i < 128; ++i) b[static_cast<size_t>(i)] = NibblePattern(i);  // ql
  // qh: 0xe4 = 11 10 01 00 (group g gets high bits g) at even l, 0x1b (3 - g) at odd l.
  for (int i = 0; i < 64; ++i) b[static_cast<size_t>(128 + i)] = i % 2 == 0 ? 0xe4 : 0x1b;
  for (int i = 0; i < 16; ++i) b[static_cast<size_t>(192 + i)] = static_cast<uint8_t>(scales[i]);
  PutF16(&b, 208, kF16Quarter);  // d = 0.25
  const std::vector<float> w = Dequantize(GetBlockFormat(kGgmlQ6_K), b, 256);
  EXPECT_EQ(w[0], -8.0f);     // q = 0: 0.25 * 1 * (0 - 32)
  EXPECT_EQ(w[37], 2.5f);     // g 1, l 5: low 5 of ql[37], high 2 (qh[5] = 0x1b): q = 37,
                              // 0.25 * 2 * (37 - 32)
  EXPECT_EQ(w[70], 6.75f);    // g 2, l 6: ql[6] >> 4 = 9, high 2: q = 41, 0.25 * 3 * 9
  EXPECT_EQ(w[127], 32.0f);   // g 3, l 31: ql[63] >> 4 = 0, qh[31] >> 6 = 0: 0.25 * -4 * -32
  EXPECT_EQ(w[144], 40.0f);   // second half, g 0, l 16: ql[80] & 15 = 0, 0: 0.25 * -5 * -32
  EXPECT_EQ(w[161], 1.5f);    // second half, g 1, l 1: ql[97] & 15 = 1, high 2: 0.25 * 6 * 1
  EXPECT_EQ(w[200], 12.25f);  // second half, g 2, l 8: ql[72] >> 4 = 7, high 2: 0.25 * 7 * 7
  EXPECT_EQ(w[255], 64.0f);   // second half, g 3, l 31: q = 0, 0.25 * -8 * -32
  for (int v = 0; v < 256; ++v) {
    const int half = v / 128, g = (v % 128) / 32, l = v % 32;
    const int low = (NibblePattern(64 * half + 32 * (g % 2) + l) >> (g >= 2 ? 4 : 0)) & 15;
    const int high = ((l % 2 == 0 ? 0xe4 : 0x1b) >> (2 * g)) & 3;
    EXPECT_EQ(w[v], 0.25f * scales[v / 16] * ((low | high << 4) - 32)) << v;
  }
}

TEST(BlockFormatsTest, ConvertsFloatTypes) {
  const std::vector<float> x = {1.0f, -2.5f, 0.1f, 1e6f, -3.4e38f, 0.0f};
  const std::vector<float> f32 =
      Dequantize(GetBlockFormat(kGgmlF32), Quantize(GetBlockFormat(kGgmlF32), x), 6);
  EXPECT_EQ(f32, x);
  const std::vector<uint8_t> f16_bytes = Quantize(GetBlockFormat(kGgmlF16), x);
  EXPECT_EQ(f16_bytes[0], 0x00);  // 1.0 = 0x3c00, little-endian
  EXPECT_EQ(f16_bytes[1], 0x3c);
  const std::vector<float> f16 = Dequantize(GetBlockFormat(kGgmlF16), f16_bytes, 6);
  EXPECT_EQ(f16[1], -2.5f);
  EXPECT_EQ(f16[2], F16ToF32(F32ToF16(0.1f)));
  EXPECT_EQ(f16[3], 65504.0f);  // saturated, not inf
  EXPECT_EQ(f16[4], -65504.0f);
  const std::vector<float> bf16 =
      Dequantize(GetBlockFormat(kGgmlBF16), Quantize(GetBlockFormat(kGgmlBF16), x), 6);
  EXPECT_EQ(bf16[1], -2.5f);
  EXPECT_EQ(bf16[2], BF16ToF32(F32ToBF16(0.1f)));
  EXPECT_EQ(bf16[3], BF16ToF32(F32ToBF16(1e6f)));
  EXPECT_EQ(bf16[4], -BF16ToF32(0x7f7f));  // -3.4e38 rounds past the largest bf16: saturated
}

// ---------------------------------------------------------------------------------------------
// Quantisation.

struct RoundTripBound {
  uint32_t type;
  double max_relative_rms;
};

// Relative RMS errors measured on N(0, 1) data (seed 7, 64 Ki values): F16 2.1e-4, BF16 1.7e-3,
// Q8_0 0.00538, Q6_K 0.0170, Q5_K 0.0348, Q5_1 0.0347, Q5_0 0.0406, Q4_K 0.0705, Q4_1 0.0710,
// Q4_0 0.0830. The bounds leave about 4% margin; they are below what the plain fits (ggml's
// choices d = vmax / -8, min / max, 6-bit scales of max / 63 without a search) give on the same
// data: Q6_K 0.0188, Q5_K 0.0382, Q5_1 0.0379, Q5_0 0.0427, Q4_K 0.0784, Q4_1 0.0782, Q4_0 0.0860.
const RoundTripBound kRoundTripBounds[] = {
    {kGgmlF32, 0.0},     {kGgmlF16, 2.3e-4},  {kGgmlBF16, 1.8e-3}, {kGgmlQ8_0, 0.0056},
    {kGgmlQ6_K, 0.0177}, {kGgmlQ5_K, 0.0362}, {kGgmlQ5_1, 0.0362}, {kGgmlQ5_0, 0.0422},
    {kGgmlQ4_K, 0.0735}, {kGgmlQ4_1, 0.0740}, {kGgmlQ4_0, 0.0863},
};

TEST(BlockQuantizeTest, RoundTripErrorIsBounded) {
  const std::vector<float> x = Gaussian(65536, 7);
  for (const RoundTripBound& bound : kRoundTripBounds) {
    const BlockFormat& f = GetBlockFormat(bound.type);
    const double err =
        RelativeRms(x, Dequantize(f, Quantize(f, x), static_cast<int64_t>(x.size())));
    std::printf("%-5s relative rms error %.5f\n", std::string(f.name).c_str(), err);
    EXPECT_LE(err, bound.max_relative_rms) << f.name;
  }
}

TEST(BlockQuantizeTest, KQuantsMatchTheir32ValueCounterparts) {
  // Weights whose scale changes from one block of 32 to the next: Q4_1 / Q5_1 (5 / 6 bits per
  // weight) store each block's float16 scale and min, Q4_K / Q5_K (4.5 / 5.5 bits) 6-bit ones
  // relative to the super-block's. Measured: Q4_K 0.0704, Q4_1 0.0708, Q5_K 0.0347, Q5_1 0.0345,
  // Q6_K 0.0170, Q8_0 0.0053.
  std::vector<float> x = Gaussian(65536, 11);
  for (size_t i = 0; i < x.size(); ++i) x[i] *= 0.5f + static_cast<float>((i / 32) % 7) * 0.25f;
  auto error = [&](uint32_t type) {
    const BlockFormat& f = GetBlockFormat(type);
    const double err =
        RelativeRms(x, Dequantize(f, Quantize(f, x), static_cast<int64_t>(x.size())));
    std::printf("%-5s relative rms error %.5f\n", std::string(f.name).c_str(), err);
    return err;
  };
  const double q4_1 = error(kGgmlQ4_1), q4_k = error(kGgmlQ4_K);
  const double q5_1 = error(kGgmlQ5_1), q5_k = error(kGgmlQ5_K);
  const double q6_k = error(kGgmlQ6_K), q8_0 = error(kGgmlQ8_0);
  EXPECT_LT(q4_k, q4_1 * 1.02);
  EXPECT_LT(q5_k, q5_1 * 1.02);
  EXPECT_LT(q6_k, q5_k * 0.6);
  EXPECT_LT(q8_0, q6_k * 0.4);
}

TEST(BlockQuantizeTest, QuantizesRepresentableBlocksExactly) {
  // Values on a 32-value type's own grid come back exactly: the fits find d (and m) as they are.
  std::vector<float> q4_0(32), q5_0(32), q4_1(32), q5_1(32), q8_0(32);
  for (int i = 0; i < 32; ++i) {
    q4_0[i] = 0.5f * static_cast<float>(i % 16 - 8);     // d = 0.5: -8 is the extreme, d = -4 / -8
    q5_0[i] = 0.25f * static_cast<float>(i - 16);        // d = 0.25
    q4_1[i] = 0.25f * static_cast<float>(i % 16) - 1;    // d = 0.25, m = -1
    q5_1[i] = 0.125f * static_cast<float>(31 - i) + 3;   // d = 0.125, m = 3
    q8_0[i] = 0.125f * static_cast<float>(8 * i - 121);  // d = 0.125: -121 ... 127
  }
  const std::pair<uint32_t, const std::vector<float>*> cases[] = {{kGgmlQ4_0, &q4_0},
                                                                  {kGgmlQ5_0, &q5_0},
                                                                  {kGgmlQ4_1, &q4_1},
                                                                  {kGgmlQ5_1, &q5_1},
                                                                  {kGgmlQ8_0, &q8_0}};
  for (const auto& [type, x] : cases) {
    const BlockFormat& f = GetBlockFormat(type);
    EXPECT_EQ(Dequantize(f, Quantize(f, *x), 32), *x) << f.name;
  }
}

TEST(BlockQuantizeTest, AllZeroBlocksGiveZeroScalesAndValues) {
  for (uint32_t type : kMultipliable) {
    const BlockFormat& f = GetBlockFormat(type);
    const std::vector<float> x(512, 0.0f);
    const std::vector<uint8_t> blocks = Quantize(f, x);
    for (float v : Dequantize(f, blocks, 512)) EXPECT_EQ(v, 0.0f) << f.name;
    // The float16 scales: d (and m / dmin) first, Q6_K's d last.
    const size_t d_at = type == kGgmlQ6_K ? 208 : 0;
    EXPECT_EQ(blocks[d_at] | blocks[d_at + 1], 0) << f.name;
    if (type == kGgmlQ4_K || type == kGgmlQ5_K) {
      EXPECT_EQ(blocks[2] | blocks[3], 0) << f.name;
    }
    if (type == kGgmlQ6_K) {
      for (int j = 0; j < 16; ++j) EXPECT_EQ(blocks[static_cast<size_t>(192 + j)], 0) << j;
    }
  }
}

TEST(BlockQuantizeTest, OutlierIsKeptAndOtherBlocksAreUntouched) {
  for (uint32_t type : kMultipliable) {
    const BlockFormat& f = GetBlockFormat(type);
    const std::vector<float> x = Gaussian(1024, 3, 0.01f);
    std::vector<float> y = x;
    y[300] = 100.0f;  // in block 300 / block_values
    const std::vector<uint8_t> bx = Quantize(f, x), by = Quantize(f, y);
    const std::vector<float> w = Dequantize(f, by, 1024);
    EXPECT_NEAR(w[300], 100.0f, 0.5f) << f.name;
    for (float v : w) EXPECT_TRUE(std::isfinite(v)) << f.name;
    // Blocks are quantised independently: only the outlier's block changes.
    const int64_t outlier_block = 300 / f.block_values;
    for (int64_t b = 0; b < 1024 / f.block_values; ++b) {
      if (b == outlier_block) continue;
      EXPECT_EQ(std::memcmp(bx.data() + b * f.block_bytes, by.data() + b * f.block_bytes,
                            static_cast<size_t>(f.block_bytes)),
                0)
          << f.name << " block " << b;
    }
  }
}

TEST(BlockQuantizeTest, ClampsToTheIntegerAndFloat16Ranges) {
  // Q4_0's extreme value sits at q = 0 (d = vmax / -8 and close): the opposite extreme +8 can
  // only reach q = 15 (clamped), 7 steps up.
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;
  x[1] = 8.0f;
  const BlockFormat& q4 = GetBlockFormat(kGgmlQ4_0);
  const std::vector<uint8_t> b = Quantize(q4, x);
  const float d = F16ToF32(static_cast<uint16_t>(b[0] | b[1] << 8));
  EXPECT_GT(d, 0.0f);
  EXPECT_LE(b[2] & 15, 1);   // value 0 at q = 0 or 1
  EXPECT_EQ(b[3] & 15, 15);  // value 1 clamped to q = 15
  EXPECT_EQ(Dequantize(q4, b, 32)[1], 7.0f * d);

  // Q8_0 with max |x| / 127 beyond float16: d saturates at 65504, q at 127.
  std::vector<float> big(32, 0.0f);
  big[5] = 1e8f;
  big[6] = -1e8f;
  const std::vector<float> w8 =
      Dequantize(GetBlockFormat(kGgmlQ8_0), Quantize(GetBlockFormat(kGgmlQ8_0), big), 32);
  EXPECT_EQ(w8[5], 65504.0f * 127.0f);
  EXPECT_EQ(w8[6], -65504.0f * 127.0f);

  // Huge values in every type: finite output with the extreme's sign.
  for (uint32_t type : kMultipliable) {
    const BlockFormat& f = GetBlockFormat(type);
    std::vector<float> h = Gaussian(256, 5);
    h[10] = 3e38f;
    h[200] = -1e30f;
    const std::vector<float> w = Dequantize(f, Quantize(f, h), 256);
    for (float v : w) EXPECT_TRUE(std::isfinite(v)) << f.name;
    EXPECT_GT(w[10], 1e5f) << f.name;
  }
}

// ---------------------------------------------------------------------------------------------
// Dot products.

// Q8 activations of x [n_tokens, cols], as QuantizeActivationsQ8 lays them out.
Q8Activations MakeActivations(const std::vector<float>& x, int64_t n_tokens, int64_t cols) {
  Q8Activations a;
  a.n_tokens = n_tokens;
  a.cols = cols;
  a.padded_cols = Q8PaddedCols(cols);
  a.values.resize(static_cast<size_t>(n_tokens * a.padded_cols));
  a.scales.resize(static_cast<size_t>(n_tokens * a.padded_cols / kQ8Block));
  a.offsets.resize(a.scales.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    QuantizeActivationRowQ8(x.data() + t * cols, cols, a.values.data() + t * a.padded_cols,
                            a.scales.data() + t * (a.padded_cols / kQ8Block),
                            a.offsets.data() + t * (a.padded_cols / kQ8Block));
  }
  return a;
}

TEST(BlockDotTest, MatchesDoublePrecisionProductOfDequantizedValues) {
  const int64_t cols = 768, n_tokens = 2;
  // Token 1 has a large mean, so the offset terms m_b A_b matter.
  std::vector<float> x = Gaussian(cols, 21);
  const std::vector<float> x1 = Gaussian(cols, 22, 0.3f, 2.0f);
  x.insert(x.end(), x1.begin(), x1.end());
  const Q8Activations a = MakeActivations(x, n_tokens, cols);
  for (uint32_t type : kMultipliable) {
    const BlockFormat& f = GetBlockFormat(type);
    for (int row = 0; row < 3; ++row) {
      const std::vector<float> w = Gaussian(cols, 100 + row, 0.05f, row == 2 ? 0.03f : 0.0f);
      const std::vector<uint8_t> blocks = Quantize(f, w);
      const std::vector<float> wd = Dequantize(f, blocks, cols);
      for (int64_t t = 0; t < n_tokens; ++t) {
        double expected = 0, magnitude = 0;
        for (int64_t i = 0; i < cols; ++i) {
          const double term =
              static_cast<double>(wd[i]) * (static_cast<double>(a.Scales(t)[i / 32]) * a.Row(t)[i]);
          expected += term;
          magnitude += std::fabs(term);
        }
        ASSERT_GT(magnitude, 0.0);
        const float got = f.dot_q8(blocks.data(), cols, a.Row(t), a.Scales(t), a.Offsets(t));
        EXPECT_NEAR(got, expected, 1e-5 * magnitude) << f.name << " row " << row << " token " << t;
      }
    }
  }
}

// The documented float order, reproduced bit for bit: per 32-value block
// sum += xs_b * (s_b * (float)I_b + m_b * (float)A_b), in row order.
TEST(BlockDotTest, FollowsTheDocumentedFloatOrder) {
  const int64_t cols = 256;
  const Q8Activations a = MakeActivations(Gaussian(cols, 31, 1.0f, 0.5f), 1, cols);
  // Q4_K: the hand-made block, s_b = 0.5 * sc_j, m_b = -(0.25 * m_j).
  {
    const std::vector<uint8_t> b = HandMadeK(144, 16);
    float sum = 0.0f;
    for (int j = 0; j < 8; ++j) {
      int32_t dot = 0, a_sum = 0;
      for (int i = 0; i < 32; ++i) {
        dot += NibbleK(32 * j + i) * a.Row(0)[32 * j + i];
        a_sum += a.Row(0)[32 * j + i];
      }
      EXPECT_EQ(a.Offsets(0)[j], -128 * a_sum);
      const float s = 0.5f * static_cast<float>(kScK[j]);
      const float m = -(0.25f * static_cast<float>(kMinK[j]));
      sum += a.Scales(0)[j] * (s * static_cast<float>(dot) + m * static_cast<float>(a_sum));
    }
    EXPECT_EQ(GetBlockFormat(kGgmlQ4_K).dot_q8(b.data(), cols, a.Row(0), a.Scales(0), a.Offsets(0)),
              sum);
  }
  // Q4_1 from the quantiser: s_b = d, m_b = m (read from the block bytes).
  {
    const BlockFormat& f = GetBlockFormat(kGgmlQ4_1);
    const std::vector<uint8_t> b = Quantize(f, Gaussian(cols, 32, 0.1f, 0.2f));
    float sum = 0.0f;
    for (int blk = 0; blk < 8; ++blk) {
      const uint8_t* p = b.data() + 20 * blk;
      const float d = F16ToF32(static_cast<uint16_t>(p[0] | p[1] << 8));
      const float m = F16ToF32(static_cast<uint16_t>(p[2] | p[3] << 8));
      int32_t dot = 0, a_sum = 0;
      for (int i = 0; i < 32; ++i) {
        const int q = i < 16 ? p[4 + i] & 15 : p[4 + i - 16] >> 4;
        dot += q * a.Row(0)[32 * blk + i];
        a_sum += a.Row(0)[32 * blk + i];
      }
      sum += a.Scales(0)[blk] * (d * static_cast<float>(dot) + m * static_cast<float>(a_sum));
    }
    EXPECT_EQ(f.dot_q8(b.data(), cols, a.Row(0), a.Scales(0), a.Offsets(0)), sum);
  }
}

TEST(BlockDotTest, MatMulRowsBlocksScalarEqualsPerRowDots) {
  const int64_t rows = 6, cols = 512, n_tokens = 3, row_begin = 2, row_end = 5, ldy = 7;
  const Q8Activations a = MakeActivations(Gaussian(n_tokens * cols, 41), n_tokens, cols);
  for (uint32_t type : {kGgmlQ5_0, kGgmlQ4_K, kGgmlQ6_K}) {
    const BlockFormat& f = GetBlockFormat(type);
    const std::vector<uint8_t> blocks = Quantize(f, Gaussian(rows * cols, 42, 0.02f));
    const WeightMatrix w{
        .dtype = DType::kBlocks, .rows = rows, .cols = cols, .data = blocks.data(), .blocks = &f};
    std::vector<float> y(static_cast<size_t>(n_tokens * ldy), -777.0f);
    MatMulRowsBlocksScalar(w, row_begin, row_end, a, y.data(), ldy);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t c = 0; c < ldy; ++c) {
        const float got = y[static_cast<size_t>(t * ldy + c)];
        if (c < row_end - row_begin) {
          const uint8_t* row = blocks.data() + (row_begin + c) * f.Bytes(cols);
          EXPECT_EQ(got, f.dot_q8(row, cols, a.Row(t), a.Scales(t), a.Offsets(t)))
              << f.name << " t " << t << " c " << c;
          EXPECT_NE(got, 0.0f);
        } else {
          EXPECT_EQ(got, -777.0f) << "wrote past the row range";
        }
      }
    }
  }
}

}  // namespace
}  // namespace mlarun
