// The row-wise kernels of ops.h (RMSNorm, RoPE, softmax, top-k) over a vector-traits type `V`,
// included by simd_impl.h into each ISA's namespace after ExpShiftSum and Scale.
//
// Symbols (one row of n values):
//   x [n]                     the row; w [n] the RMSNorm weight
//   inv_rms = 1 / sqrt(sum_i x_i^2 / n + eps)   (Zhang & Sennrich 2019)
//   RoPE pair (a, b), angle (cos, sin): (a cos - b sin, a sin + b cos)   (Su et al. 2021)
//   kW = V::kWidth float lanes per vector
// Traits used beyond simd_impl.h's: V::SumSquaresF64 (sum of x_i^2 in double), V::LoadPairDup
// (kW / 2 floats, each twice), V::SwapPairs (lanes 2l and 2l + 1 exchanged), V::EqualBits (lane
// mask of a == b).
// V::Max(a, b) is the x86 max: b where a is NaN, which TopKV relies on to skip NaN entries.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/ops.h"

namespace mlarun::SIMD_NAMESPACE {

// out = x * inv_rms * w: the reference's float32 products in its order, so only the double sum
// of squares (an ISA-specific order of exact squares) can differ from it.
void RmsNormV(const float* x, const float* weight, int64_t n, float eps, float* out) {
  const double sum_sq = V::SumSquaresF64(x, n);
  const float inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(n) + eps));
  const F inv = V::Set1(inv_rms);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) {
    V::Store(out + i, V::Mul(V::Mul(V::Load(x + i), inv), V::Load(weight + i)));
  }
  for (; i < n; ++i) out[i] = x[i] * inv_rms * weight[i];
}

// Interleaved pairs: x = [a0 b0 a1 b1 ...] gives x c' + swap(x) s' = [a0 c0 - b0 s0, b0 c0 +
// a0 s0, ...] with c' = [c0 c0 c1 c1 ...], s' = [-s0 s0 -s1 s1 ...]: in-lane shuffles only, and
// c', s' built once per vector of pairs for all heads. Halves: (a, b) = (x[i], x[i + n_pairs]).
alignas(64) constexpr float kPairSigns[16] = {-1, 1, -1, 1, -1, 1, -1, 1,
                                              -1, 1, -1, 1, -1, 1, -1, 1};
static_assert(kW <= 16);

void RopeHeadsV(float* x, int n_heads, int64_t head_stride, const RopeAngles& angles) {
  const float* cos = angles.cos;
  const float* sin = angles.sin;
  const int n_pairs = angles.n_pairs;
  int i = 0;
  if (angles.layout == RopeLayout::kInterleaved) {
    const F sign = V::Load(kPairSigns);
    for (; i + kW / 2 <= n_pairs; i += kW / 2) {
      const F c = V::LoadPairDup(cos + i);
      const F s = V::Mul(V::LoadPairDup(sin + i), sign);
      for (int h = 0; h < n_heads; ++h) {
        float* p = x + h * head_stride + int64_t{2} * i;
        const F v = V::Load(p);
        V::Store(p, V::Add(V::Mul(v, c), V::Mul(V::SwapPairs(v), s)));
      }
    }
  } else {
    for (; i + kW <= n_pairs; i += kW) {
      const F c = V::Load(cos + i);
      const F s = V::Load(sin + i);
      for (int h = 0; h < n_heads; ++h) {
        float* p = x + h * head_stride + i;
        const F a = V::Load(p);
        const F b = V::Load(p + n_pairs);
        V::Store(p, V::Sub(V::Mul(a, c), V::Mul(b, s)));
        V::Store(p + n_pairs, V::Add(V::Mul(a, s), V::Mul(b, c)));
      }
    }
  }
  for (int h = 0; h < n_heads && i < n_pairs; ++h) {
    float* head = x + h * head_stride;
    for (int j = i; j < n_pairs; ++j) {
      const int ia = angles.layout == RopeLayout::kInterleaved ? 2 * j : j;
      const int ib = angles.layout == RopeLayout::kInterleaved ? 2 * j + 1 : j + n_pairs;
      const float a = head[ia];
      const float b = head[ib];
      head[ia] = a * cos[j] - b * sin[j];
      head[ib] = a * sin[j] + b * cos[j];
    }
  }
}

// Largest lane of m (no lane is NaN).
inline float MaxLane(F m) {
  alignas(64) float lanes[kW];
  V::Store(lanes, m);
  float best = lanes[0];
  for (int l = 1; l < kW; ++l) best = std::max(best, lanes[l]);
  return best;
}

void SoftmaxV(float* x, int64_t n) {
  F m = V::Set1(-INFINITY);
  int64_t i = 0;
  for (; i + kW <= n; i += kW) m = V::Max(V::Load(x + i), m);
  float max_value = MaxLane(m);
  for (; i < n; ++i) max_value = std::max(max_value, x[i]);
  const float sum = ExpShiftSum(x, max_value, n);
  Scale(1.0f / sum, x, n);
}

// Top-k by k rounds over a copy of the scores padded with NaN to whole vectors: each round takes
// the largest value m among the entries not yet chosen and not NaN (chosen ones become NaN, and
// V::Max(v, acc) keeps acc where v is NaN), then the lowest index holding a value equal to m
// (so ties and -0 / +0 go by index). With no such value left, the lowest unchosen index (a NaN,
// as TopK orders them). Rows over kMaxTopKScores values use the reference.
constexpr int kMaxTopKScores = 512;

void TopKV(const float* scores, int n, int k, int* out) {
  if (n > kMaxTopKScores) {
    TopK(std::span<const float>(scores, static_cast<size_t>(n)), k, out);
    return;
  }
  alignas(64) float buf[kMaxTopKScores + kW];
  const int n_vectors = (n + kW - 1) / kW;
  std::copy_n(scores, n, buf);
  std::fill(buf + n, buf + static_cast<ptrdiff_t>(n_vectors) * kW, NAN);
  uint64_t chosen[kMaxTopKScores / 64] = {};
  for (int round = 0; round < k; ++round) {
    F m = V::Set1(-INFINITY);
    for (int64_t v = 0; v < n_vectors; ++v) m = V::Max(V::Load(buf + v * kW), m);
    const F best = V::Set1(MaxLane(m));
    int index = -1;
    for (int v = 0; v < n_vectors && index < 0; ++v) {
      const uint32_t equal = V::EqualBits(V::Load(buf + static_cast<ptrdiff_t>(v) * kW), best);
      if (equal != 0) index = v * kW + std::countr_zero(equal);
    }
    if (index < 0) {  // only NaN entries left
      index = 0;
      while ((chosen[index / 64] >> (index % 64)) & 1u) ++index;
    }
    chosen[index / 64] |= uint64_t{1} << (index % 64);
    buf[index] = NAN;
    out[round] = index;
  }
}

}  // namespace mlarun::SIMD_NAMESPACE
