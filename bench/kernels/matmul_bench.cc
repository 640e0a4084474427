// MatMul microbenchmarks per ISA and weight dtype: GEMV (decode, memory bound: reports GB/s of
// weights) and GEMM (prefill, compute bound: reports GFLOP/s).
//   build/bin/kernels_bench --benchmark_filter=MatMul
#include <benchmark/benchmark.h>

#include <vector>

#include "core/rng.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace mlarun {
namespace {

// A weight matrix larger than the caches (rows x 2048 bf16), random values.
struct Weights {
  std::vector<uint16_t> bf16;
  std::vector<float> f32;
  std::vector<int8_t> q8;           // Q8 blocks of the same values, rows of kCols
  std::vector<uint16_t> q8_scales;  // float16, one per block of 32
  WeightMatrix Matrix(DType dtype, int64_t rows, int64_t cols) const {
    if (dtype == DType::kI8) {
      return {.dtype = dtype,
              .rows = rows,
              .cols = cols,
              .data = q8.data(),
              .q8_scales = q8_scales.data()};
    }
    return {.dtype = dtype,
            .rows = rows,
            .cols = cols,
            .data = dtype == DType::kBF16 ? static_cast<const void*>(bf16.data()) : f32.data()};
  }
};

constexpr int64_t kCols = 2048;  // a multiple of 64: Q8 rows need no padding

const Weights& GetWeights(size_t n) {
  static Weights w;
  if (w.f32.size() < n) {
    Rng rng(1);
    w.f32.resize(n);
    w.bf16.resize(n);
    for (size_t i = 0; i < n; ++i) {
      w.f32[i] = rng.NextSymmetric();
      w.bf16[i] = F32ToBF16(w.f32[i]);
    }
    w.q8.resize(n);
    w.q8_scales.resize(n / kQ8Block);
    for (size_t r = 0; r < n / kCols; ++r) {
      QuantizeWeightRowQ8(w.f32.data() + r * kCols, kCols, w.q8.data() + r * kCols,
                          w.q8_scales.data() + r * (kCols / kQ8Block));
    }
  }
  return w;
}

void BM_MatMul(benchmark::State& state, Isa isa, DType dtype) {
  if (!IsaSupported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const int64_t rows = state.range(0);
  const int64_t cols = kCols;
  const int64_t n_tokens = state.range(1);
  ThreadPool pool(static_cast<int>(state.range(2)));
  Exec exec{pool, GetKernelTable(isa)};
  const WeightMatrix w = GetWeights(static_cast<size_t>(rows * cols)).Matrix(dtype, rows, cols);
  std::vector<float> x(static_cast<size_t>(n_tokens * cols), 0.5f);
  std::vector<float> y(static_cast<size_t>(n_tokens * rows));
  for (auto _ : state) {
    MatMul(exec, w, x.data(), n_tokens, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  // Q8: one int8 per value plus a 2-byte scale per 32 values.
  const double weight_bytes =
      dtype == DType::kI8 ? static_cast<double>(rows * cols) * (1.0 + 2.0 / kQ8Block)
                          : static_cast<double>(rows * cols) * static_cast<double>(DTypeSize(dtype));
  state.counters["weight_GB/s"] = benchmark::Counter(
      weight_bytes * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows * cols * n_tokens) *
                                                     static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  // Decode: 64 MB of bf16 weights (larger than L3 share), 1 token; prefill: 2048 x 2048, 512
  // tokens.
  for (int threads : {1, 2}) {
    b->Args({16384, 1, threads});
    b->Args({2048, 512, threads});
  }
  b->ArgNames({"rows", "tokens", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_MatMul, scalar_bf16, Isa::kScalar, DType::kBF16)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx2_bf16, Isa::kAvx2, DType::kBF16)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx512_bf16, Isa::kAvx512, DType::kBF16)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx512bf16dot_bf16, Isa::kAvx512Bf16, DType::kBF16)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx512_f32, Isa::kAvx512, DType::kF32)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, scalar_q8, Isa::kScalar, DType::kI8)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx2_q8, Isa::kAvx2, DType::kI8)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx512_q8, Isa::kAvx512, DType::kI8)->Apply(Shapes);

}  // namespace
}  // namespace mlarun
