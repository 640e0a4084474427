// Sampling on hand-built logits.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace mlarun {
namespace {

std::set<int32_t> Draws(const SamplerOptions& o, const std::vector<float>& logits, int n = 2000) {
  Sampler sampler(o);
  std::set<int32_t> seen;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = logits;
    seen.insert(sampler.Sample(l, {}));
  }
  return seen;
}

const std::vector<float> kLogits = {std::log(0.05f), std::log(0.4f), std::log(0.1f), std::log(0.3f),
                                    std::log(0.15f)};

// NaN or +inf logits have no right answer: Sample refuses them naming the first; -inf (a masked
// token) is a normal logit.
TEST(SamplerTest, NanOrPlusInfLogitsAreAnErrorMinusInfIsNot) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> masked = {0.5f, -inf, 2.0f, -inf};
  EXPECT_EQ(FirstBadLogit(masked), -1);
  Sampler greedy(SamplerOptions{});
  EXPECT_EQ(greedy.Sample(masked, {}), 2);
  for (const float bad : {std::nanf(""), inf}) {
    std::vector<float> l(37, 0.25f);
    l[20] = bad;
    l[30] = std::nanf("");
    EXPECT_EQ(FirstBadLogit(l), 20);
    for (const float temperature : {0.0f, 0.8f}) {
      Sampler sampler(SamplerOptions{.temperature = temperature});
      try {
        sampler.Sample(l, {});
        ADD_FAILURE() << "no error";
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()),
                  std::string("the model's logits hold ") + (std::isnan(bad) ? "NaN" : "+inf") +
                      " (token 20): a weight or an activation is not finite (`--load copy` "
                      "checks the weights)");
      }
    }
  }
}

// kLogits are the logs of a distribution (0.05, 0.4, 0.1, 0.3, 0.15): the log-probabilities are
// those logs, whatever constant is added to every logit.
TEST(SamplerTest, LogprobsAreTheLogSoftmaxWithTheTopTokensInOrder) {
  for (const float shift : {0.0f, 100.0f, -50.0f}) {
    std::vector<float> logits = kLogits;
    for (float& x : logits) x += shift;
    const TokenLogprobs lp = ComputeLogprobs(logits, 2, 3);
    EXPECT_NEAR(lp.logprob, std::log(0.1), 1e-5) << shift;
    ASSERT_EQ(lp.top.size(), 3u);
    const int32_t tokens[3] = {1, 3, 4};
    const double probs[3] = {0.4, 0.3, 0.15};
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(lp.top[static_cast<size_t>(i)].token, tokens[i]);
      EXPECT_NEAR(lp.top[static_cast<size_t>(i)].logprob, std::log(probs[i]), 1e-5) << shift;
    }
  }
  EXPECT_TRUE(ComputeLogprobs(kLogits, 0, 0).top.empty());
  EXPECT_EQ(ComputeLogprobs(kLogits, 0, 99).top.size(), kLogits.size());  // at most the vocab
  // Ties: the lower id first. A masked token (-inf) has log-probability -inf.
  const float inf = std::numeric_limits<float>::infinity();
  const TokenLogprobs ties = ComputeLogprobs(std::vector<float>{1, 1, -inf, 1, 1}, 2, 2);
  EXPECT_EQ(ties.logprob, -inf);
  ASSERT_EQ(ties.top.size(), 2u);
  EXPECT_EQ(ties.top[0].token, 0);
  EXPECT_EQ(ties.top[1].token, 1);
  EXPECT_NEAR(ties.top[0].logprob, std::log(0.25), 1e-6);
  // Every token masked: no distribution, -inf throughout (never NaN).
  EXPECT_EQ(ComputeLogprobs(std::vector<float>{-inf, -inf}, 1, 1).logprob, -inf);
}

TEST(SamplerTest, GreedyIsArgmax) {
  std::vector<float> l = kLogits;
  EXPECT_EQ(Sampler({}).Sample(l, {}), 1);
}

// Argmax (16 lanes merged at the end) against std::max_element, which returns the first of
// equal maxima: lengths around the lane count, values from a small set so ties are common, the
// maximum in the tail or at index 0, and -inf everywhere.
TEST(SamplerTest, ArgmaxIsTheFirstLargestForAnyLength) {
  Rng rng(11);
  for (size_t n : {1, 2, 15, 16, 17, 31, 32, 33, 100, 1000, 102400}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(n);
      for (float& v : x) v = static_cast<float>(rng.NextU64() % 7) - 3.0f;
      if (trial == 1) x.back() = 10.0f;
      if (trial == 2) x.front() = 10.0f;
      if (trial == 3) std::fill(x.begin(), x.end(), -std::numeric_limits<float>::infinity());
      const auto expected = std::max_element(x.begin(), x.end()) - x.begin();
      ASSERT_EQ(Argmax(x), expected) << "n " << n << " trial " << trial;
    }
  }
}

TEST(SamplerTest, TopKRestrictsToTheKBest) {
  EXPECT_EQ(Draws({.temperature = 1.0f, .top_k = 2, .seed = 1}, kLogits),
            (std::set<int32_t>{1, 3}));
}

TEST(SamplerTest, TopPKeepsTheSmallestNucleus) {
  // Sorted: 0.4 (1), 0.3 (3), 0.15 (4), 0.1 (2), 0.05 (0); cumulative 0.4, 0.7, 0.85.
  EXPECT_EQ(Draws({.temperature = 1.0f, .top_p = 0.8f, .seed = 2}, kLogits),
            (std::set<int32_t>{1, 3, 4}));
  EXPECT_EQ(Draws({.temperature = 1.0f, .top_p = 0.7f, .seed = 2}, kLogits),
            (std::set<int32_t>{1, 3}));
}

TEST(SamplerTest, MinPDropsUnlikelyTokens) {
  // p >= 0.5 * 0.4 = 0.2: tokens 1 and 3.
  EXPECT_EQ(Draws({.temperature = 1.0f, .min_p = 0.5f, .seed = 3}, kLogits),
            (std::set<int32_t>{1, 3}));
}

TEST(SamplerTest, SameSeedSameSequence) {
  Sampler a({.temperature = 1.0f, .seed = 42});
  Sampler b({.temperature = 1.0f, .seed = 42});
  Sampler c({.temperature = 1.0f, .seed = 43});
  std::vector<int32_t> sa, sb, sc;
  for (int i = 0; i < 50; ++i) {
    std::vector<float> l1 = kLogits, l2 = kLogits, l3 = kLogits;
    sa.push_back(a.Sample(l1, {}));
    sb.push_back(b.Sample(l2, {}));
    sc.push_back(c.Sample(l3, {}));
  }
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
}

TEST(SamplerTest, PenaltiesDemoteSeenTokens) {
  std::vector<float> l = kLogits;
  const std::vector<int32_t> history = {1, 1};
  // Presence 1 + frequency 2 * 1.0: token 1's logit drops by 3 -> token 3 wins.
  EXPECT_EQ(Sampler({.presence_penalty = 1.0f, .frequency_penalty = 1.0f}).Sample(l, history), 3);
  std::vector<float> positive = {2.0f, 1.5f};
  EXPECT_EQ(Sampler({.repetition_penalty = 2.0f}).Sample(positive, std::vector<int32_t>{0}), 1);
}

}  // namespace
}  // namespace mlarun
