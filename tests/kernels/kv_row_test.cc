// Cache row sizes and encodings.
#include "kernels/kv_row.h"

#include <gtest/gtest.h>

#include <cmath>
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
