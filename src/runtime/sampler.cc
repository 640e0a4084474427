// Sampling pipeline: penalties -> greedy or (temperature -> top-k -> softmax -> top-p -> min-p ->
// draw). Candidates are sorted by logit with index tie-breaks, so a seed fixes the result.
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace mlarun {

int32_t Argmax(std::span<const float> logits) {
  // 16 lanes in 4 vectors of 4 (GCC vector extensions: SSE2 code in the portable build, no
  // dispatch), each lane keeping the first index of its largest value (strict >) by compare and
  // select; then the lanes are merged, lowest index on ties. std::max_element compares and
  // branches per element: ~70 us for a 102,400-entry vocabulary, on the calling thread of every
  // decode step while the other threads wait.
  using Floats = float __attribute__((vector_size(16)));
  using Ints = int32_t __attribute__((vector_size(16)));
  constexpr int64_t kVectors = 4;
  constexpr int64_t kLanes = kVectors * 4;
  const auto n = static_cast<int64_t>(logits.size());
  if (n == 0) return 0;
  const float* x = logits.data();
  const float lowest = -std::numeric_limits<float>::infinity();
  Floats best[kVectors];
  Ints best_index[kVectors];
  for (int64_t k = 0; k < kVectors; ++k) {
    best[k] = Floats{lowest, lowest, lowest, lowest};
    best_index[k] = Ints{0, 0, 0, 0};
  }
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t k = 0; k < kVectors; ++k) {
      Floats v;
      std::memcpy(&v, x + i + 4 * k, sizeof(v));
      const Ints larger = v > best[k];
      const auto first = static_cast<int32_t>(i + 4 * k);
      best[k] = larger ? v : best[k];
      best_index[k] = larger ? Ints{first, first + 1, first + 2, first + 3} : best_index[k];
    }
  }
  // Lanes that saw nothing above -inf hold index 0, which is never after the true answer.
  float max_value = x[0];
  int64_t max_index = 0;
  for (int64_t k = 0; k < kVectors; ++k) {
    for (int j = 0; j < 4; ++j) {
      if (best[k][j] > max_value || (best[k][j] == max_value && best_index[k][j] < max_index)) {
        max_value = best[k][j];
        max_index = best_index[k][j];
      }
    }
  }
  for (; i < n; ++i) {
    if (x[i] > max_value) {
      max_value = x[i];
      max_index = i;
    }
  }
  return static_cast<int32_t>(max_index);
}

TokenLogprobs ComputeLogprobs(std::span<const float> logits, int32_t token, int top_n) {
  TokenLogprobs out;
  if (logits.empty()) return out;
  const float max_logit = logits[static_cast<size_t>(Argmax(logits))];
  double sum = 0.0;
  for (const float x : logits) sum += std::exp(static_cast<double>(x) - max_logit);
  // log-softmax: x - (max + log sum exp(x - max)).
  // All -inf (every token masked): no distribution; every log-probability is -inf.
  const double log_z = std::isinf(max_logit) ? std::numeric_limits<double>::infinity()
                                             : static_cast<double>(max_logit) + std::log(sum);
  auto logprob = [&](size_t i) { return static_cast<float>(logits[i] - log_z); };
  out.logprob = logprob(static_cast<size_t>(token));
  const size_t n = std::min(logits.size(), static_cast<size_t>(std::max(top_n, 0)));
  if (n == 0) return out;  // no ranking over the vocabulary to do
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [&](int32_t a, int32_t b) {
                      const float la = logits[static_cast<size_t>(a)];
                      const float lb = logits[static_cast<size_t>(b)];
                      return la != lb ? la > lb : a < b;
                    });
  out.top.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.top.push_back({.token = order[i], .logprob = logprob(static_cast<size_t>(order[i]))});
  }
  return out;
}

int64_t FirstBadLogit(std::span<const float> logits) {
  // Branch-free over the bits first (vectorised), then a search only where one was seen: NaN
  // has magnitude bits above 0x7f800000, +inf is exactly 0x7f800000 (-inf 0xff800000 is not).
  constexpr uint32_t kInf = 0x7f800000u;
  uint32_t any = 0;
  for (const float x : logits) {
    uint32_t bits = 0;
    std::memcpy(&bits, &x, sizeof(bits));
    any |= static_cast<uint32_t>((bits & 0x7fffffffu) > kInf) | static_cast<uint32_t>(bits == kInf);
  }
  if (any == 0) return -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isnan(logits[i]) || logits[i] == std::numeric_limits<float>::infinity()) {
      return static_cast<int64_t>(i);
    }
  }
  return -1;
}

int32_t Sampler::Sample(std::span<float> logits, std::span<const int32_t> history) {
  if (const int64_t bad = FirstBadLogit(logits); bad >= 0) {
    std::string message = "the model's logits hold ";
    message.append(std::isnan(logits[static_cast<size_t>(bad)]) ? "NaN" : "+inf")
        .append(" (token ")
        .append(std::to_string(bad))
        .append("): a weight or an activation is not finite (`--load copy` checks the weights)");
    throw Error(message);
  }
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
