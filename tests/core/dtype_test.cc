// Scalar dtype conversions against hand-computed bit patterns.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mlarun {
namespace {

TEST(DtypeTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(F32ToBF16(1.0f), 0x3f80);
  EXPECT_EQ(BF16ToF32(0x3f80), 1.0f);
  EXPECT_EQ(BF16ToF32(0xc040), -3.0f);
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(F32ToBF16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even): rounds up.
  EXPECT_EQ(F32ToBF16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(std::nanf("")))));
}

TEST(DtypeTest, F16KnownValues) {
  EXPECT_EQ(F32ToF16(1.0f), 0x3c00);
  EXPECT_EQ(F32ToF16(-2.0f), 0xc000);
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(1e6f), 0x7c00);
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(F16ToF32(0x3555), 0.333251953125f);
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    EXPECT_EQ(F32ToF16(F16ToF32(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(DtypeTest, Fp8E4M3KnownValuesAndRoundTrip) {
  EXPECT_EQ(F8E4M3ToF32(0x38), 1.0f);                  // exponent 7, mantissa 0
  EXPECT_EQ(F8E4M3ToF32(0x7e), 448.0f);                // largest finite
  EXPECT_EQ(F8E4M3ToF32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(F8E4M3ToF32(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(F8E4M3ToF32(0x7f)));
  EXPECT_EQ(F32ToF8E4M3(1000.0f), 0x7e);  // saturates
  EXPECT_EQ(F32ToF8E4M3(-1000.0f), 0xfe);
  // 1.0625 is halfway between 1.0 and 1.125: ties to even mantissa (1.0).
  EXPECT_EQ(F32ToF8E4M3(1.0625f), 0x38);
  for (int v = 0; v < 256; ++v) {
    if ((v & 0x7f) == 0x7f) continue;  // NaN
    const float f = F8E4M3ToF32(static_cast<uint8_t>(v));
    if (v == 0x80) continue;  // -0 encodes as 0x80 too; checked by value below
    EXPECT_EQ(F32ToF8E4M3(f), v) << v;
  }
  EXPECT_EQ(F8E4M3ToF32(F32ToF8E4M3(-0.0f)), 0.0f);
}

TEST(DtypeTest, ParsesOptionAndSafetensorsNames) {
  DType d;
  ASSERT_TRUE(ParseDTypeName("F8_E4M3", &d));
  EXPECT_EQ(d, DType::kF8E4M3);
  ASSERT_TRUE(ParseDTypeOption("int8", &d));
  EXPECT_EQ(d, DType::kI8);
  EXPECT_FALSE(ParseDTypeName("F4", &d));
  EXPECT_FALSE(ParseDTypeOption("float", &d));
}

}  // namespace
}  // namespace mlarun
