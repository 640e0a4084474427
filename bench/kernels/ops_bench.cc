// Row-wise kernel microbenchmarks at the bench model's sizes (DeepSeek-V2-Lite: hidden 2,048,
// 16 heads with a 64-wide RoPE part, 64 routed experts, SwiGLU width 1,408), per ISA: the kernel
// table's RMSNorm, RoPE, router softmax + top-k, SwiGLU, softmax tile steps and activation
// quantisation, the bf16 prefill attention's key and value layout (the scalar table's are the
// references of ops.h, quant.h and packed_bf16.h). Each reports GB/s
// of values read and written, to set beside the matmuls' (BM_MatMul) and show what these cost
// per decoded token.
//   build/bin/kernels_bench --benchmark_filter='BM_(RmsNorm|Rope|Softmax|Silu|Quantize|Bf16Att)'
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "kernels/kernel_table.h"
#include "kernels/ops.h"
#include "kernels/quant.h"

namespace mlarun {
namespace {

std::vector<float> Random(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = rng.NextSymmetric();
  return v;
}

// The kernels of `isa`, or null once the benchmark is marked skipped on a CPU without it.
const KernelTable* TableOrSkip(benchmark::State& state, Isa isa) {
  if (IsaSupported(isa)) return &GetKernelTable(isa);
  state.SkipWithError("ISA not supported on this CPU");
  return nullptr;
}

void SetBytes(benchmark::State& state, double bytes_per_iteration) {
  state.counters["GB/s"] =
      benchmark::Counter(bytes_per_iteration * static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

// One token's RMSNorm over `n` values: x and the weight read, the output written.
void BM_RmsNorm(benchmark::State& state, Isa isa) {
  const KernelTable* table = TableOrSkip(state, isa);
  if (table == nullptr) return;
  const int64_t n = state.range(0);
  const std::vector<float> x = Random(static_cast<size_t>(n), 1);
  const std::vector<float> w = Random(static_cast<size_t>(n), 2);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    table->rms_norm(x.data(), w.data(), n, 1e-6f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  SetBytes(state, 3.0 * 4.0 * static_cast<double>(n));
}
BENCHMARK_CAPTURE(BM_RmsNorm, scalar, Isa::kScalar)->Arg(512)->Arg(2048);
BENCHMARK_CAPTURE(BM_RmsNorm, avx2, Isa::kAvx2)->Arg(512)->Arg(2048);
BENCHMARK_CAPTURE(BM_RmsNorm, avx512, Isa::kAvx512)->Arg(512)->Arg(2048);

// RoPE of one token's 16 heads x 64 rotary values (interleaved pairs), in place.
void BM_Rope(benchmark::State& state, Isa isa) {
  const KernelTable* table = TableOrSkip(state, isa);
  if (table == nullptr) return;
  constexpr int64_t kHeads = 16;
  constexpr int kPairs = 32;
  constexpr int64_t kHeadValues = int64_t{2} * kPairs;
  std::vector<float> q = Random(kHeads * kHeadValues, 3);
  // Rotations (cos^2 + sin^2 = 1), so that the values repeatedly rotated in place keep their
  // size (random cos and sin drove them into denormals, timing those instead).
  std::vector<float> cos(kPairs), sin(kPairs);
  for (int i = 0; i < kPairs; ++i) {
    cos[static_cast<size_t>(i)] = std::cos(0.1f * static_cast<float>(i + 1));
    sin[static_cast<size_t>(i)] = std::sin(0.1f * static_cast<float>(i + 1));
  }
  const RopeAngles angles{
      .cos = cos.data(), .sin = sin.data(), .n_pairs = kPairs, .layout = RopeLayout::kInterleaved};
  for (auto _ : state) {
    table->rope(q.data(), kHeads, kHeadValues, angles);
    benchmark::DoNotOptimize(q.data());
  }
  SetBytes(state, 2.0 * 4.0 * static_cast<double>(kHeads * kHeadValues));
}
BENCHMARK_CAPTURE(BM_Rope, scalar, Isa::kScalar);
BENCHMARK_CAPTURE(BM_Rope, avx2, Isa::kAvx2);
BENCHMARK_CAPTURE(BM_Rope, avx512, Isa::kAvx512);

// The router's softmax and top-k over `n` expert scores (top 6).
void BM_SoftmaxTopK(benchmark::State& state, Isa isa) {
  const KernelTable* table = TableOrSkip(state, isa);
  if (table == nullptr) return;
  const int64_t n = state.range(0);
  const std::vector<float> scores = Random(static_cast<size_t>(n), 6);
  std::vector<float> x(scores.size());
  int top[6];
  for (auto _ : state) {
    x = scores;
    table->softmax(x.data(), n);
    table->top_k(x.data(), static_cast<int>(n), 6, top);
    benchmark::DoNotOptimize(top);
  }
  SetBytes(state, 3.0 * 4.0 * static_cast<double>(n));
}
BENCHMARK_CAPTURE(BM_SoftmaxTopK, scalar, Isa::kScalar)->Arg(64)->Arg(256);
BENCHMARK_CAPTURE(BM_SoftmaxTopK, avx2, Isa::kAvx2)->Arg(64)->Arg(256);
BENCHMARK_CAPTURE(BM_SoftmaxTopK, avx512, Isa::kAvx512)->Arg(64)->Arg(256);

// SwiGLU of `n` values: gate and up read, gate written (the scalar table's is ops.h's SiluMul).
void BM_SiluMul(benchmark::State& state, Isa isa) {
  const KernelTable* table = TableOrSkip(state, isa);
  if (table == nullptr) return;
  const KernelTable& k = *table;
  const int64_t n = state.range(0);
  // 8 MoE experts' worth of SwiGLU per call; values stay in [-1, 1] by reusing the inputs.
  const std::vector<float> gate0 = Random(static_cast<size_t>(n), 7);
  const std::vector<float> up = Random(static_cast<size_t>(n), 8);
  std::vector<float> gate = gate0;
  for (auto _ : state) {
    k.silu_mul(gate.data(), up.data(), n);
    benchmark::DoNotOptimize(gate.data());
    state.PauseTiming();
    gate = gate0;
    state.ResumeTiming();
  }
  SetBytes(state, 3.0 * 4.0 * static_cast<double>(n));
}
BENCHMARK_CAPTURE(BM_SiluMul, scalar, Isa::kScalar)->Arg(int64_t{8} * 1408);
BENCHMARK_CAPTURE(BM_SiluMul, avx2, Isa::kAvx2)->Arg(int64_t{8} * 1408);
BENCHMARK_CAPTURE(BM_SiluMul, avx512, Isa::kAvx512)->Arg(int64_t{8} * 1408);

// One online-softmax tile row of the attention core: scale, bias and max, then exp and sum.
void BM_SoftmaxTile(benchmark::State& state, Isa isa) {
  const KernelTable* table = TableOrSkip(state, isa);
  if (table == nullptr) return;
  const KernelTable& k = *table;
  const int64_t n = state.range(0);
  const std::vector<float> s0 = Random(static_cast<size_t>(n), 9);
  const std::vector<float> bias(static_cast<size_t>(n), 0.0f);
  std::vector<float> s = s0;
  for (auto _ : state) {
    std::copy(s0.begin(), s0.end(), s.begin());
    const float max_value = k.scale_bias_max(s.data(), 0.1f, bias.data(), n);
    benchmark::DoNotOptimize(k.exp_shift_sum(s.data(), max_value, n));
  }
  SetBytes(state, 5.0 * 4.0 * static_cast<double>(n));
}
BENCHMARK_CAPTURE(BM_SoftmaxTile, scalar, Isa::kScalar)->Arg(256);
BENCHMARK_CAPTURE(BM_SoftmaxTile, avx2, Isa::kAvx2)->Arg(256);
BENCHMARK_CAPTURE(BM_SoftmaxTile, avx512, Isa::kAvx512)->Arg(256);

// Q8 quantisation of one activation row (blocks of 32: scale and sum per block), as every int8
// product of a decode step starts.
void BM_QuantizeRowQ8(benchmark::State& state, Isa isa) {
  const KernelTable* table = TableOrSkip(state, isa);
  if (table == nullptr) return;
  const KernelTable& k = *table;
  const int64_t n = state.range(0);
  const std::vector<float> x = Random(static_cast<size_t>(n), 10);
  std::vector<int8_t> q(static_cast<size_t>(Q8PaddedCols(n)));
  std::vector<float> scales(static_cast<size_t>(Q8PaddedCols(n) / kQ8Block));
  std::vector<int32_t> offsets(scales.size());
  for (auto _ : state) {
    k.quantize_row_q8(x.data(), n, q.data(), scales.data(), offsets.data());
    benchmark::DoNotOptimize(q.data());
  }
  SetBytes(state, 5.0 * static_cast<double>(n));
}
BENCHMARK_CAPTURE(BM_QuantizeRowQ8, scalar, Isa::kScalar)->Arg(2048);
BENCHMARK_CAPTURE(BM_QuantizeRowQ8, avx2, Isa::kAvx2)->Arg(2048);
BENCHMARK_CAPTURE(BM_QuantizeRowQ8, avx512, Isa::kAvx512)->Arg(2048);

// Load-time Q8 quantisation of one weight row (`--weights int8`): float32 read, int8 values and
// float16 scales written, then the row packed into its group (PackQ8Row, the same for every ISA).
void BM_QuantizeWeightRowQ8(benchmark::State& state, Isa isa) {
  const KernelTable* table = TableOrSkip(state, isa);
  if (table == nullptr) return;
  const int64_t n = state.range(0);
  const std::vector<float> w = Random(static_cast<size_t>(n), 11);
  std::vector<int8_t> q(static_cast<size_t>(Q8PaddedCols(n)));
  std::vector<uint16_t> scales(static_cast<size_t>(Q8PaddedCols(n) / kQ8Block));
  std::vector<uint8_t> packed(static_cast<size_t>(PackedQ8ValueBytes(kQ8GroupRows, n)));
  std::vector<uint16_t> packed_scales(static_cast<size_t>(PackedQ8ScaleCount(kQ8GroupRows, n)));
  int64_t row = 0;
  for (auto _ : state) {
    table->quantize_weight_row_q8(w.data(), n, q.data(), scales.data());
    PackQ8Row(row, n, q.data(), scales.data(), packed.data(), packed_scales.data());
    row = (row + 1) % kQ8GroupRows;
    benchmark::DoNotOptimize(packed.data());
  }
  SetBytes(state, 4.0 * static_cast<double>(n));
}
BENCHMARK_CAPTURE(BM_QuantizeWeightRowQ8, scalar, Isa::kScalar)->Arg(2048);
BENCHMARK_CAPTURE(BM_QuantizeWeightRowQ8, avx2, Isa::kAvx2)->Arg(2048);
BENCHMARK_CAPTURE(BM_QuantizeWeightRowQ8, avx512, Isa::kAvx512)->Arg(2048);

// The bf16 prefill attention's layout of one head's keys and values from the expanded context
// (`range(0)` positions of 16 heads x (128 nope + 128 v) floats, one head read): the nope keys
// rounded and transposed into pair words (Bf16PairColumns), the values' row pairs interleaved
// (Bf16PairRows). GB/s of floats read and words written.
void BM_Bf16AttentionLayout(benchmark::State& state, Isa isa) {
  const KernelTable* table = TableOrSkip(state, isa);
  if (table == nullptr) return;
  const int64_t n_ctx = state.range(0);
  constexpr int64_t kWidth = 16 * 256;  // kv_b_proj's output per position
  const std::vector<float> kv = Random(static_cast<size_t>(n_ctx * kWidth), 3);
  std::vector<uint32_t> keys(static_cast<size_t>(64 * n_ctx));
  std::vector<uint32_t> values(static_cast<size_t>((n_ctx + 1) / 2 * 128));
  for (auto _ : state) {
    Bf16PairColumnsWith(*table, kv.data(), kWidth, n_ctx, 64, keys.data(), n_ctx);
    for (int64_t j = 0; j < (n_ctx + 1) / 2; ++j) {
      const float* even = kv.data() + 2 * j * kWidth + 128;
      Bf16PairRowsWith(*table, even, 2 * j + 1 < n_ctx ? even + kWidth : nullptr, 128,
                       values.data() + j * 128);
    }
    benchmark::DoNotOptimize(keys.data());
    benchmark::DoNotOptimize(values.data());
  }
  SetBytes(state, static_cast<double>(n_ctx) * 256.0 * (4.0 + 2.0));
}
BENCHMARK_CAPTURE(BM_Bf16AttentionLayout, scalar, Isa::kScalar)->Arg(4608);
BENCHMARK_CAPTURE(BM_Bf16AttentionLayout, avx512, Isa::kAvx512)->Arg(4608);

}  // namespace
}  // namespace mlarun
