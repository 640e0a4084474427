// Rotary position embeddings: frequency tables (plain and YaRN) and the attention scale.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"  // RopeLayout
#include "model/config.h"

namespace mlarun {

struct RopeTable {
  std::vector<double> inv_freq;  // [rope_dim / 2]
  double attn_factor = 1.0;      // multiplies cos and sin (YaRN mscale ratio)
  RopeLayout layout = RopeLayout::kInterleaved;

  int n_pairs() const { return static_cast<int>(inv_freq.size()); }
  // Writes cos/sin [n_pairs] for position `pos` (angles in double precision).
  void CosSin(int64_t pos, float* cos, float* sin) const;
};

// YaRN's attention-temperature helper: 0.1 * m * ln(s) + 1 for s > 1, else 1
// (arXiv 2309.00071 eq. 22 as generalised by DeepSeek's yarn_get_mscale).
double YarnMscale(double scale, double mscale);

// The rotary table of a DeepSeek model (q_pe / k_pe), with YaRN when configured.
RopeTable MakeDeepseekRope(const ModelConfig& config);
// The rotary table of a Llama-family model (whole heads, rotate-half pairing).
RopeTable MakeLlamaRope(const ModelConfig& config);
// DeepSeek softmax scale: 1/sqrt(qk_nope + qk_rope), times mscale(factor, mscale_all_dim)^2.
float DeepseekSoftmaxScale(const ModelConfig& config);

}  // namespace mlarun
