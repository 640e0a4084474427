// DeepSeekMoE routing: router scores, (group-limited) top-k selection and expert weights.
#pragma once

#include <span>

#include "model/config.h"

namespace mlarun {

struct KernelTable;

// The gate's policy as data, from the config.
struct GateSpec {
  ScoringFunc scoring = ScoringFunc::kSoftmax;
  TopkMethod method = TopkMethod::kGreedy;
  int n_experts = 0;
  int top_k = 0;
  int n_group = 1;
  int topk_group = 1;
  bool norm_topk_prob = false;
  bool scale_after_norm = false;  // V3: renormalise, then scale; V2: one or the other
  double routed_scaling_factor = 1.0;

  static GateSpec FromConfig(const ModelConfig& config);
};

// Selects `spec.top_k` experts for one token from router logits [n_experts]. `bias`
// [n_experts] (may be empty) shifts selection only (noaux_tc). Writes expert ids and weights
// [top_k], ordered by descending selection score. The softmax and top-k are `kernels`'s.
void SelectExperts(const KernelTable& kernels, const GateSpec& spec,
                   std::span<const float> router_logits, std::span<const float> bias,
                   int* expert_ids, float* expert_weights);

}  // namespace mlarun
