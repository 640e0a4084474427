// Aggregate decode throughput of the serving engine with 1, 4 and 16 concurrent sequences: every
// engine step decodes all running sequences in one batched pass, so the weights are read once per
// step for the whole batch. Usage:
//   build/bin/engine_bench --model=DIR [--threads=N] [--decode-tokens=N] [--weights=int8]
//   [--load=mmap] [--prefill-at-depth]
//                          [--benchmark_...]
// (DIR e.g. from `mlarun make-model --preset bench-v2-lite --dtype bf16`). Reports decode_tok_s
// (all sequences together, decode passes only), ms per step and the wall time per request.
// PrefillAtDepth/depth/new times one forward pass of `new` prompt tokens after `depth` cached
// ones (a chat turn, a prefix-cache hit) by each MLA path: naive_ms, absorbed_ms, auto_ms.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/isa.h"
#include "runtime/engine.h"
#include "runtime/generator.h"

namespace mlarun {
namespace {

struct BenchSetup {
  std::string model_dir;
  int threads = 0;
  int decode_tokens = 32;
  int prompt_tokens = 32;
  WeightFormat weights = WeightFormat::kAsLoaded;
  FileLoad load = FileLoad::kCopy;  // as `mlarun serve` loads by default
  bool prefill_at_depth = false;    // also register PrefillAtDepth (prefills 5,120 tokens first)
};

void BM_BatchedDecode(benchmark::State& state, const BenchSetup* setup, const Model* model,
                      ThreadPool* pool) {
  const int n_seqs = static_cast<int>(state.range(0));
  // The kernels `mlarun serve` uses by default (`--isa fast`: FastestKernelTable).
  ScratchArena scratch;  // forward-pass temporaries, reused across calls
  Exec exec{*pool, FastestKernelTable(), &scratch};
  KvCache cache(model->MakeKvLayout(DType::kBF16), {.block_size = 64, .budget_bytes = 1ull << 30});
  Engine engine(*model, exec, cache, {.prefix_caching = false});
  Rng rng(1);
  const int64_t vocab = model->config().vocab_size;
  EngineStats stats;
  for (auto _ : state) {
    for (int s = 0; s < n_seqs; ++s) {
      EngineRequest r{.max_tokens = setup->decode_tokens + 1};
      for (int i = 0; i < setup->prompt_tokens; ++i) {
        r.prompt.push_back(static_cast<int32_t>(rng.NextU64() % static_cast<uint64_t>(vocab)));
      }
      engine.Submit(std::move(r));
    }
    while (engine.Step()) {
    }
    engine.Step();
    stats = engine.Stats();
    state.SetIterationTime(stats.decode_seconds);
  }
  state.counters["decode_tok_s"] = static_cast<double>(stats.decode_tokens) / stats.decode_seconds;
  state.counters["ms_per_step"] =
      1e3 * stats.decode_seconds / static_cast<double>(stats.decode_tokens / n_seqs);
  state.counters["prefill_tok_s"] =
      static_cast<double>(stats.prefill_tokens) / stats.prefill_seconds;
  state.counters["seqs"] = n_seqs;
}

// A sequence of `depth` random tokens prefilled once, shared by the PrefillAtDepth runs (each
// forks it, so the context is not recomputed per measurement).
struct CachedContext {
  CachedContext(const Model& model, ThreadPool& pool, int64_t depth)
      : exec{pool, FastestKernelTable(), &scratch},
        cache(model.MakeKvLayout(DType::kBF16), {.block_size = 64, .budget_bytes = 1ull << 30}),
        depth(depth) {
    Rng rng(static_cast<uint64_t>(depth));
    const int64_t vocab = model.config().vocab_size;
    tokens.resize(static_cast<size_t>(depth + kMaxNew));
    for (int32_t& t : tokens)
      t = static_cast<int32_t>(rng.NextU64() % static_cast<uint64_t>(vocab));
    seq = cache.AddSequence();
    Prefill(model, exec, cache, seq, std::span<const int32_t>(tokens).first(depth),
            {.prefill_chunk = 512});
  }
  static constexpr int64_t kMaxNew = 256;
  ScratchArena scratch;
  Exec exec;
  KvCache cache;
  int64_t depth;
  std::vector<int32_t> tokens;
  int32_t seq = -1;
};

// One pass of `new` tokens after the context by each MLA path in turn (naive, absorbed, auto), so
// the VM's drift hits all three alike; reports each path's ms per pass.
void BM_PrefillAtDepth(benchmark::State& state, const Model* model, CachedContext* context) {
  const int64_t n_new = state.range(0);
  const int64_t depth = context->depth;
  std::vector<float> logits(static_cast<size_t>(model->config().vocab_size));
  std::vector<BatchToken> batch;
  constexpr MlaPath kPaths[] = {MlaPath::kNaive, MlaPath::kAbsorbed, MlaPath::kAuto};
  double seconds[3] = {0, 0, 0};
  for (auto _ : state) {
    for (int p = 0; p < 3; ++p) {
      const int32_t seq = context->cache.ForkSequence(context->seq, depth);
      batch.clear();
      for (int64_t i = 0; i < n_new; ++i) {
        batch.push_back({.token = context->tokens[static_cast<size_t>(depth + i)],
                         .seq = seq,
                         .pos = depth + i,
                         .want_logits = i == n_new - 1});
      }
      ReserveOrThrow(context->cache, seq, n_new);
      const auto start = std::chrono::steady_clock::now();
      model->Forward(context->exec, context->cache, batch, {.mla_path = kPaths[p]}, logits.data());
      seconds[p] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      context->cache.RemoveSequence(seq);
    }
  }
  const double passes = static_cast<double>(state.iterations());
  state.counters["naive_ms"] = 1e3 * seconds[0] / passes;
  state.counters["absorbed_ms"] = 1e3 * seconds[1] / passes;
  state.counters["auto_ms"] = 1e3 * seconds[2] / passes;
}

}  // namespace
}  // namespace mlarun

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  mlarun::BenchSetup setup;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--model=", 0) == 0) setup.model_dir = arg.substr(8);
    if (arg.rfind("--threads=", 0) == 0) setup.threads = std::stoi(arg.substr(10));
    if (arg.rfind("--decode-tokens=", 0) == 0) setup.decode_tokens = std::stoi(arg.substr(16));
    if (arg == "--weights=int8") setup.weights = mlarun::WeightFormat::kInt8;
    if (arg == "--load=mmap") setup.load = mlarun::FileLoad::kMmap;
    if (arg == "--prefill-at-depth") setup.prefill_at_depth = true;
  }
  if (setup.model_dir.empty()) {
    std::fprintf(stderr,
                 "usage: engine_bench --model=DIR [--threads=N] [--decode-tokens=N] "
                 "[--weights=int8] [--load=mmap] [--prefill-at-depth]\n");
    return 1;
  }
  // As `mlarun serve` loads: with copied files and bf16 kernels, bf16 matrices packed for them.
  const bool pack_16bit = mlarun::Pack16BitFor(setup.load, mlarun::FastestKernelTable());
  const std::unique_ptr<mlarun::Model> model =
      mlarun::Model::Load(setup.model_dir, {.weights = setup.weights,
                                            .file_load = setup.load,
                                            .pack_16bit = pack_16bit,
                                            .kernels = &mlarun::FastestKernelTable()});
  mlarun::ThreadPool pool(setup.threads);
  benchmark::RegisterBenchmark("BatchedDecode", mlarun::BM_BatchedDecode, &setup, model.get(),
                               &pool)
      ->Arg(1)
      ->Arg(4)
      ->Arg(16)
      ->Iterations(1)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  // New tokens after a context of 1,024 or 4,096 tokens: a chat turn, a prefix-cache hit.
  std::vector<std::unique_ptr<mlarun::CachedContext>> contexts;
  if (setup.prefill_at_depth) {
    for (const int64_t depth : {1024, 4096}) {
      contexts.push_back(std::make_unique<mlarun::CachedContext>(*model, pool, depth));
      benchmark::RegisterBenchmark(("PrefillAtDepth/depth:" + std::to_string(depth)).c_str(),
                                   mlarun::BM_PrefillAtDepth, model.get(), contexts.back().get())
          ->ArgsProduct({{8, 32, 64, 128, 256}})
          ->ArgNames({"new"})
          ->Iterations(2)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
