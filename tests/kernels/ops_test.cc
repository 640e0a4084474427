// Row-wise kernels on hand-computed cases, and each ISA's kernel-table versions (RMSNorm, RoPE,
// softmax, top-k) against the scalar references of ops.h.
#include "kernels/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/rng.h"
#include "kernels/isa.h"
#include "kernels/kernel_table.h"

namespace mlarun {
namespace {

TEST(OpsTest, RmsNormHandComputed) {
  const float x[] = {3, 4};
  const float w[] = {1, 2};
  float out[2];
  RmsNorm(x, w, 2, 0.0f, out);  // rms = sqrt(12.5)
  EXPECT_NEAR(out[0], 3 / std::sqrt(12.5f), 1e-6);
  EXPECT_NEAR(out[1], 8 / std::sqrt(12.5f), 1e-6);
}

TEST(OpsTest, RopePairLayouts) {
  // Rotation by 90 degrees: (a, b) -> (-b, a).
  const float cos[] = {0, 1};
  const float sin[] = {1, 0};
  float interleaved[] = {1, 2, 3, 4};
  ApplyRope(interleaved, cos, sin, 2, RopeLayout::kInterleaved);
  EXPECT_EQ(std::vector<float>(interleaved, interleaved + 4), (std::vector<float>{-2, 1, 3, 4}));
  float halves[] = {1, 2, 3, 4};  // pairs (1,3) and (2,4)
  ApplyRope(halves, cos, sin, 2, RopeLayout::kHalves);
  EXPECT_EQ(std::vector<float>(halves, halves + 4), (std::vector<float>{-3, 2, 1, 4}));
}

TEST(OpsTest, SoftmaxAndSiluMul) {
  float x[] = {0, std::log(3.0f)};
  Softmax(x, 2);
  EXPECT_NEAR(x[0], 0.25, 1e-7);
  EXPECT_NEAR(x[1], 0.75, 1e-7);
  float gate[] = {0, 2};
  const float up[] = {5, 3};
  SiluMul(gate, up, 2);
  EXPECT_EQ(gate[0], 0);
  EXPECT_NEAR(gate[1], 2 / (1 + std::exp(-2.0f)) * 3, 1e-6);
}

TEST(OpsTest, TopKOrdersByScoreThenIndex) {
  const std::vector<float> s = {0.5f, 0.9f, 0.5f, -INFINITY, 0.7f};
  int out[3];
  TopK(s, 3, out);
  EXPECT_EQ(std::vector<int>(out, out + 3), (std::vector<int>{1, 4, 0}));
}

TEST(OpsTest, TopKPutsNanLastAndTiesSignedZerosByIndex) {
  const std::vector<float> s = {NAN, 0.0f, -INFINITY, -0.0f, NAN, 0.0f, -1.0f};
  int out[7];
  TopK(s, 7, out);
  EXPECT_EQ(std::vector<int>(out, out + 7), (std::vector<int>{1, 3, 5, 6, 2, 0, 4}));
}

// The SIMD kernel tables of this CPU (the scalar one holds the references themselves).
std::vector<const KernelTable*> SimdTables() {
  std::vector<const KernelTable*> out;
  for (Isa isa : SupportedIsas()) {
    if (isa != Isa::kScalar) out.push_back(&GetKernelTable(isa));
  }
  return out;
}

const KernelTable& Reference() { return GetKernelTable(Isa::kScalar); }

std::vector<float> Random(int64_t n, uint64_t seed, float scale) {
  Rng rng(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = scale * rng.NextSymmetric();
  return v;
}

TEST(OpsSimdTest, RmsNormMatchesReferenceInPlaceAndNot) {
  for (const KernelTable* k : SimdTables()) {
    SCOPED_TRACE(IsaName(k->isa));
    for (int64_t n : {1, 7, 8, 16, 33, 512, 2048 + 5}) {
      for (float scale : {1e-3f, 1.0f, 1e3f}) {
        const std::vector<float> x = Random(n, 11 + n, scale);
        const std::vector<float> w = Random(n, 12 + n, 2.0f);
        std::vector<float> ref(x.size()), out(x.size()), in_place = x;
        Reference().rms_norm(x.data(), w.data(), n, 1e-6f, ref.data());
        k->rms_norm(x.data(), w.data(), n, 1e-6f, out.data());
        k->rms_norm(in_place.data(), w.data(), n, 1e-6f, in_place.data());
        // Only inv_rms can differ (the double sums' order), by at most one float32 rounding.
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_NEAR(out[i], ref[i], 4e-7 * std::abs(ref[i])) << "n " << n << " i " << i;
          ASSERT_EQ(in_place[i], out[i]) << "n " << n << " i " << i;
        }
      }
    }
  }
}

TEST(OpsSimdTest, RopeMatchesReferenceInBothLayouts) {
  for (const KernelTable* k : SimdTables()) {
    SCOPED_TRACE(IsaName(k->isa));
    for (RopeLayout layout : {RopeLayout::kInterleaved, RopeLayout::kHalves}) {
      for (int n_pairs : {1, 3, 8, 16, 32, 37}) {
        std::vector<float> cos(static_cast<size_t>(n_pairs)), sin(cos.size());
        for (int i = 0; i < n_pairs; ++i) {
          const double angle = 0.37 * (i + 1) * (i % 3 == 0 ? -1.0 : 1.0);
          cos[static_cast<size_t>(i)] = static_cast<float>(std::cos(angle));
          sin[static_cast<size_t>(i)] = static_cast<float>(std::sin(angle));
        }
        // 3 heads, each 2 n_pairs rotated values followed by 5 the rotation must not touch.
        const int n_heads = 3;
        const int64_t stride = 2 * n_pairs + 5;
        const std::vector<float> x = Random(n_heads * stride, 21 + n_pairs, 1.0f);
        std::vector<float> ref = x, out = x;
        const RopeAngles angles{
            .cos = cos.data(), .sin = sin.data(), .n_pairs = n_pairs, .layout = layout};
        for (int h = 0; h < n_heads; ++h) {
          ApplyRope(ref.data() + h * stride, cos.data(), sin.data(), n_pairs, layout);
        }
        k->rope(out.data(), n_heads, stride, angles);
        // Equal up to fused multiply-adds: 2 roundings of products of magnitude <= 1.
        for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(out[i], ref[i], 3e-7) << i;
        // A quarter turn is exact in any order of rounding: (a, b) -> (-b, a).
        std::vector<float> zeros(cos.size(), 0.0f), ones(cos.size(), 1.0f), turned = x;
        k->rope(turned.data(), n_heads, stride,
                {.cos = zeros.data(), .sin = ones.data(), .n_pairs = n_pairs, .layout = layout});
        for (int h = 0; h < n_heads; ++h) {
          const float* in = x.data() + h * stride;
          const float* head = turned.data() + h * stride;
          for (int i = 0; i < n_pairs; ++i) {
            const int ia = layout == RopeLayout::kInterleaved ? 2 * i : i;
            const int ib = layout == RopeLayout::kInterleaved ? 2 * i + 1 : i + n_pairs;
            ASSERT_EQ(head[ia], -in[ib]) << "head " << h << " pair " << i;
            ASSERT_EQ(head[ib], in[ia]) << "head " << h << " pair " << i;
          }
          for (int i = 2 * n_pairs; i < stride; ++i) ASSERT_EQ(head[i], in[i]);
        }
      }
    }
  }
}

TEST(OpsSimdTest, SoftmaxMatchesReference) {
  for (const KernelTable* k : SimdTables()) {
    SCOPED_TRACE(IsaName(k->isa));
    for (int64_t n : {1, 5, 8, 64, 256, 1000}) {
      const std::vector<float> x = Random(n, 31 + n, 12.0f);
      std::vector<float> ref = x, out = x;
      Reference().softmax(ref.data(), n);
      k->softmax(out.data(), n);
      double sum = 0.0;
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_NEAR(out[i], ref[i], 2e-6 * ref[i] + 1e-30) << "n " << n << " i " << i;
        sum += out[i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
    // A NaN input poisons the whole row, as in the reference (not a quiet near-zero weight).
    std::vector<float> with_nan = Random(20, 39, 3.0f), ref_nan;
    with_nan[7] = NAN;
    ref_nan = with_nan;
    Reference().softmax(ref_nan.data(), 20);
    k->softmax(with_nan.data(), 20);
    for (size_t i = 0; i < with_nan.size(); ++i) {
      EXPECT_TRUE(std::isnan(ref_nan[i]) && std::isnan(with_nan[i])) << i;
    }
  }
}

TEST(OpsSimdTest, TopKGivesTheReferenceIndices) {
  for (const KernelTable* k : SimdTables()) {
    SCOPED_TRACE(IsaName(k->isa));
    for (int n : {1, 3, 8, 9, 64, 256, 300, 700}) {
      for (int levels : {0, 4}) {  // 0: distinct values; 4: many ties
        std::vector<float> s = Random(n, 41 + n, 1.0f);
        if (levels > 0) {
          for (float& v : s) v = std::round(v * levels) / levels;
        }
        if (n >= 9) {  // signed zeros, infinities and NaN among the values
          s[2] = -0.0f;
          s[5] = 0.0f;
          s[6] = -INFINITY;
          s[7] = NAN;
          s[n - 1] = NAN;
          s[n / 2] = INFINITY;
        }
        for (int top_k : {1, 6, n}) {
          if (top_k > n) continue;
          std::vector<int> ref(static_cast<size_t>(top_k)), out(ref.size());
          Reference().top_k(s.data(), n, top_k, ref.data());
          k->top_k(s.data(), n, top_k, out.data());
          ASSERT_EQ(out, ref) << "n " << n << " levels " << levels << " k " << top_k;
        }
      }
    }
  }
}

}  // namespace
}  // namespace mlarun
