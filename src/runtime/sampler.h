// Token sampling: greedy, temperature, top-k, top-p (nucleus), min-p, repetition / presence /
// frequency penalties, seeded.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.h"

namespace mlarun {

struct SamplerOptions {
  float temperature = 0.0f;         // <= 0: greedy (argmax)
  int top_k = 0;                    // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off; keeps tokens with p >= min_p * p_max
  float repetition_penalty = 1.0f;  // CTRL (Keskar et al. 2019): logit / p if > 0 else logit * p
  float presence_penalty = 0.0f;    // OpenAI: logit -= presence * [count > 0]
  float frequency_penalty = 0.0f;   // OpenAI: logit -= frequency * count
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplerOptions& options) : options_(options), rng_(options.seed) {}

  // Picks the next token from `logits` [vocab] (modified in place) given the tokens so far.
  // Throws Error if a logit is NaN or +inf (FirstBadLogit): no token would be a right answer.
  int32_t Sample(std::span<float> logits, std::span<const int32_t> history);

  const SamplerOptions& options() const { return options_; }

 private:
  SamplerOptions options_;
  Rng rng_;
};

// A sampled token's log-probability under the model (the log-softmax of the raw logits, before
// penalties and temperature, as vLLM reports by default) and the most likely tokens'.
struct TopLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};
struct TokenLogprobs {
  float logprob = 0.0f;
  std::vector<TopLogprob> top;  // most likely first (lowest id on ties)
};

// log p(token) and the top_n most likely tokens of `logits` [vocab] (finite or -inf; -inf gives
// a log-probability of -inf): x - max - log(sum exp(x - max)), the sum in double.
TokenLogprobs ComputeLogprobs(std::span<const float> logits, int32_t token, int top_n);

// Returns the index of the largest logit (lowest index on ties).
int32_t Argmax(std::span<const float> logits);

// The index of the first logit that is NaN or +inf (-inf, a masked token, is fine), or -1.
int64_t FirstBadLogit(std::span<const float> logits);

}  // namespace mlarun
