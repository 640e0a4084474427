// Row-wise kernels on hand-computed cases.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace mlarun {
namespace {

TEST(OpsTest, RmsNormHandComputed) {
  const float x[] = {3, 4};
  const float w[] = {1, 2};
  float out[2];
  RmsNorm(x, w, 2, 0.0f, out);  // rms = sqrt(12.5)
  EXPECT_NEAR(out[0], 3 / std::sqrt(12.5f), 1e-6);
  EXPECT_NEAR(out[1], 8 / std::sqrt(12.5f), 1e-6);
}

TEST(OpsTest, RopePairLayouts) {
  // Rotation by 90 degrees: (a, b) -> (-b, a).
  const float cos[] = {0, 1};
  const float sin[] = {1, 0};
  float interleaved[] = {1, 2, 3, 4};
  ApplyRope(interleaved, cos, sin, 2, RopeLayout::kInterleaved);
  EXPECT_EQ(std::vector<float>(interleaved, interleaved + 4), (std::vector<float>{-2, 1, 3, 4}));
  float halves[] = {1, 2, 3, 4};  // pairs (1,3) and (2,4)
  ApplyRope(halves, cos, sin, 2, RopeLayout::kHalves);
  EXPECT_EQ(std::vector<float>(halves, halves + 4), (std::vector<float>{-3, 2, 1, 4}));
}

TEST(OpsTest, SoftmaxAndSiluMul) {
  float x[] = {0, std::log(3.0f)};
  Softmax(x, 2);
  EXPECT_NEAR(x[0], 0.25, 1e-7);
  EXPECT_NEAR(x[1], 0.75, 1e-7);
  float gate[] = {0, 2};
  const float up[] = {5, 3};
  SiluMul(gate, up, 2);
  EXPECT_EQ(gate[0], 0);
  EXPECT_NEAR(gate[1], 2 / (1 + std::exp(-2.0f)) * 3, 1e-6);
}

TEST(OpsTest, TopKOrdersByScoreThenIndex) {
  const std::vector<float> s = {0.5f, 0.9f, 0.5f, -INFINITY, 0.7f};
  int out[3];
  TopK(s, 3, out);
  EXPECT_EQ(std::vector<int>(out, out + 3), (std::vector<int>{1, 4, 0}));
}

}  // namespace
}  // namespace mlarun
