// RoPE (Su et al. 2021, arXiv 2104.09864) and YaRN (Peng et al. 2023, arXiv 2309.00071) as
// configured in DeepSeek-V2/V3 (modeling_deepseek.py, DeepseekV2YarnRotaryEmbedding).
//
// Symbols: d = rope_dim, theta = rope_theta, s = factor, L = original_max_position_embeddings.
//   extra[i] = theta^(-2i/d)             inter[i] = extra[i] / s
//   corr(r)  = d * ln(L / (2 pi r)) / (2 ln theta)
//   low = max(floor(corr(beta_fast)), 0), high = min(ceil(corr(beta_slow)), d - 1)
//   ramp[i]  = clamp((i - low) / (high - low), 0, 1);  mask = 1 - ramp
//   inv_freq = inter * (1 - mask) + extra * mask
//   cos, sin *= mscale(s, mscale) / mscale(s, mscale_all_dim)
#include "model/layers/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace mlarun {

void RopeTable::CosSin(int64_t pos, float* cos, float* sin) const {
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double angle = static_cast<double>(pos) * inv_freq[i];
    cos[i] = static_cast<float>(std::cos(angle) * attn_factor);
    sin[i] = static_cast<float>(std::sin(angle) * attn_factor);
  }
}

double YarnMscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

namespace {

std::vector<double> PlainInvFreq(int rope_dim, double theta) {
  std::vector<double> inv_freq(static_cast<size_t>(rope_dim / 2));
  for (int i = 0; i < rope_dim / 2; ++i) {
    inv_freq[static_cast<size_t>(i)] = 1.0 / std::pow(theta, 2.0 * i / rope_dim);
  }
  return inv_freq;
}

double CorrectionDim(double n_rotations, int dim, double theta, double max_positions) {
  return dim * std::log(max_positions / (n_rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(theta));
}

}  // namespace

RopeTable MakeDeepseekRope(const ModelConfig& config) {
  RopeTable table;
  table.layout = RopeLayout::kInterleaved;
  const int d = config.qk_rope_head_dim;
  table.inv_freq = PlainInvFreq(d, config.rope_theta);
  if (!config.rope_scaling) return table;
  const RopeScaling& rs = *config.rope_scaling;
  const double max_positions = static_cast<double>(rs.original_max_position_embeddings);
  const double low =
      std::max(std::floor(CorrectionDim(rs.beta_fast, d, config.rope_theta, max_positions)), 0.0);
  double high =
      std::min(std::ceil(CorrectionDim(rs.beta_slow, d, config.rope_theta, max_positions)),
               static_cast<double>(d - 1));
  if (low == high) high += 0.001;  // avoid a zero-width ramp
  for (int i = 0; i < d / 2; ++i) {
    const double extra = table.inv_freq[static_cast<size_t>(i)];
    const double inter = extra / rs.factor;
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double mask = 1.0 - ramp;
    table.inv_freq[static_cast<size_t>(i)] = inter * (1.0 - mask) + extra * mask;
  }
  table.attn_factor = YarnMscale(rs.factor, rs.mscale) / YarnMscale(rs.factor, rs.mscale_all_dim);
  return table;
}

RopeTable MakeLlamaRope(const ModelConfig& config) {
  RopeTable table;
  table.layout = RopeLayout::kHalves;
  table.inv_freq = PlainInvFreq(config.head_dim, config.rope_theta);
  return table;
}

float DeepseekSoftmaxScale(const ModelConfig& config) {
  double scale = 1.0 / std::sqrt(static_cast<double>(config.QkHeadDim()));
  if (config.rope_scaling && config.rope_scaling->mscale_all_dim != 0.0) {
    const double m = YarnMscale(config.rope_scaling->factor, config.rope_scaling->mscale_all_dim);
    scale *= m * m;
  }
  return static_cast<float>(scale);
}

}  // namespace mlarun
