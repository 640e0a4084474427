// DeepSeekMoE feed-forward (DeepSeek-V2 arXiv 2405.04434 section 2.2; DeepSeek-V3 arXiv
// 2412.19437 section 2.1.2, auxiliary-loss-free balancing).
//
// Symbols (one token, E routed experts, k = num_experts_per_tok):
//   s = softmax(W_g x) or sigmoid(W_g x)                       [E]
//   choice = s + b (noaux_tc; b = e_score_correction_bias, selection only), else s
//   groups: E / n_group consecutive experts; group score = max(choice) (group_limited_greedy)
//           or sum of its top-2 choices (noaux_tc); keep topk_group groups
//   K = top-k of choice over kept experts;  g_i = s_i for i in K
//   V3: g /= sum g (norm_topk_prob); g *= routed_scaling_factor
//   V2: g /= sum g if norm_topk_prob else g *= routed_scaling_factor
//   y = sum_{i in K} g_i FFN_i(x) + sum_shared FFN_s(x)
#include "model/layers/moe.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/vec.h"
#include "model/layers/layer_context.h"
#include "model/weights.h"

namespace mlarun {

GateSpec GateSpec::FromConfig(const ModelConfig& c) {
  return {.scoring = c.scoring_func,
          .method = c.topk_method,
          .n_experts = c.n_routed_experts,
          .top_k = c.num_experts_per_tok,
          .n_group = c.n_group,
          .topk_group = c.topk_group,
          .norm_topk_prob = c.norm_topk_prob,
          .scale_after_norm = c.scale_after_norm,
          .routed_scaling_factor = c.routed_scaling_factor};
}

void SelectExperts(const GateSpec& spec, std::span<const float> router_logits,
                   std::span<const float> bias, int* expert_ids, float* expert_weights) {
  const int n = spec.n_experts;
  std::vector<float> scores(router_logits.begin(), router_logits.end());
  if (spec.scoring == ScoringFunc::kSoftmax) {
    Softmax(scores.data(), n);
  } else {
    for (float& s : scores) s = 1.0f / (1.0f + std::exp(-s));
  }
  std::vector<float> choice = scores;
  if (!bias.empty()) {
    for (int e = 0; e < n; ++e) choice[static_cast<size_t>(e)] += bias[static_cast<size_t>(e)];
  }
  if (spec.method != TopkMethod::kGreedy && spec.n_group > 1) {
    const int per_group = n / spec.n_group;
    std::vector<float> group_scores(static_cast<size_t>(spec.n_group));
    for (int g = 0; g < spec.n_group; ++g) {
      const auto begin = choice.begin() + g * per_group;
      if (spec.method == TopkMethod::kGroupLimitedGreedy) {
        group_scores[static_cast<size_t>(g)] = *std::max_element(begin, begin + per_group);
      } else {
        std::vector<float> members(begin, begin + per_group);
        std::partial_sort(members.begin(), members.begin() + std::min(2, per_group), members.end(),
                          std::greater<float>());
        group_scores[static_cast<size_t>(g)] = members[0] + (per_group > 1 ? members[1] : 0.0f);
      }
    }
    std::vector<int> kept(static_cast<size_t>(spec.topk_group));
    TopK(group_scores, spec.topk_group, kept.data());
    std::vector<bool> keep(static_cast<size_t>(spec.n_group), false);
    for (int g : kept) keep[static_cast<size_t>(g)] = true;
    for (int e = 0; e < n; ++e) {
      if (!keep[static_cast<size_t>(e / per_group)]) choice[static_cast<size_t>(e)] = -INFINITY;
    }
  }
  TopK(choice, spec.top_k, expert_ids);
  double sum = 0.0;
  for (int i = 0; i < spec.top_k; ++i) {
    expert_weights[i] = scores[static_cast<size_t>(expert_ids[i])];
    sum += expert_weights[i];
  }
  const bool normalise = spec.top_k > 1 && spec.norm_topk_prob;
  for (int i = 0; i < spec.top_k; ++i) {
    double weight = expert_weights[i];
    if (normalise) weight /= sum + 1e-20;
    if (!normalise || spec.scale_after_norm) weight *= spec.routed_scaling_factor;
    expert_weights[i] = static_cast<float>(weight);
  }
}

void DenseMlp(Exec& exec, const MlpWeights& w, const float* x, int64_t n_tokens, float* out) {
  const int64_t inter = w.gate_proj.rows;
  std::vector<float> gate(static_cast<size_t>(n_tokens * inter));
  std::vector<float> up(static_cast<size_t>(n_tokens * inter));
  MatMul(exec, w.gate_proj, x, n_tokens, gate.data());
  MatMul(exec, w.up_proj, x, n_tokens, up.data());
  SiluMul(gate.data(), up.data(), n_tokens * inter);
  MatMul(exec, w.down_proj, gate.data(), n_tokens, out);
}

void MoeFeedForward(const LayerContext& ctx, const MoeWeights& w, const float* x, float* out,
                    std::vector<int64_t>* expert_counts) {
  const ModelConfig& c = ctx.config;
  const int64_t n = ctx.n_tokens();
  const int64_t hidden = c.hidden_size;
  const GateSpec spec = GateSpec::FromConfig(c);
  const int k = spec.top_k;
  std::vector<float> logits(static_cast<size_t>(n * spec.n_experts));
  MatMul(ctx.exec, w.gate, x, n, logits.data());
  std::vector<int> ids(static_cast<size_t>(n * k));
  std::vector<float> weights(static_cast<size_t>(n * k));
  for (int64_t t = 0; t < n; ++t) {
    SelectExperts(spec, std::span<const float>(logits.data() + t * spec.n_experts, spec.n_experts),
                  std::span<const float>(w.e_score_correction_bias.values), ids.data() + t * k,
                  weights.data() + t * k);
  }
  // Tokens grouped by expert, so each expert's weights are read once for the whole batch.
  std::vector<std::vector<std::pair<int64_t, float>>> routed(static_cast<size_t>(spec.n_experts));
  for (int64_t t = 0; t < n; ++t) {
    for (int i = 0; i < k; ++i) {
      routed[static_cast<size_t>(ids[static_cast<size_t>(t * k + i)])].push_back(
          {t, weights[static_cast<size_t>(t * k + i)]});
    }
  }
  std::fill(out, out + n * hidden, 0.0f);
  std::vector<float> gathered;
  std::vector<float> expert_out;
  // Experts in ascending id order: each token's sum has a fixed order, whatever the batch.
  for (int e = 0; e < spec.n_experts; ++e) {
    const auto& tokens = routed[static_cast<size_t>(e)];
    if (expert_counts != nullptr)
      (*expert_counts)[static_cast<size_t>(e)] += static_cast<int64_t>(tokens.size());
    if (tokens.empty()) continue;
    const int64_t m = static_cast<int64_t>(tokens.size());
    gathered.resize(static_cast<size_t>(m * hidden));
    expert_out.resize(static_cast<size_t>(m * hidden));
    for (int64_t i = 0; i < m; ++i) {
      std::copy_n(x + tokens[static_cast<size_t>(i)].first * hidden, hidden,
                  gathered.data() + i * hidden);
    }
    DenseMlp(ctx.exec, w.experts[static_cast<size_t>(e)], gathered.data(), m, expert_out.data());
    for (int64_t i = 0; i < m; ++i) {
      Axpy(tokens[static_cast<size_t>(i)].second, expert_out.data() + i * hidden,
           out + tokens[static_cast<size_t>(i)].first * hidden, hidden);
    }
  }
  if (!w.shared.gate_proj.empty()) {
    std::vector<float> shared(static_cast<size_t>(n * hidden));
    DenseMlp(ctx.exec, w.shared, x, n, shared.data());
    for (int64_t i = 0; i < n * hidden; ++i) out[i] += shared[static_cast<size_t>(i)];
  }
}

}  // namespace mlarun
