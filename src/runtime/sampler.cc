// Sampling pipeline: penalties -> greedy or (temperature -> top-k -> softmax -> top-p -> min-p ->
// draw). Candidates are sorted by logit with index tie-breaks, so a seed fixes the result.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <vector>

namespace mlarun {

int32_t Argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t Sampler::Sample(std::span<float> logits, std::span<const int32_t> history) {
  const SamplerOptions& o = options_;
  if (o.repetition_penalty != 1.0f || o.presence_penalty != 0.0f || o.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : history) {
      if (t >= 0 && static_cast<size_t>(t) < logits.size()) ++counts[t];
    }
    for (const auto& [token, count] : counts) {
      float& l = logits[static_cast<size_t>(token)];
      if (o.repetition_penalty != 1.0f)
        l = l > 0 ? l / o.repetition_penalty : l * o.repetition_penalty;
      l -= o.presence_penalty + o.frequency_penalty * static_cast<float>(count);
    }
  }
  if (o.temperature <= 0.0f) return Argmax(logits);

  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    if (logits[static_cast<size_t>(a)] != logits[static_cast<size_t>(b)]) {
      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
    }
    return a < b;
  };
  size_t n = order.size();
  if (o.top_k > 0 && static_cast<size_t>(o.top_k) < n) {
    std::partial_sort(order.begin(), order.begin() + o.top_k, order.end(), by_logit);
    n = static_cast<size_t>(o.top_k);
  } else {
    std::sort(order.begin(), order.end(), by_logit);
  }
  // Softmax over the candidates at temperature T (double for stable sums).
  std::vector<double> probs(n);
  const double max_logit = logits[static_cast<size_t>(order[0])];
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    probs[i] = std::exp((logits[static_cast<size_t>(order[i])] - max_logit) / o.temperature);
    sum += probs[i];
  }
  for (double& p : probs) p /= sum;
  if (o.top_p < 1.0f) {
    double cumulative = 0.0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      cumulative += probs[i];
      if (cumulative >= o.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  if (o.min_p > 0.0f) {
    const double threshold = o.min_p * probs[0];
    size_t keep = 1;
    while (keep < n && probs[keep] >= threshold) ++keep;
    n = keep;
  }
  double kept = 0.0;
  for (size_t i = 0; i < n; ++i) kept += probs[i];
  const double draw = static_cast<double>(rng_.NextU64() >> 11) * (1.0 / 9007199254740992.0) * kept;
  double cumulative = 0.0;
  for (size_t i = 0; i < n; ++i) {
    cumulative += probs[i];
    if (draw < cumulative) return order[i];
  }
  return order[n - 1];
}

}  // namespace mlarun
