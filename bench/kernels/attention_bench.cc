// Attention core microbenchmark: one absorbed-MLA decode query (16 heads, 576/512) over a bf16
// latent cache of `depth` rows (args: depth, evict, threads: 1 runs Attend, more AttendParallel on
// a pool of that many, as decode does); reports GB/s of cache rows streamed.
#include <benchmark/benchmark.h>

#include <vector>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"

namespace mlarun {
namespace {

void BM_AbsorbedMlaDecode(benchmark::State& state, Isa isa) {
  if (!IsaSupported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const int64_t depth = state.range(0);
  // range(3) = 1: int8 rows (656 bytes instead of 1,152; the VNNI kernels with --isa fast).
  const KvRowFormat f{.dtype = state.range(3) != 0 ? DType::kI8 : DType::kBF16,
                      .n_head_kv = 1,
                      .head_dim_k = 576,
                      .head_dim_v = 512,
                      .v_aliases_k = true,
                      .rope_tail_dim = 64};
  const AttentionSpec spec{.n_head_q = 16,
                           .n_head_kv = 1,
                           .head_dim_qk = 576,
                           .head_dim_v = 512,
                           .v_aliases_k = true,
                           .scale = 0.1f};
  constexpr int kBlock = 64;
  const int64_t n_blocks = (depth + kBlock - 1) / kBlock;
  std::vector<uint8_t> storage(static_cast<size_t>(n_blocks * kBlock) * f.RowBytes());
  Rng rng(2);
  std::vector<float> row(576);
  for (int64_t r = 0; r < n_blocks * kBlock; ++r) {
    for (float& v : row) v = rng.NextSymmetric();
    EncodeKvRow(f, row.data(), storage.data() + static_cast<size_t>(r) * f.RowBytes());
  }
  std::vector<KvSpan> spans;
  for (int64_t b = 0; b < n_blocks; ++b) {
    spans.push_back(
        {.block = static_cast<int32_t>(b),
         .row_begin = 0,
         .n_rows = static_cast<int32_t>(std::min<int64_t>(kBlock, depth - b * kBlock))});
  }
  const KvRows rows{.base = storage.data(), .block_stride = kBlock * f.RowBytes(), .format = f};
  std::vector<float> q(16 * 576, 0.01f), out(16 * 512);
  const KernelTable& k = GetKernelTable(isa);
  // range(1) = 1: the cache is evicted from L2/L3 before every call (by reading 256 MB), as the
  // weights streamed between two decode steps' attention evict it in a real model.
  const bool evict = state.range(1) != 0;
  std::vector<float> sweep(evict ? (size_t{256} << 20) / sizeof(float) : 0, 1.0f);
  const int threads = static_cast<int>(state.range(2));
  ThreadPool pool(threads);
  Exec exec{pool, k};
  for (auto _ : state) {
    if (evict) {
      state.PauseTiming();
      // Every thread sweeps a part, so the workers are awake (spinning) when attention starts, as
      // between the products of a decode step.
      pool.ParallelForRange(static_cast<int64_t>(sweep.size()), 16, [&](int64_t b, int64_t e, int) {
        float sum = 0.0f;
        for (int64_t i = b; i < e; i += 16) sum += sweep[static_cast<size_t>(i)];
        benchmark::DoNotOptimize(sum);
      });
      state.ResumeTiming();
    }
    if (threads > 1) {
      AttendParallel(exec, spec, rows, {.q = q.data(), .spans = spans}, out.data());
    } else {
      Attend(k, spec, rows, {.q = q.data(), .spans = spans}, out.data());
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["cache_GB/s"] =
      benchmark::Counter(static_cast<double>(depth) * static_cast<double>(f.RowBytes()) *
                             static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_AbsorbedMlaDecode, scalar, Isa::kScalar)->Args({4096, 0, 1, 0})->UseRealTime();
// AVX2 + FMA (CPUs without AVX-512): bf16 rows in exact float32; int8 rows.
BENCHMARK_CAPTURE(BM_AbsorbedMlaDecode, avx2, Isa::kAvx2)
    ->ArgNames({"depth", "evict", "threads", "int8"})
    ->Args({4096, 0, 1, 0})
    ->Args({4096, 1, 1, 0})
    ->Args({4096, 0, 2, 0})
    ->Args({4096, 1, 2, 0})
    ->Args({4096, 0, 1, 1})
    ->Args({4096, 0, 2, 1})
    ->Args({4096, 1, 2, 1})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_AbsorbedMlaDecode, avx512, Isa::kAvx512)
    ->Args({4096, 0, 1, 0})
    ->Args({4096, 1, 1, 0})
    ->Args({16384, 0, 1, 0})
    ->UseRealTime();
// `--isa fast`: bf16 query and probabilities, vdpbf16ps; int8 rows: VNNI.
BENCHMARK_CAPTURE(BM_AbsorbedMlaDecode, avx512bf16, Isa::kAvx512Bf16)
    ->ArgNames({"depth", "evict", "threads", "int8"})
    ->Args({4096, 0, 1, 0})
    ->Args({4096, 1, 1, 0})
    ->Args({16384, 0, 1, 0})
    ->Args({4096, 0, 2, 0})
    ->Args({4096, 1, 2, 0})
    ->Args({4096, 0, 1, 1})
    ->Args({4096, 1, 1, 1})
    ->Args({4096, 0, 2, 1})
    ->Args({4096, 1, 2, 1})
    ->UseRealTime();

}  // namespace
}  // namespace mlarun

BENCHMARK_MAIN();
