// Cache row sizes and encodings.
#include "kernels/kv_row.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/rng.h"

namespace mlarun {
namespace {

KvRowFormat MlaRow(DType dtype) {
  return {.dtype = dtype,
          .n_head_kv = 1,
          .head_dim_k = 576,
          .head_dim_v = 512,
          .v_aliases_k = true,
          .rope_tail_dim = 64};
}

TEST(KvRowTest, RowBytesMatchFormulas) {
  EXPECT_EQ(MlaRow(DType::kBF16).RowBytes(), 1152u);  // 576 * 2
  EXPECT_EQ(MlaRow(DType::kF32).RowBytes(), 2304u);
  // int8: 512 values + 4 fp32 scales + 64 bf16 RoPE values = FlashMLA's 656 bytes.
  EXPECT_EQ(MlaRow(DType::kI8).RowBytes(), 656u);
  const KvRowFormat mha{
      .dtype = DType::kBF16, .n_head_kv = 16, .head_dim_k = 192, .head_dim_v = 128};
  EXPECT_EQ(mha.RowBytes(), 16u * (192 + 128) * 2);
}

TEST(KvRowTest, Int8KeepsRopeTailInBf16AndBoundsError) {
  const KvRowFormat f = MlaRow(DType::kI8);
  Rng rng(11);
  std::vector<float> values(576);
  for (float& v : values) v = 3.0f * rng.NextSymmetric();
  std::vector<uint8_t> row(f.RowBytes());
  EncodeKvRow(f, values.data(), row.data());
  std::vector<float> decoded(576);
  DecodeKvRow(f, row.data(), decoded.data());
  for (int g = 0; g < 4; ++g) {
    float max_abs = 0;
    for (int i = g * 128; i < (g + 1) * 128; ++i)
      max_abs = std::max(max_abs, std::fabs(values[static_cast<size_t>(i)]));
    for (int i = g * 128; i < (g + 1) * 128; ++i) {
      EXPECT_LE(std::fabs(decoded[static_cast<size_t>(i)] - values[static_cast<size_t>(i)]),
                max_abs / 127.0f * 0.5f + 1e-6f);
    }
  }
  for (int i = 512; i < 576; ++i) {
    EXPECT_EQ(decoded[static_cast<size_t>(i)],
              BF16ToF32(F32ToBF16(values[static_cast<size_t>(i)])));
  }
}

// Decoding follows the byte layout of kv_row.h exactly, for a row whose quantisation groups run
// across K heads, RoPE tails and the V values: the row is written byte by byte here.
TEST(KvRowTest, Int8DecodeFollowsTheByteLayoutAcrossHeadsAndGroups) {
  const KvRowFormat f{.dtype = DType::kI8,
                      .n_head_kv = 2,
                      .head_dim_k = 48,
                      .head_dim_v = 40,
                      .rope_tail_dim = 16,
                      .quant_group = 32};
  const int n_quantized = 2 * 32 + 2 * 40;  // K bodies, then V
  ASSERT_EQ(f.QuantizedValues(), n_quantized);
  ASSERT_EQ(f.QuantGroups(), 5);  // 144 / 32, the last group partial
  std::vector<uint8_t> row(f.RowBytes());
  ASSERT_EQ(row.size(), static_cast<size_t>(n_quantized + 4 * 5 + 2 * 2 * 16));
  for (int i = 0; i < n_quantized; ++i) row[static_cast<size_t>(i)] = static_cast<uint8_t>(7 * i);
  const float scales[5] = {0.5f, -0.25f, 2.0f, 0.125f, 3.0f};
  std::memcpy(row.data() + n_quantized, scales, sizeof(scales));
  for (int i = 0; i < 2 * 16; ++i) {
    const uint16_t bits = F32ToBF16(static_cast<float>(i) - 10.5f);
    std::memcpy(row.data() + n_quantized + 20 + ptrdiff_t{2} * i, &bits, sizeof(bits));
  }
  std::vector<float> decoded(static_cast<size_t>(f.ValuesPerRow()), -999.0f);
  DecodeKvRow(f, row.data(), decoded.data());
  auto quantized = [&](int q) {
    return static_cast<float>(static_cast<int>(row[static_cast<size_t>(q)]) - 128) * scales[q / 32];
  };
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 32; ++i) EXPECT_EQ(decoded[h * 48 + i], quantized(h * 32 + i)) << h << i;
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(decoded[h * 48 + 32 + i], static_cast<float>(h * 16 + i) - 10.5f) << h << i;
    }
  }
  for (int i = 0; i < 80; ++i) EXPECT_EQ(decoded[96 + i], quantized(64 + i)) << i;
}

TEST(KvRowTest, FloatFormatsRoundTrip) {
  const KvRowFormat f32{.dtype = DType::kF32, .n_head_kv = 2, .head_dim_k = 4, .head_dim_v = 4};
  std::vector<float> values = {1, -2, 3.5f, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16}) {
    KvRowFormat f = f32;
    f.dtype = d;
    std::vector<uint8_t> row(f.RowBytes());
    EncodeKvRow(f, values.data(), row.data());
    std::vector<float> decoded(values.size());
    DecodeKvRow(f, row.data(), decoded.data());
    EXPECT_EQ(decoded, values);  // all exactly representable
  }
}

}  // namespace
}  // namespace mlarun
