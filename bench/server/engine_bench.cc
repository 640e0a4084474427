// Aggregate decode throughput of the serving engine with 1, 4 and 16 concurrent sequences: every
// engine step decodes all running sequences in one batched pass, so the weights are read once per
// step for the whole batch. Usage:
//   build/bin/engine_bench --model=DIR [--threads=N] [--decode-tokens=N] [--weights=int8]
//   [--load=mmap]
//                          [--benchmark_...]
// (DIR e.g. from `mlarun make-model --preset bench-v2-lite --dtype bf16`). Reports decode_tok_s
// (all sequences together, decode passes only), ms per step and the wall time per request.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "core/rng.h"
#include "kernels/isa.h"
#include "runtime/engine.h"

namespace mlarun {
namespace {

struct BenchSetup {
  std::string model_dir;
  int threads = 0;
  int decode_tokens = 32;
  int prompt_tokens = 32;
  WeightFormat weights = WeightFormat::kAsLoaded;
  FileLoad load = FileLoad::kCopy;  // as `mlarun serve` loads by default
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
  }
  if (setup.model_dir.empty()) {
    std::fprintf(stderr,
                 "usage: engine_bench --model=DIR [--threads=N] [--decode-tokens=N] "
                 "[--weights=int8] [--load=mmap]\n");
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
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
