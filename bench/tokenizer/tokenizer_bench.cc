// Benchmarks the tokenizer on the real DeepSeek-V3 tokenizer.json (path in MLARUN_TOKENIZER_JSON):
// encoding ~1 MB of mixed English/code/CJK/emoji text (the corpus's text lines, each followed by
// "\n", repeated until 1,000,000 bytes; tools/tokenizer_ref/bench.js builds the same text for
// Hugging Face tokenizers), decoding, streaming and loading. Reports bytes/s and tokens/s.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mlarun {
namespace {

constexpr size_t kBenchTextBytes = 1000000;

std::string BuildBenchText(const std::string& corpus_path) {
  std::ifstream in(corpus_path);
  if (!in) {
    throw std::runtime_error("cannot read " + corpus_path);
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) {
      continue;
    }
    const nlohmann::json value = nlohmann::json::parse(line);
    if (value.is_string()) {
      lines.push_back(value.get<std::string>());  // skip raw-byte lines
    }
  }
  std::string text;
  for (size_t i = 0; text.size() < kBenchTextBytes; ++i) {
    text += lines[i % lines.size()];
    text += '\n';
  }
  return text;
}

// Everything the benchmarks share, owned by `main` and captured by reference.
struct BenchState {
  std::string tokenizer_path;
  std::string text;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int32_t> ids;  // `text` encoded
};

void SetRates(benchmark::State& state, size_t bytes, size_t tokens) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(tokens),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tokens"] = static_cast<double>(tokens);
}

// Encoding with the piece cache warm (as in steady-state serving; HF tokenizers caches too).
void EncodeWarm(benchmark::State& state, BenchState& bench) {
  size_t tokens = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = bench.tokenizer->Encode(bench.text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  SetRates(state, bench.text.size(), tokens);
}

// Encoding right after loading, so every distinct piece is BPE-merged once (the load is untimed).
void EncodeCold(benchmark::State& state, BenchState& bench) {
  size_t tokens = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto fresh = std::make_unique<Tokenizer>(Tokenizer::FromFile(bench.tokenizer_path));
    state.ResumeTiming();
    const std::vector<int32_t> ids = fresh->Encode(bench.text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
    state.PauseTiming();
    fresh.reset();
    state.ResumeTiming();
  }
  SetRates(state, bench.text.size(), tokens);
}

// One short chat prompt per call: per-call overhead dominates.
void EncodeChatPrompt(benchmark::State& state, BenchState& bench) {
  const std::vector<ChatMessage> chat = {
      {"system", "You are a helpful assistant."},
      {"user", "Write a Python function that returns the n-th Fibonacci number, and explain it."}};
  const std::string prompt = RenderChat(ChatFormat::kDeepSeekV3, chat);
  size_t tokens = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = bench.tokenizer->Encode(prompt);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  SetRates(state, prompt.size(), tokens);
}

void Decode(benchmark::State& state, BenchState& bench) {
  for (auto _ : state) {
    const std::string text = bench.tokenizer->Decode(bench.ids);
    benchmark::DoNotOptimize(text.data());
  }
  SetRates(state, bench.text.size(), bench.ids.size());
}

void StreamDecode(benchmark::State& state, BenchState& bench) {
  for (auto _ : state) {
    StreamDecoder stream(*bench.tokenizer);
    size_t bytes = 0;
    for (const int32_t id : bench.ids) {
      bytes += stream.Feed(id).size();
    }
    bytes += stream.Flush().size();
    benchmark::DoNotOptimize(bytes);
  }
  SetRates(state, bench.text.size(), bench.ids.size());
}

void Load(benchmark::State& state, BenchState& bench) {
  for (auto _ : state) {
    const Tokenizer tokenizer = Tokenizer::FromFile(bench.tokenizer_path);
    benchmark::DoNotOptimize(tokenizer.vocab_size());
  }
}

}  // namespace
}  // namespace mlarun

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  const char* path = std::getenv("MLARUN_TOKENIZER_JSON");
  if (path == nullptr || *path == '\0') {
    std::fprintf(stderr,
                 "tokenizer_bench: skipped: set MLARUN_TOKENIZER_JSON to a DeepSeek-V3 "
                 "tokenizer.json (tools/tokenizer_ref/run_bench.sh does it)\n");
    return 0;
  }
  const char* corpus = std::getenv("MLARUN_TOKENIZER_CORPUS");
  mlarun::BenchState bench;
  bench.tokenizer_path = path;
  bench.text = mlarun::BuildBenchText(corpus != nullptr ? corpus : MLARUN_TOKENIZER_CORPUS);
  bench.tokenizer = std::make_unique<mlarun::Tokenizer>(mlarun::Tokenizer::FromFile(path));
  bench.ids = bench.tokenizer->Encode(bench.text);
  std::fprintf(stderr, "tokenizer_bench: %zu bytes -> %zu tokens\n", bench.text.size(),
               bench.ids.size());
  auto add = [&](const char* name, void (*function)(benchmark::State&, mlarun::BenchState&)) {
    return benchmark::RegisterBenchmark(
        name, [&bench, function](benchmark::State& state) { function(state, bench); });
  };
  add("Encode1MB/warm_cache", mlarun::EncodeWarm)->Unit(benchmark::kMillisecond);
  add("Encode1MB/cold_cache", mlarun::EncodeCold)->Unit(benchmark::kMillisecond)->Iterations(5);
  add("EncodeChatPrompt", mlarun::EncodeChatPrompt)->Unit(benchmark::kMicrosecond);
  add("Decode1MB", mlarun::Decode)->Unit(benchmark::kMillisecond);
  add("StreamDecode1MB", mlarun::StreamDecode)->Unit(benchmark::kMillisecond);
  add("LoadTokenizerJson", mlarun::Load)->Unit(benchmark::kMillisecond)->Iterations(3);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
