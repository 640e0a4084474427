#include "model/finite_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace mlarun {
namespace {

// Each dtype's non-finite bit patterns are found at their index; the largest finite values and
// the neighbours of the patterns are not.
TEST(FiniteCheckTest, FindsEachDtypesNanAndInfPatterns) {
  const std::vector<float> f32 = {1.0f, 3.4e38f, -0.0f, INFINITY, NAN};
  EXPECT_EQ(FirstNonFiniteValue(DType::kF32, f32.data(), 5), 3);
  EXPECT_EQ(FirstNonFiniteValue(DType::kF32, f32.data(), 3), -1);
  // bf16: 0x7f7f the largest finite, 0xff80 -inf, 0x7fc1 a NaN.
  const std::vector<uint16_t> bf16 = {0x7f7f, 0xff7f, 0x0001, 0xff80, 0x7fc1};
  EXPECT_EQ(FirstNonFiniteValue(DType::kBF16, bf16.data(), 5), 3);
  EXPECT_EQ(FirstNonFiniteValue(DType::kBF16, bf16.data() + 4, 1), 0);
  // float16: 0x7bff the largest finite (65504), 0x7c00 inf, 0xfe00 a NaN.
  const std::vector<uint16_t> f16 = {0x7bff, 0xfbff, 0x0400, 0xfe00, 0x7c00};
  EXPECT_EQ(FirstNonFiniteValue(DType::kF16, f16.data(), 5), 3);
  EXPECT_EQ(FirstNonFiniteValue(DType::kF16, f16.data() + 4, 1), 0);
  EXPECT_EQ(FirstNonFiniteValue(DType::kF16, f16.data(), 3), -1);
  // FP8 e4m3fn: 0x7e (448) and 0xfe are finite; 0x7f and 0xff are NaN; there is no inf.
  const std::vector<uint8_t> fp8 = {0x7e, 0xfe, 0x78, 0x01, 0xff, 0x7f};
  EXPECT_EQ(FirstNonFiniteValue(DType::kF8E4M3, fp8.data(), 6), 4);
  EXPECT_EQ(FirstNonFiniteValue(DType::kF8E4M3, fp8.data(), 4), -1);
  // int8 has no such values.
  const std::vector<uint8_t> i8 = {0xff, 0x7f, 0x80};
  EXPECT_EQ(FirstNonFiniteValue(DType::kI8, i8.data(), 3), -1);
}

}  // namespace
}  // namespace mlarun
