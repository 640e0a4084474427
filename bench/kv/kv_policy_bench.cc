// Decode speed and KV memory vs context depth, full cache vs bounded policies, on a generated
// model (tiny-v3 by default; MLARUN_BENCH_PRESET overrides). Counters: tok/s, KV bytes held.
//   build/bin/kv_policy_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "model/model.h"
#include "model/synthetic.h"
#include "runtime/generator.h"

namespace mlarun {
namespace {

const Model& BenchModel() {
  static const std::unique_ptr<Model> model = [] {
    const char* preset = std::getenv("MLARUN_BENCH_PRESET");
    const std::string name = preset != nullptr ? preset : "tiny-v3";
    const std::string dir =
        (std::filesystem::temp_directory_path() / ("mlarun_bench_" + name)).string();
    if (!std::filesystem::exists(dir + "/config.json")) {
      WriteSyntheticModel({.preset = name, .dtype = DType::kBF16}, dir);
    }
    return Model::Load(dir);
  }();
  return *model;
}

void BM_Decode(benchmark::State& state, const std::string& policy) {
  const Model& model = BenchModel();
  const int64_t depth = state.range(0);
  ThreadPool pool(static_cast<int>(state.range(1)));
  Exec exec{pool, GetKernelTable(BestIsa())};
  KvCache cache(model.MakeKvLayout(DType::kBF16),
                {.block_size = 64, .budget_bytes = 8ull << 30, .policy = ParseKvPolicy(policy)});
  const int32_t seq = cache.AddSequence();
  std::vector<int32_t> prompt(static_cast<size_t>(depth));
  for (int64_t i = 0; i < depth; ++i)
    prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7 + 3) % 500);
  std::vector<float> logits = Prefill(model, exec, cache, seq, prompt, {.prefill_chunk = 512});
  int32_t token = 1;
  for (auto _ : state) {
    ReserveOrThrow(cache, seq, 1);
    const BatchToken next{
        .token = token, .seq = seq, .pos = cache.Length(seq), .want_logits = true};
    model.Forward(exec, cache, std::span<const BatchToken>(&next, 1), {}, logits.data());
    token = (token * 31 + 7) % 500;
  }
  state.counters["tok_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["kv_bytes"] = static_cast<double>(cache.UsedBytes());
  state.counters["kv_alloc_bytes"] = static_cast<double>(cache.AllocatedBytes());
}

// A fixed number of decoded tokens per run, so the context stays within [depth, depth + 256)
// (with a time-based iteration count the context would drift by thousands of tokens) and the
// prefill of `depth` tokens runs once per benchmark.
constexpr int64_t kDecodedTokens = 256;

void Depths(benchmark::internal::Benchmark* b) {
  for (int64_t depth : {512, 2048, 8192, 16384}) b->Args({depth, 2});
  b->ArgNames({"depth", "threads"})
      ->Unit(benchmark::kMillisecond)
      ->Iterations(kDecodedTokens)
      ->UseRealTime();
}

BENCHMARK_CAPTURE(BM_Decode, full, std::string("full"))->Apply(Depths);
BENCHMARK_CAPTURE(BM_Decode, window512_sinks4, std::string("window:512,sinks:4"))->Apply(Depths);
BENCHMARK_CAPTURE(BM_Decode, window512_sinks4_compress16,
                  std::string("window:512,sinks:4,compress:16"))
    ->Apply(Depths);

}  // namespace
}  // namespace mlarun

BENCHMARK_MAIN();
