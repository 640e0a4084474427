// Portable implementations of the row-wise kernels.
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace mlarun {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  const float inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv_rms * weight[i];
}

void SiluMul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void Softmax(float* x, int64_t n) {
  float max_value = -INFINITY;
  for (int64_t i = 0; i < n; ++i) max_value = std::max(max_value, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max_value);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void ApplyRope(float* x, const float* cos, const float* sin, int n_pairs, RopeLayout layout) {
  for (int i = 0; i < n_pairs; ++i) {
    const int ia = layout == RopeLayout::kInterleaved ? 2 * i : i;
    const int ib = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + n_pairs;
    const float a = x[ia];
    const float b = x[ib];
    x[ia] = a * cos[i] - b * sin[i];
    x[ib] = a * sin[i] + b * cos[i];
  }
}

void ApplyRopeHeads(float* x, int n_heads, int64_t head_stride, const RopeAngles& angles) {
  for (int h = 0; h < n_heads; ++h) {
    ApplyRope(x + h * head_stride, angles.cos, angles.sin, angles.n_pairs, angles.layout);
  }
}

void TopK(std::span<const float> scores, int k, int* out) {
  const int n = static_cast<int>(scores.size());
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // A strict weak order: numbers by value, descending, then NaNs; equal keys by index.
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int a, int b) {
    const float sa = scores[a];
    const float sb = scores[b];
    const bool nan_a = std::isnan(sa);
    const bool nan_b = std::isnan(sb);
    if (nan_a != nan_b) return nan_b;
    if (!nan_a && sa != sb) return sa > sb;
    return a < b;
  });
  std::copy(order.begin(), order.begin() + k, out);
}

}  // namespace mlarun
