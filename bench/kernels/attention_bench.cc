// Attention core microbenchmarks. BM_AbsorbedMlaDecode: one absorbed-MLA decode query (16 heads,
// 576/512) over a bf16 or int8 latent cache of `depth` rows (args: depth, evict, threads: 1 runs
// Attend, more AttendParallel on a pool of that many, as decode does, int8); reports GB/s of cache
// rows streamed and GFLOP/s (2 x heads x rows x (576 + 512) per call: the scores and P V).
// BM_AttentionTileI8: the two int8-row kernels alone on one core, over a 256-row tile in L2, to
// compare each with the core's VNNI issue rate. BM_IssueRate: that rate, from a register-only
// loop of 24 independent 512-bit instructions (no loads), the ceiling of compute-bound kernels.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "core/rng.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"

namespace mlarun {
namespace {

// The absorbed-MLA decode of DeepSeek-V2(-Lite) shapes: cache rows of the 512-value latent and
// the 64-value RoPE key, 16 query heads attending over them (576 / 512).
KvRowFormat MlaLatentRows(DType dtype) {
  return {.dtype = dtype,
          .n_head_kv = 1,
          .head_dim_k = 576,
          .head_dim_v = 512,
          .v_aliases_k = true,
          .rope_tail_dim = 64};
}

// DeepSeek-V2-Lite's absorbed decode (16 heads; V2 and V3: 128).
AttentionSpec MlaDecodeSpec(int n_head = 16) {
  return {.n_head_q = n_head,
          .n_head_kv = 1,
          .head_dim_qk = 576,
          .head_dim_v = 512,
          .v_aliases_k = true,
          .scale = 0.1f};
}

// n_rows rows of `f` from values uniform in [-1, 1].
std::vector<uint8_t> RandomRows(const KvRowFormat& f, int64_t n_rows, Rng& rng) {
  std::vector<uint8_t> storage(static_cast<size_t>(n_rows) * f.RowBytes());
  std::vector<float> row(static_cast<size_t>(f.ValuesPerRow()));
  for (int64_t r = 0; r < n_rows; ++r) {
    for (float& v : row) v = rng.NextSymmetric();
    EncodeKvRow(f, row.data(), storage.data() + static_cast<size_t>(r) * f.RowBytes());
  }
  return storage;
}

// layers_per_block: the rows of that many layers stored per 64-row block, this layer's 64 rows
// then the others' (as a block-major KV pool lays out a block of every layer), instead of the
// layer's blocks back to back (kv/block_pool.h's layer-major regions).
void BM_AbsorbedMlaDecode(benchmark::State& state, Isa isa, int n_head, int layers_per_block = 1) {
  if (!IsaSupported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const int64_t depth = state.range(0);
  // range(3) = 1: int8 rows (600 bytes instead of 1,152; the VNNI kernels with --isa fast).
  const KvRowFormat f = MlaLatentRows(state.range(3) != 0 ? DType::kI8 : DType::kBF16);
  const AttentionSpec spec = MlaDecodeSpec(n_head);
  constexpr int kBlock = 64;
  const int64_t n_blocks = (depth + kBlock - 1) / kBlock;
  Rng rng(2);
  const std::vector<uint8_t> contiguous = RandomRows(f, n_blocks * kBlock, rng);
  const size_t block_bytes = kBlock * f.RowBytes();
  std::vector<uint8_t> storage(contiguous.size() * static_cast<size_t>(layers_per_block));
  for (int64_t b = 0; b < n_blocks; ++b) {
    std::copy_n(contiguous.begin() + static_cast<ptrdiff_t>(b * block_bytes), block_bytes,
                storage.begin() + static_cast<ptrdiff_t>(b * block_bytes * layers_per_block));
  }
  std::vector<KvSpan> spans;
  for (int64_t b = 0; b < n_blocks; ++b) {
    spans.push_back(
        {.block = static_cast<int32_t>(b),
         .row_begin = 0,
         .n_rows = static_cast<int32_t>(std::min<int64_t>(kBlock, depth - b * kBlock))});
  }
  const KvRows rows{
      .base = storage.data(), .block_stride = block_bytes * layers_per_block, .format = f};
  std::vector<float> q(static_cast<size_t>(n_head) * 576, 0.01f);
  std::vector<float> out(static_cast<size_t>(n_head) * 512);
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
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * spec.n_head_q * static_cast<double>(depth) *
                                                     (spec.head_dim_qk + spec.head_dim_v) *
                                                     static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

// One 256-row tile of absorbed-MLA decode over int8 rows, 16 heads, in L2 (args: part: 0 the
// scores, dot_rows_i8, 576 int8 values per row, the 64-value tail with its own scale; 1 P V,
// pv_accumulate_i8, 512 values). GFLOP/s counts 2 per multiply-add; "VNNI/ns" the 512-bit VNNI
// instructions the work needs at full vector use (scores: 64 int8 multiply-adds each, P V: 32
// int16 ones), per second, to set against the core's issue rate (BM_IssueRate).
void BM_AttentionTileI8(benchmark::State& state) {
  const KernelTable& k = GetKernelTable(Isa::kAvx512Bf16);
  if (!IsaSupported(Isa::kAvx512Bf16) || k.dot_rows_i8 == nullptr) {
    state.SkipWithError("no int8-row attention kernels on this CPU");
    return;
  }
  constexpr int kRows = kAttentionTileRows;
  const KvRowFormat f = MlaLatentRows(DType::kI8);
  const AttentionSpec spec = MlaDecodeSpec();
  constexpr int kHeads = 16;  // spec.n_head_q
  Rng rng(3);
  const std::vector<uint8_t> storage = RandomRows(f, kRows, rng);
  std::vector<const uint8_t*> rows(kRows);
  for (int r = 0; r < kRows; ++r)
    rows[static_cast<size_t>(r)] = storage.data() + static_cast<size_t>(r) * f.RowBytes();
  std::vector<float> q(size_t{kHeads} * 576);
  for (float& v : q) v = rng.NextSymmetric();
  I8QueryBuffer query;
  PrepareI8Query(k, spec, f, q.data(), &query);
  std::vector<float> scores(static_cast<size_t>(kHeads) * kRows);
  for (float& p : scores) p = 0.5f + 0.5f * rng.NextSymmetric();  // probabilities in [0, 1]
  std::vector<float> acc(static_cast<size_t>(kHeads) * 512, 0.0f);
  const bool pv = state.range(0) != 0;
  const int body = f.head_dim_k - f.rope_tail_dim;
  for (auto _ : state) {
    if (pv) {
      k.pv_accumulate_i8(scores.data(), kRows, kHeads, kRows, rows.data(), body, f.quant_group, 512,
                         acc.data());
      benchmark::DoNotOptimize(acc.data());
    } else {
      k.dot_rows_i8(rows.data(), kRows, query.view, scores.data(), kRows);
      benchmark::DoNotOptimize(scores.data());
    }
  }
  const double calls = static_cast<double>(state.iterations());
  const double macs = double{kHeads} * kRows * (pv ? 512 : 576);
  const double instructions = macs / (pv ? 32 : 64);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * macs * calls / 1e9, benchmark::Counter::kIsRate);
  state.counters["G_VNNI"] =
      benchmark::Counter(instructions * calls / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_AbsorbedMlaDecode, scalar, Isa::kScalar, 16)
    ->Args({4096, 0, 1, 0})
    ->UseRealTime();
// AVX2 + FMA (CPUs without AVX-512): bf16 rows in exact float32; int8 rows.
BENCHMARK_CAPTURE(BM_AbsorbedMlaDecode, avx2, Isa::kAvx2, 16)
    ->ArgNames({"depth", "evict", "threads", "int8"})
    ->Args({4096, 0, 1, 0})
    ->Args({4096, 1, 1, 0})
    ->Args({4096, 0, 2, 0})
    ->Args({4096, 1, 2, 0})
    ->Args({4096, 0, 1, 1})
    ->Args({4096, 0, 2, 1})
    ->Args({4096, 1, 2, 1})
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_AbsorbedMlaDecode, avx512, Isa::kAvx512, 16)
    ->Args({4096, 0, 1, 0})
    ->Args({4096, 1, 1, 0})
    ->Args({16384, 0, 1, 0})
    ->UseRealTime();
// `--isa fast`: bf16 query and probabilities, vdpbf16ps; int8 rows: VNNI.
BENCHMARK_CAPTURE(BM_AbsorbedMlaDecode, avx512bf16, Isa::kAvx512Bf16, 16)
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
    ->Args({4640, 0, 2, 0})
    ->Args({4640, 1, 2, 0})
    ->Args({4640, 0, 2, 1})
    ->Args({4640, 1, 2, 1})
    ->UseRealTime();
// The bench model's 4 layers side by side in each block, as the KV pool stored them before
// 2026-12-06: 11-16% slower than the rows back to back with int8 rows evicted, 8-17% with bf16
// rows (3 alternating runs, Zen 5 VM; docs/performance.md, forty-first session).
BENCHMARK_CAPTURE(BM_AbsorbedMlaDecode, avx512bf16_4_layers_per_block, Isa::kAvx512Bf16, 16, 4)
    ->ArgNames({"depth", "evict", "threads", "int8"})
    ->Args({4640, 0, 2, 0})
    ->Args({4640, 1, 2, 0})
    ->Args({4640, 0, 2, 1})
    ->Args({4640, 1, 2, 1})
    ->UseRealTime();
// V2 / V3's 128 heads: at depths under 1,024 rows (one to three context pieces) on 2 threads
// AttendParallel also splits the heads (blocks of 16).
BENCHMARK_CAPTURE(BM_AbsorbedMlaDecode, avx512bf16_128_heads, Isa::kAvx512Bf16, 128)
    ->ArgNames({"depth", "evict", "threads", "int8"})
    ->Args({256, 0, 2, 1})
    ->Args({768, 0, 2, 1})
    ->Args({256, 0, 2, 0})
    ->Args({4096, 0, 2, 1})
    ->UseRealTime();
BENCHMARK(BM_AttentionTileI8)->ArgName("pv")->Arg(0)->Arg(1);

// 24 independent accumulators zmm0..zmm23, operands zmm30 and zmm31 (zeroed first, so float
// results stay 0 and no denormal slows the FMA); `op` is the instruction's AT&T mnemonic.
#define MLARUN_ISSUE_1(op, acc) op " %%zmm31, %%zmm30, %%zmm" #acc "\n\t"
#define MLARUN_ISSUE_8(op, a, b, c, d, e, f, g, h) \
  MLARUN_ISSUE_1(op, a)                            \
  MLARUN_ISSUE_1(op, b)                            \
  MLARUN_ISSUE_1(op, c)                            \
  MLARUN_ISSUE_1(op, d)                            \
  MLARUN_ISSUE_1(op, e) MLARUN_ISSUE_1(op, f) MLARUN_ISSUE_1(op, g) MLARUN_ISSUE_1(op, h)
#define MLARUN_ISSUE_24(op)                        \
  MLARUN_ISSUE_8(op, 0, 1, 2, 3, 4, 5, 6, 7)       \
  MLARUN_ISSUE_8(op, 8, 9, 10, 11, 12, 13, 14, 15) \
  MLARUN_ISSUE_8(op, 16, 17, 18, 19, 20, 21, 22, 23)

#define MLARUN_ISSUE_LOOP(op)                                                                  \
  __asm__ volatile("vpxord %%zmm30, %%zmm30, %%zmm30\n\tvpxord %%zmm31, %%zmm31, %%zmm31\n\t"  \
                   :                                                                           \
                   :                                                                           \
                   : "xmm30", "xmm31");                                                        \
  for (int64_t i = 0; i < n; ++i) {                                                            \
    __asm__ volatile(MLARUN_ISSUE_24(op)                                                       \
                     :                                                                         \
                     :                                                                         \
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", \
                       "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16",  \
                       "xmm17", "xmm18", "xmm19", "xmm20", "xmm21", "xmm22", "xmm23");         \
  }

// Runs n x 24 instructions of kind `op` (0 vfmadd231ps, 1 vdpbf16ps, 2 vpdpbusd, 3 vpdpwssd).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16"))) void IssueLoop(
    int op, int64_t n) {
  switch (op) {
    case 0:
      MLARUN_ISSUE_LOOP("vfmadd231ps")
      break;
    case 1:
      MLARUN_ISSUE_LOOP("vdpbf16ps")
      break;
    case 2:
      MLARUN_ISSUE_LOOP("vpdpbusd")
      break;
    default:
      MLARUN_ISSUE_LOOP("vpdpwssd")
      break;
  }
}

#undef MLARUN_ISSUE_LOOP
#undef MLARUN_ISSUE_24
#undef MLARUN_ISSUE_8
#undef MLARUN_ISSUE_1

// args: op as in IssueLoop. Reports G instructions per second per core and the multiply-adds they
// do as GFLOP/s (2 per multiply-add: 16 per FMA, 32 per vdpbf16ps or vpdpwssd, 64 per vpdpbusd).
void BM_IssueRate(benchmark::State& state) {
  if (!IsaSupported(Isa::kAvx512Bf16)) {
    state.SkipWithError("needs AVX512-BF16 (and VNNI)");
    return;
  }
  const int op = static_cast<int>(state.range(0));
  constexpr int64_t kLoops = 10000;
  for (auto _ : state) IssueLoop(op, kLoops);
  const double instructions = 24.0 * kLoops * static_cast<double>(state.iterations());
  const double macs_each = op == 0 ? 16 : op == 2 ? 64 : 32;
  state.counters["G_instr"] = benchmark::Counter(instructions / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * macs_each * instructions / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_IssueRate)->ArgName("op")->DenseRange(0, 3);

}  // namespace
}  // namespace mlarun

BENCHMARK_MAIN();
