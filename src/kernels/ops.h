// Elementwise and row-wise kernels: RMSNorm, SwiGLU activation, softmax, RoPE rotation, top-k.
#pragma once

#include <cstdint>
#include <span>

namespace mlarun {

// out = x / sqrt(mean(x^2) + eps) * weight, for one row of `n` values (out may alias x).
// Zhang & Sennrich 2019, "Root Mean Square Layer Normalization".
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);

// gate[i] = silu(gate[i]) * up[i], silu(x) = x / (1 + exp(-x)) (Shazeer 2020, SwiGLU).
void SiluMul(float* gate, const float* up, int64_t n);

// In-place softmax of `n` values (max-subtracted).
void Softmax(float* x, int64_t n);

// How a head's rotary dimensions are paired.
enum class RopeLayout {
  kInterleaved,  // pairs (2i, 2i+1): DeepSeek's q_pe / k_pe as published
  kHalves,       // pairs (i, i + d/2): HF Llama "rotate_half"
};

// Rotates the `2 * n_pairs` values of `x` in place: pair i by (cos[i], sin[i]).
void ApplyRope(float* x, const float* cos, const float* sin, int n_pairs, RopeLayout layout);

// One token's rotation: pair i turns by (cos[i], sin[i]) for i < n_pairs.
struct RopeAngles {
  const float* cos = nullptr;  // [n_pairs]
  const float* sin = nullptr;  // [n_pairs]
  int n_pairs = 0;
  RopeLayout layout = RopeLayout::kInterleaved;
};

// ApplyRope on each of n_heads heads, head h at x + h * head_stride.
void ApplyRopeHeads(float* x, int n_heads, int64_t head_stride, const RopeAngles& angles);

// Writes the indices of the `k` largest values of `scores` to `out` in descending order of score
// (ties, -0 and +0 included: lower index first). Entries equal to -inf are never chosen before
// finite ones, and NaN entries only after every number (among themselves by index).
void TopK(std::span<const float> scores, int k, int* out);

}  // namespace mlarun
