// Cache row sizes and encodings.
#include "kernels/kv_row.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
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
  // int8: 512 values + 4 f32 scales + 64 int8 RoPE values + 2 f32 scales (one per half), under
  // the 656 bytes of FlashMLA's FP8 row (which keeps the RoPE values in bf16).
  const KvRowFormat i8 = MlaRow(DType::kI8);
  EXPECT_EQ(i8.RowBytes(), 600u);
  EXPECT_EQ(i8.TailOffset(), 528);
  EXPECT_EQ(i8.TailScaleOffset(), 592);
  EXPECT_EQ(i8.TailGroupValues(), 32);
  const KvRowFormat mha{
      .dtype = DType::kBF16, .n_head_kv = 16, .head_dim_k = 192, .head_dim_v = 128};
  EXPECT_EQ(mha.RowBytes(), 16u * (192 + 128) * 2);
  // Without a tail no tail scales: 2 * (64 + 64) int8 values and 2 scales of 128.
  const KvRowFormat gqa{.dtype = DType::kI8, .n_head_kv = 2, .head_dim_k = 64, .head_dim_v = 64};
  EXPECT_EQ(gqa.RowBytes(), 256u + 2 * 4);
  // An odd tail of 3: groups of 2 and 1, still two scales.
  const KvRowFormat odd{.dtype = DType::kI8,
                        .head_dim_k = 67,
                        .head_dim_v = 64,
                        .v_aliases_k = true,
                        .rope_tail_dim = 3};
  EXPECT_EQ(odd.TailGroupValues(), 2);
  EXPECT_EQ(odd.RowBytes(), 64u + 4 + 3 + 2 * 4);
}

TEST(KvRowTest, Int8QuantisesBodyGroupsAndRopeTailEachWithinHalfAStep) {
  const KvRowFormat f = MlaRow(DType::kI8);
  Rng rng(11);
  std::vector<float> values(576);
  for (float& v : values) v = 3.0f * rng.NextSymmetric();
  for (int i = 512; i < 576; ++i) values[static_cast<size_t>(i)] *= 0.01f;  // a smaller tail
  std::vector<uint8_t> row(f.RowBytes());
  EncodeKvRow(f, values.data(), row.data());
  std::vector<float> decoded(576);
  DecodeKvRow(f, row.data(), decoded.data());
  // Groups: the 4 body groups of 128, then the tail's two halves, each with its own scale
  // max|x| / 127.
  for (const auto& [begin, end] : {std::pair{0, 128}, std::pair{128, 256}, std::pair{256, 384},
                                   std::pair{384, 512}, std::pair{512, 544}, std::pair{544, 576}}) {
    float max_abs = 0;
    for (int i = begin; i < end; ++i)
      max_abs = std::max(max_abs, std::fabs(values[static_cast<size_t>(i)]));
    for (int i = begin; i < end; ++i) {
      EXPECT_LE(std::fabs(decoded[static_cast<size_t>(i)] - values[static_cast<size_t>(i)]),
                max_abs / 127.0f * 0.5f * 1.0001f)
          << i;
    }
  }
}

// Encoding a hand-computed row: the tail (2.54, -1 | 0.3, -0.1) is two groups of 2, with scales
// 2.54 / 127 = 0.02 and 0.3 / 127 and values 127, -50 | 127, -42.3, stored as the bytes 255, 78 |
// 255, 86 after the body's; the body group is encoded as without a tail.
TEST(KvRowTest, Int8EncodesTheTailAsGroupsOfItsOwnByHand) {
  const KvRowFormat f{.dtype = DType::kI8,
                      .n_head_kv = 1,
                      .head_dim_k = 12,
                      .head_dim_v = 8,
                      .v_aliases_k = true,
                      .rope_tail_dim = 4,
                      .quant_group = 8};
  const std::vector<float> values = {1.27f, -0.5f, 0, 0, 0, 0, 0, 0.01f, 2.54f, -1.0f, 0.3f, -0.1f};
  std::vector<uint8_t> row(f.RowBytes(), 0xee);
  ASSERT_EQ(row.size(), 8u + 4 + 4 + 2 * 4);
  EncodeKvRow(f, values.data(), row.data());
  // Body: scale 1.27 / 127 = 0.01: 127, -50, 0, ..., 1.
  const std::vector<uint8_t> body = {255, 78, 128, 128, 128, 128, 128, 129};
  EXPECT_EQ(std::vector<uint8_t>(row.begin(), row.begin() + 8), body);
  float scales[3];
  std::memcpy(&scales[0], row.data() + 8, sizeof(float));
  EXPECT_EQ(scales[0], 1.27f / 127.0f);
  const std::vector<uint8_t> tail = {255, 78, 255, 86};
  EXPECT_EQ(std::vector<uint8_t>(row.begin() + 12, row.begin() + 16), tail);
  std::memcpy(&scales[1], row.data() + 16, 2 * sizeof(float));
  EXPECT_EQ(scales[1], 2.54f / 127.0f);
  EXPECT_EQ(scales[2], 0.3f / 127.0f);
  std::vector<float> decoded(12);
  DecodeKvRow(f, row.data(), decoded.data());
  EXPECT_EQ(decoded[9], -50.0f * (2.54f / 127.0f));
  EXPECT_EQ(decoded[10], 127.0f * (0.3f / 127.0f));
  EXPECT_EQ(decoded[11], -42.0f * (0.3f / 127.0f));
}

// Decoding follows the byte layout of kv_row.h exactly, for a row whose quantisation groups run
// across K heads and the V values, with a RoPE tail of two groups per K head: the row is written
// byte by byte.
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
  // Body values, 5 group scales, 2 tails of 16 int8 values, 2 x 2 tail scales (groups of 8).
  ASSERT_EQ(row.size(), static_cast<size_t>(n_quantized + 4 * 5 + 2 * 16 + 4 * 4));
  ASSERT_EQ(f.TailOffset(), n_quantized + 20);
  ASSERT_EQ(f.TailScaleOffset(), n_quantized + 20 + 32);
  for (int i = 0; i < n_quantized; ++i) row[static_cast<size_t>(i)] = static_cast<uint8_t>(7 * i);
  const float scales[5] = {0.5f, -0.25f, 2.0f, 0.125f, 3.0f};
  std::memcpy(row.data() + n_quantized, scales, sizeof(scales));
  for (int i = 0; i < 2 * 16; ++i) row[static_cast<size_t>(n_quantized + 20 + i)] = 100 + 3 * i;
  const float tail_scales[4] = {0.75f, -4.0f, 1.5f, 0.0625f};  // head 0's two, then head 1's
  std::memcpy(row.data() + n_quantized + 20 + 32, tail_scales, sizeof(tail_scales));
  std::vector<float> decoded(static_cast<size_t>(f.ValuesPerRow()), -999.0f);
  DecodeKvRow(f, row.data(), decoded.data());
  auto quantized = [&](int q) {
    return static_cast<float>(static_cast<int>(row[static_cast<size_t>(q)]) - 128) * scales[q / 32];
  };
  for (int h = 0; h < 2; ++h) {
    for (int i = 0; i < 32; ++i) EXPECT_EQ(decoded[h * 48 + i], quantized(h * 32 + i)) << h << i;
    for (int i = 0; i < 16; ++i) {
      const int stored = 100 + 3 * (h * 16 + i);
      EXPECT_EQ(decoded[h * 48 + 32 + i],
                static_cast<float>(stored - 128) * tail_scales[2 * h + i / 8])
          << h << i;
    }
  }
  for (int i = 0; i < 80; ++i) EXPECT_EQ(decoded[96 + i], quantized(64 + i)) << i;
}

// Encode then decode then encode again gives the same bytes: the decoded values are exactly
// representable on the grid they were quantised to (each group's maximum maps to +-127).
TEST(KvRowTest, Int8ReencodingADecodedRowIsBitwiseStable) {
  const KvRowFormat f = MlaRow(DType::kI8);
  Rng rng(5);
  std::vector<float> values(576);
  for (float& v : values) v = 2.0f * rng.NextSymmetric();
  std::vector<uint8_t> row(f.RowBytes());
  EncodeKvRow(f, values.data(), row.data());
  std::vector<float> decoded(576);
  DecodeKvRow(f, row.data(), decoded.data());
  std::vector<uint8_t> again(f.RowBytes());
  EncodeKvRow(f, decoded.data(), again.data());
  for (size_t i = 0; i < row.size(); ++i) {
    if (i >= 512 && i < 528) continue;  // body scales: recomputed from a decoded maximum
    if (i >= 592) continue;             // the tail scales: likewise
    EXPECT_EQ(again[i], row[i]) << "byte " << i;
  }
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
