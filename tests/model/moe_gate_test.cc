// Gate variants on hand-computed scores, with the softmax and top-k of every kernel table this
// CPU supports (the scalar references and the SIMD versions).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "kernels/kernel_table.h"
#include "model/layers/moe.h"

namespace mlarun {
namespace {

class MoeGateTest : public ::testing::TestWithParam<Isa> {
 protected:
  const KernelTable& kernels() const { return GetKernelTable(GetParam()); }
};

std::vector<float> Logit(const std::vector<float>& p) {  // inverse sigmoid
  std::vector<float> out;
  for (float v : p) out.push_back(std::log(v / (1 - v)));
  return out;
}

TEST_P(MoeGateTest, SoftmaxGreedyScalesWithoutRenormalising) {
  // Softmax of log(1..4) = [0.1, 0.2, 0.3, 0.4]; top-2 = experts 3, 2, weights * 2.
  const GateSpec spec{.scoring = ScoringFunc::kSoftmax,
                      .method = TopkMethod::kGreedy,
                      .n_experts = 4,
                      .top_k = 2,
                      .routed_scaling_factor = 2.0};
  const std::vector<float> logits = {0, std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  int ids[2];
  float w[2];
  SelectExperts(kernels(), spec, logits, {}, ids, w);
  EXPECT_EQ(ids[0], 3);
  EXPECT_EQ(ids[1], 2);
  EXPECT_NEAR(w[0], 0.8, 1e-6);
  EXPECT_NEAR(w[1], 0.6, 1e-6);
}

TEST_P(MoeGateTest, V2RenormalisesInsteadOfScaling) {
  const GateSpec spec{.scoring = ScoringFunc::kSoftmax,
                      .method = TopkMethod::kGreedy,
                      .n_experts = 4,
                      .top_k = 2,
                      .norm_topk_prob = true,
                      .scale_after_norm = false,
                      .routed_scaling_factor = 16.0};
  const std::vector<float> logits = {0, std::log(2.0f), std::log(3.0f), std::log(4.0f)};
  int ids[2];
  float w[2];
  SelectExperts(kernels(), spec, logits, {}, ids, w);
  EXPECT_NEAR(w[0], 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(w[1], 0.3 / 0.7, 1e-6);
}

TEST_P(MoeGateTest, GroupLimitedGreedyDropsWholeGroups) {
  // Groups {0,1}, {2,3}, {4,5}; group max = 0.30, 0.25, 0.20 (softmax of the given probs is
  // monotone, so compare via logits of a softmax: use log-probabilities).
  const std::vector<float> p = {0.30f, 0.01f, 0.25f, 0.24f, 0.20f, 0.0f};
  std::vector<float> logits;
  for (float v : p) logits.push_back(v > 0 ? std::log(v) : -30.0f);
  const GateSpec spec{.scoring = ScoringFunc::kSoftmax,
                      .method = TopkMethod::kGroupLimitedGreedy,
                      .n_experts = 6,
                      .top_k = 3,
                      .n_group = 3,
                      .topk_group = 2};
  int ids[3];
  float w[3];
  SelectExperts(kernels(), spec, logits, {}, ids, w);
  // Group 2 is dropped; the best three of {0, 1, 2, 3} are 0, 2, 3 (not expert 4 at 0.20).
  EXPECT_EQ(std::vector<int>(ids, ids + 3), (std::vector<int>{0, 2, 3}));
  EXPECT_NEAR(w[0], 0.30, 1e-5);
}

TEST_P(MoeGateTest, NoauxTcUsesBiasForSelectionOnly) {
  // Sigmoid scores s, bias b; choice = s + b. Groups of 2: {0,1}, {2,3}, {4,5}, {6,7}.
  const std::vector<float> s = {0.9f, 0.1f, 0.5f, 0.5f, 0.6f, 0.6f, 0.2f, 0.3f};
  const std::vector<float> b = {-0.8f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.5f, 0.5f};
  // choice = [0.1, 0.1, 0.5, 0.5, 0.6, 0.6, 0.7, 0.8]; group score = sum of top-2:
  // [0.2, 1.0, 1.2, 1.5] -> keep groups 3 and 2; top-2 by choice: experts 7 (0.8), 6 (0.7).
  const GateSpec spec{.scoring = ScoringFunc::kSigmoid,
                      .method = TopkMethod::kNoauxTc,
                      .n_experts = 8,
                      .top_k = 2,
                      .n_group = 4,
                      .topk_group = 2,
                      .norm_topk_prob = true,
                      .scale_after_norm = true,
                      .routed_scaling_factor = 2.5};
  int ids[2];
  float w[2];
  SelectExperts(kernels(), spec, Logit(s), b, ids, w);
  EXPECT_EQ(ids[0], 7);
  EXPECT_EQ(ids[1], 6);
  // Weights from unbiased scores 0.3, 0.2: normalised 0.6, 0.4, then * 2.5.
  EXPECT_NEAR(w[0], 1.5, 1e-5);
  EXPECT_NEAR(w[1], 1.0, 1e-5);
}

TEST_P(MoeGateTest, NanLogitsAreChosenLast) {
  // A NaN logit gives a NaN sigmoid score: the three numbers go first, by score.
  const GateSpec spec{
      .scoring = ScoringFunc::kSigmoid, .method = TopkMethod::kGreedy, .n_experts = 4, .top_k = 4};
  const std::vector<float> logits = {NAN, 1.0f, 3.0f, 2.0f};
  int ids[4];
  float w[4];
  SelectExperts(kernels(), spec, logits, {}, ids, w);
  EXPECT_EQ(std::vector<int>(ids, ids + 4), (std::vector<int>{2, 3, 1, 0}));
}

INSTANTIATE_TEST_SUITE_P(SupportedIsas, MoeGateTest, ::testing::ValuesIn(SupportedIsas()),
                         [](const ::testing::TestParamInfo<Isa>& info) {
                           std::string name(IsaName(info.param));
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace mlarun
