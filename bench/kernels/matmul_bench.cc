// MatMul microbenchmarks per ISA and weight dtype: GEMV (decode, memory bound: reports GB/s of
// weights) and GEMM (prefill, compute bound: reports GFLOP/s).
//   build/bin/kernels_bench --benchmark_filter=MatMul
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "core/huge_pages.h"
#include "core/rng.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace mlarun {
namespace {

constexpr int64_t kCols = 2048;  // a multiple of 64: Q8 rows need no padding

// Random weights per dtype (values in [-1, 1]), generated for the most rows asked so far (a
// request for fewer rows views a prefix), in huge pages as the engine's copied weights are (with
// 4 KiB pages the GEMVs are TLB-bound).
struct Generated {
  HugePageBuffer values;
  HugePageBuffer q8_scales;       // packed Q8: float16, one per block of 32
  std::vector<float> fp8_scales;  // FP8: one per block of 128 x 128
  int64_t rows = 0;
};

WeightMatrix GetMatrix(DType dtype, int64_t rows) {
  static Generated f32, bf16, f16, fp8, q8;
  Generated& g = dtype == DType::kF32      ? f32
                 : dtype == DType::kBF16   ? bf16
                 : dtype == DType::kF16    ? f16
                 : dtype == DType::kF8E4M3 ? fp8
                                           : q8;
  if (g.rows < rows) {
    Rng rng(1);
    const size_t n = static_cast<size_t>(rows * kCols);
    if (dtype == DType::kF32) {
      g.values = HugePageBuffer(n * sizeof(float));
      auto* v = reinterpret_cast<float*>(g.values.data());
      for (size_t i = 0; i < n; ++i) v[i] = rng.NextSymmetric();
    } else if (dtype == DType::kBF16 || dtype == DType::kF16) {
      g.values = HugePageBuffer(n * sizeof(uint16_t));
      auto* v = reinterpret_cast<uint16_t*>(g.values.data());
      for (size_t i = 0; i < n; ++i) {
        const float value = rng.NextSymmetric();
        v[i] = dtype == DType::kBF16 ? F32ToBF16(value) : F32ToF16(value);
      }
    } else if (dtype == DType::kF8E4M3) {
      g.values = HugePageBuffer(n);
      for (size_t i = 0; i < n; ++i) g.values.data()[i] = F32ToF8E4M3(448.0f * rng.NextSymmetric());
      g.fp8_scales.assign(static_cast<size_t>((rows + 127) / 128 * (kCols / 128)), 1.0f / 448.0f);
    } else {
      g.values = HugePageBuffer(static_cast<size_t>(PackedQ8ValueBytes(rows, kCols)));
      g.q8_scales =
          HugePageBuffer(static_cast<size_t>(PackedQ8ScaleCount(rows, kCols)) * sizeof(uint16_t));
      auto* scales = reinterpret_cast<uint16_t*>(g.q8_scales.data());
      InitPackedQ8(rows, kCols, g.values.data(), scales);
      std::vector<float> row(kCols);
      std::vector<int8_t> q(kCols);
      std::vector<uint16_t> s(kCols / kQ8Block);
      for (int64_t r = 0; r < rows; ++r) {
        for (float& v : row) v = rng.NextSymmetric();
        QuantizeWeightRowQ8(row.data(), kCols, q.data(), s.data());
        PackQ8Row(r, kCols, q.data(), s.data(), g.values.data(), scales);
      }
    }
    g.rows = rows;
  }
  WeightMatrix m{.dtype = dtype, .rows = rows, .cols = kCols, .data = g.values.data()};
  if (dtype == DType::kF8E4M3) {
    m.block_scale = g.fp8_scales.data();
    m.block_rows = 128;
    m.block_cols = 128;
  }
  if (dtype == DType::kI8) {
    m.q8_scales = reinterpret_cast<const uint16_t*>(g.q8_scales.data());
    m.q8_layout = Q8Layout::kPacked16;
  }
  return m;
}

// q8_tiles: KernelTable::matmul_rows_q8_tiles in matmul_rows_q8's place.
void BM_MatMul(benchmark::State& state, Isa isa, DType dtype, Layout16 layout = Layout16::kRowMajor,
               bool q8_tiles = false) {
  if (!IsaSupported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  KernelTable table = GetKernelTable(isa);
  if (q8_tiles) {
    if (table.matmul_rows_q8_tiles == nullptr) {
      state.SkipWithError("no AMX-INT8 on this CPU");
      return;
    }
    table.matmul_rows_q8 = table.matmul_rows_q8_tiles;
  }
  const int64_t rows = state.range(0);
  const int64_t cols = kCols;
  const int64_t n_tokens = state.range(1);
  ThreadPool pool(static_cast<int>(state.range(2)));
  Exec exec{pool, table};
  WeightMatrix w = GetMatrix(dtype, rows);
  // Packed bf16, f16 or FP8: the same random values read as 16-row groups (rows are multiples of
  // 16; random FP8 bytes of magnitude <= 448 hold no NaN, which packed FP8 may not).
  w.layout16 = layout;
  std::vector<float> x(static_cast<size_t>(n_tokens * cols), 0.5f);
  std::vector<float> y(static_cast<size_t>(n_tokens * rows));
  for (auto _ : state) {
    MatMul(exec, w, x.data(), n_tokens, y.data());
    benchmark::DoNotOptimize(y.data());
  }
  // Q8: one int8 per value plus a 2-byte scale per 32 values.
  const double weight_bytes =
      dtype == DType::kI8
          ? static_cast<double>(rows * cols) * (1.0 + 2.0 / kQ8Block)
          : static_cast<double>(rows * cols) * static_cast<double>(DTypeSize(dtype));
  state.counters["weight_GB/s"] = benchmark::Counter(
      weight_bytes * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(rows * cols * n_tokens) *
                                                     static_cast<double>(state.iterations()) / 1e9,
                                                 benchmark::Counter::kIsRate);
}

void Shapes(benchmark::internal::Benchmark* b) {
  // Decode: 1 token through 262,144 x 2048 weights (1 GiB in bf16, 0.5 GiB in Q8: several times
  // any L3, so the figure is DRAM bandwidth) and through 192 x 2048 (in L2: the kernel's own
  // rate); batched decode of 4, 8 and 16 sequences: 4, 8 or 16 tokens through 32,768 x 2048 (an
  // lm_head-sized stream); a prefill's MoE expert: 48 or 53 tokens (token tiles of 6 and a last
  // one of 5); prefill: 2048 x 2048, 512 tokens.
  for (int threads : {1, 2}) {
    b->Args({262144, 1, threads});
    b->Args({192, 1, threads});
    b->Args({32768, 8, threads});
    b->Args({2048, 16, threads});
    b->Args({2048, 48, threads});
    b->Args({2048, 53, threads});
    b->Args({32768, 4, threads});
    b->Args({32768, 48, threads});
    b->Args({32768, 16, threads});
    b->Args({2048, 512, threads});
  }
  b->ArgNames({"rows", "tokens", "threads"})->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_MatMul, scalar_bf16, Isa::kScalar, DType::kBF16)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx2_bf16, Isa::kAvx2, DType::kBF16)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx2_bf16packed, Isa::kAvx2, DType::kBF16, Layout16::kPacked16)
    ->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx512_bf16, Isa::kAvx512, DType::kBF16)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx512_bf16packed, Isa::kAvx512, DType::kBF16, Layout16::kPacked16)
    ->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx512bf16dot_bf16, Isa::kAvx512Bf16, DType::kBF16)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx512bf16dot_bf16packed, Isa::kAvx512Bf16, DType::kBF16,
                  Layout16::kPacked16)
    ->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, amx_bf16packed, Isa::kAmx, DType::kBF16, Layout16::kPacked16)
    ->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx512_f32, Isa::kAvx512, DType::kF32)->Apply(Shapes);
// f16: row-major (widened by F16C in registers, or per block of rows for many tokens) and packed
// at load (--load copy: the same 16-row groups as bf16, each column pair's two columns in turn).
BENCHMARK_CAPTURE(BM_MatMul, avx2_f16, Isa::kAvx2, DType::kF16)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx2_f16packed, Isa::kAvx2, DType::kF16, Layout16::kPacked16)
    ->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx512_f16packed, Isa::kAvx512, DType::kF16, Layout16::kPacked16)
    ->Apply(Shapes);
// FP8 E4M3 with 128 x 128 block scales (DeepSeek-V3's release format): widened through F16C and
// scaled in registers (up to 8 tokens), or per block of rows.
BENCHMARK_CAPTURE(BM_MatMul, avx2_fp8, Isa::kAvx2, DType::kF8E4M3)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx512_fp8, Isa::kAvx512, DType::kF8E4M3)->Apply(Shapes);
// `--isa fast`: widened exactly to bf16 in registers, against activations rounded to bf16 after
// their block scale, by vdpbf16ps (KernelTable::matmul_rows_f8_bf16).
BENCHMARK_CAPTURE(BM_MatMul, avx512bf16dot_fp8, Isa::kAvx512Bf16, DType::kF8E4M3)->Apply(Shapes);
// The same on FP8 packed at load (16-row groups of column pairs, as `--load copy` packs them for
// this table): 4 groups' pairs widened to the bf16 pair GEMM's column vectors.
BENCHMARK_CAPTURE(BM_MatMul, avx512bf16dot_fp8packed, Isa::kAvx512Bf16, DType::kF8E4M3,
                  Layout16::kPacked16)
    ->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, scalar_q8, Isa::kScalar, DType::kI8)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx2_q8, Isa::kAvx2, DType::kI8)->Apply(Shapes);
BENCHMARK_CAPTURE(BM_MatMul, avx512_q8, Isa::kAvx512, DType::kI8)->Apply(Shapes);
// AMX-INT8 tiles from 16 tokens (below: the VNNI kernel), where the CPU has them.
BENCHMARK_CAPTURE(BM_MatMul, amx_q8, Isa::kAmx, DType::kI8, Layout16::kRowMajor, true)
    ->Apply(Shapes);

// The weight products of one int8 decode step of the bench model (DeepSeek-V2-Lite shapes, 4
// layers: 1 dense + 3 MoE with 6 routed and 2 shared experts; lm_head 102,400 rows), as the
// engine issues them: one MatMulBatch per step of a layer, each reading its own rows. Every
// matrix is approximated by as many 2,048-column rows as it has bytes, cut from one huge-page
// buffer in order. Reports GB/s of weights, to compare with `BM_MatMul` (one long stream) and
// with `mlarun bench` decode (which adds everything that is not a product).
void BM_DecodeStepQ8(benchmark::State& state, Isa isa) {
  if (!IsaSupported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const int64_t per_head = int64_t{512} * 128 / kCols;  // W_uk^T, W_uv: [512 x 128] per head
  // Rows of each batch: a list of jobs (rows each).
  std::vector<std::vector<int64_t>> batches;
  for (int layer = 0; layer < 4; ++layer) {
    batches.push_back({3072});                              // q_proj
    batches.push_back({576});                               // kv_a_proj_with_mqa
    batches.push_back(std::vector<int64_t>(16, per_head));  // W_uk^T per head
    batches.push_back(std::vector<int64_t>(16, per_head));  // W_uv per head
    batches.push_back({2048});                              // o_proj
    if (layer == 0) {
      batches.push_back({10944, 10944});  // dense gate, up
      batches.push_back({10944});         // down [2048 x 10944]
    } else {
      batches.push_back({256});  // router ([64 x 2048] bf16 or f32 in the engine: 256-512 KB)
      std::vector<int64_t> gate_up(12, 1408);
      gate_up.push_back(2816);  // shared experts' gate, up
      gate_up.push_back(2816);
      batches.push_back(gate_up);
      std::vector<int64_t> down(6, 1408);  // [2048 x 1408] each
      down.push_back(2816);                // shared down [2048 x 2816]
      batches.push_back(down);
    }
  }
  batches.push_back({102400});  // lm_head
  int64_t total_rows = 0;
  for (const auto& b : batches) {
    for (int64_t r : b) total_rows += r;
  }
  const WeightMatrix w = GetMatrix(DType::kI8, (total_rows + 15) / 16 * 16);
  ThreadPool pool(static_cast<int>(state.range(0)));
  Exec exec{pool, GetKernelTable(isa)};
  std::vector<float> x(kCols, 0.5f);
  std::vector<float> y(static_cast<size_t>(total_rows));
  std::vector<std::vector<MatMulJob>> jobs;
  int64_t row = 0;
  for (const auto& b : batches) {
    jobs.emplace_back();
    for (int64_t r : b) {
      jobs.back().push_back({&w, row, row + r, x.data(), 1, y.data() + row});
      row += r;
    }
  }
  for (auto _ : state) {
    for (const auto& batch : jobs) MatMulBatch(exec, batch);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["products"] = static_cast<double>(jobs.size());
  state.counters["weight_GB/s"] =
      benchmark::Counter(static_cast<double>(total_rows * kCols) * (1.0 + 2.0 / kQ8Block) *
                             static_cast<double>(state.iterations()) / 1e9,
                         benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_DecodeStepQ8, avx512, Isa::kAvx512)
    ->Arg(2)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DecodeStepQ8, avx2, Isa::kAvx2)
    ->Arg(2)
    ->ArgName("threads")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The GEMM of prefill attention (one thread): S = Q_h K_h^T for a tile of m (32, 128) queries
// against 4,608 cached positions (dk 192), and O = P V_h (k 4,608, dv 128).
// The routed experts' gate and up projections of one MoE decode step of 16 sequences: 64 experts
// of 1,408 x 2,048 (DeepSeek-V2-Lite), each token routed to 6 distinct ones at random, so ~51
// experts run with 1-4 tokens each, as one MatMulBatch. Reports GB/s of the weights read (Q8:
// 34 bytes per 32 values). `steps` > 1 cycles through that many independent routings, so that a
// step's experts mostly come from memory, as in a model's decode (one step of 1 token reads 37 MB
// of the 392 MB of experts).
void BM_ExpertBatch(benchmark::State& state, Isa isa) {
  if (!IsaSupported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  constexpr int kExperts = 64;
  constexpr int64_t kInter = 1408;
  constexpr int kTopK = 6;
  const int64_t n_tokens = state.range(0);
  const int64_t n_steps = state.range(2);
  const WeightMatrix w = GetMatrix(DType::kI8, int64_t{kExperts} * 2 * kInter);
  ThreadPool pool(static_cast<int>(state.range(1)));
  Exec exec{pool, GetKernelTable(isa)};
  Rng rng(5);
  std::vector<float> x(static_cast<size_t>(n_tokens * kTopK * kCols), 0.25f);
  std::vector<float> y(static_cast<size_t>(n_tokens * kTopK * 2 * kInter));
  std::vector<std::vector<MatMulJob>> steps(static_cast<size_t>(n_steps));
  double bytes = 0.0;  // over all steps
  for (std::vector<MatMulJob>& jobs : steps) {
    std::vector<std::vector<int64_t>> tokens_of(kExperts);
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::vector<int> picked;
      while (static_cast<int>(picked.size()) < kTopK) {
        const int e = static_cast<int>(rng.NextU64() % kExperts);
        if (std::find(picked.begin(), picked.end(), e) == picked.end()) picked.push_back(e);
      }
      for (int e : picked) tokens_of[static_cast<size_t>(e)].push_back(t);
    }
    int64_t row = 0;
    for (int e = 0; e < kExperts; ++e) {
      const int64_t n = static_cast<int64_t>(tokens_of[static_cast<size_t>(e)].size());
      if (n == 0) continue;
      const int64_t base = int64_t{e} * 2 * kInter;
      jobs.push_back(
          {&w, base, base + kInter, x.data() + row * kCols, n, y.data() + row * 2 * kInter});
      jobs.push_back({&w, base + kInter, base + 2 * kInter, x.data() + row * kCols, n,
                      y.data() + row * 2 * kInter + n * kInter});
      row += n;
      bytes += 2.0 * kInter * kCols * (1.0 + 2.0 / kQ8Block);
    }
  }
  int64_t step = 0;
  for (auto _ : state) {
    MatMulBatch(exec, steps[static_cast<size_t>(step)]);
    step = (step + 1) % n_steps;
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["experts"] = static_cast<double>(steps.front().size()) / 2.0;  // 2 jobs each
  state.counters["weight_GB/s"] = benchmark::Counter(
      bytes / static_cast<double>(n_steps) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(BM_ExpertBatch, avx512_q8, Isa::kAvx512)
    ->Args({1, 2, 1})
    ->Args({1, 2, 16})
    ->Args({4, 2, 1})
    ->Args({16, 2, 1})
    ->Args({16, 2, 16})
    ->ArgNames({"tokens", "threads", "steps"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ExpertBatch, avx2_q8, Isa::kAvx2)
    ->Args({16, 2, 1})
    ->ArgNames({"tokens", "threads", "steps"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_AttentionGemm(benchmark::State& state, Isa isa) {
  if (!IsaSupported(isa)) {
    state.SkipWithError("ISA not supported on this CPU");
    return;
  }
  const KernelTable& k = GetKernelTable(isa);
  const int64_t m = state.range(2), n = state.range(0), depth = state.range(1);
  Rng rng(2);
  std::vector<float> a(static_cast<size_t>(m * depth)), b(static_cast<size_t>(depth * n));
  std::vector<float> c(static_cast<size_t>(m * n));
  for (float& v : a) v = rng.NextSymmetric();
  for (float& v : b) v = rng.NextSymmetric();
  for (auto _ : state) {
    k.gemm(m, n, depth, a.data(), depth, b.data(), n, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2.0 * static_cast<double>(m * n * depth) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}

void GemmShapes(benchmark::internal::Benchmark* b) {
  b->Args({4608, 192, 32})->Args({4608, 192, 128})->Args({128, 4608, 32})->Args({128, 4608, 128});
  b->ArgNames({"n", "k", "m"})->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_AttentionGemm, scalar, Isa::kScalar)->Apply(GemmShapes);
BENCHMARK_CAPTURE(BM_AttentionGemm, avx2, Isa::kAvx2)->Apply(GemmShapes);
BENCHMARK_CAPTURE(BM_AttentionGemm, avx512, Isa::kAvx512)->Apply(GemmShapes);

// The same shapes as bf16 pair GEMMs (`--isa fast` prefill attention; vdpbf16ps, or AMX tiles):
// k counts bf16 values (k / 2 pair words), FLOP as for the float32 GEMM.
void BM_AttentionGemmBf16(benchmark::State& state, Isa isa) {
  const KernelTable& k = GetKernelTable(isa);
  if (!IsaSupported(isa) || k.gemm_bf16_pairs == nullptr) {
    state.SkipWithError("no bf16 GEMM on this CPU");
    return;
  }
  const int64_t m = state.range(2), n = state.range(0), pairs = state.range(1) / 2;
  Rng rng(2);
  std::vector<uint32_t> a(static_cast<size_t>(m * pairs)), b(static_cast<size_t>(pairs * n));
  std::vector<float> c(static_cast<size_t>(m * n));
  // Pairs of bf16 values in [-1, 1): sign, exponent 2^-1 and 7 random mantissa bits per half.
  for (uint32_t& v : a) v = static_cast<uint32_t>(rng.NextU64()) & 0xbf7fbf7fu;
  for (uint32_t& v : b) v = static_cast<uint32_t>(rng.NextU64()) & 0xbf7fbf7fu;
  for (auto _ : state) {
    k.gemm_bf16_pairs(m, n, pairs, a.data(), pairs, b.data(), n, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      4.0 * static_cast<double>(m * n * pairs) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}
BENCHMARK_CAPTURE(BM_AttentionGemmBf16, avx512bf16, Isa::kAvx512Bf16)->Apply(GemmShapes);
BENCHMARK_CAPTURE(BM_AttentionGemmBf16, amx, Isa::kAmx)->Apply(GemmShapes);

}  // namespace
}  // namespace mlarun
