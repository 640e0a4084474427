// YaRN frequencies and softmax scale against values computed by hand from the formulas.
#include "model/layers/rope.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mlarun {
namespace {

TEST(RopeTest, YarnMscaleHandComputed) {
  EXPECT_EQ(YarnMscale(1.0, 0.707), 1.0);
  EXPECT_NEAR(YarnMscale(40.0, 0.707), 0.1 * 0.707 * std::log(40.0) + 1.0, 1e-15);
  EXPECT_NEAR(YarnMscale(40.0, 0.707), 1.26080, 1e-5);
}

TEST(RopeTest, DeepseekV2LiteScaleAndFrequencies) {
  ModelConfig c;
  c.qk_nope_head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.rope_theta = 10000;
  c.rope_scaling = RopeScaling{.factor = 40,
                               .original_max_position_embeddings = 4096,
                               .beta_fast = 32,
                               .beta_slow = 1,
                               .mscale = 0.707,
                               .mscale_all_dim = 0.707};
  // scale = mscale(40, 0.707)^2 / sqrt(192) = 1.2608040^2 / 13.856406 = 0.1147214
  EXPECT_NEAR(DeepseekSoftmaxScale(c), 0.1147214, 1e-6);
  const RopeTable t = MakeDeepseekRope(c);
  // corr(32) = 64 ln(4096 / (64 pi)) / (2 ln 1e4) = 10.47 -> low 10;
  // corr(1) = 64 ln(4096 / (2 pi)) / (2 ln 1e4) = 22.52 -> high 23.
  // i <= 10: pure extrapolation (theta^(-2i/64)); i >= 23: interpolation (/ 40).
  EXPECT_DOUBLE_EQ(t.inv_freq[0], 1.0);
  EXPECT_NEAR(t.inv_freq[10], std::pow(1e4, -20.0 / 64), 1e-15);
  EXPECT_NEAR(t.inv_freq[23], std::pow(1e4, -46.0 / 64) / 40, 1e-15);
  // i = 16: ramp = (16 - 10) / 13, mask = 1 - ramp.
  const double ramp = 6.0 / 13.0;
  const double extra = std::pow(1e4, -32.0 / 64);
  EXPECT_NEAR(t.inv_freq[16], extra / 40 * ramp + extra * (1 - ramp), 1e-15);
  EXPECT_DOUBLE_EQ(t.attn_factor, 1.0);  // mscale == mscale_all_dim
}

TEST(RopeTest, CosSinCarryAttnFactor) {
  ModelConfig c;
  c.qk_nope_head_dim = 4;
  c.qk_rope_head_dim = 4;
  c.rope_theta = 100;
  c.rope_scaling = RopeScaling{
      .factor = 4, .original_max_position_embeddings = 16, .mscale = 1.0, .mscale_all_dim = 0.5};
  const RopeTable t = MakeDeepseekRope(c);
  const double expected_factor = (0.1 * std::log(4.0) + 1) / (0.05 * std::log(4.0) + 1);
  EXPECT_NEAR(t.attn_factor, expected_factor, 1e-12);
  float cos[2], sin[2];
  t.CosSin(3, cos, sin);
  EXPECT_NEAR(cos[0], std::cos(3 * t.inv_freq[0]) * expected_factor, 1e-6);
  EXPECT_NEAR(sin[1], std::sin(3 * t.inv_freq[1]) * expected_factor, 1e-6);
}

}  // namespace
}  // namespace mlarun
