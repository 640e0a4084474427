// `mlarun generate`: prefill a prompt, sample new tokens, print them and a summary line.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "cli/common.h"
#include "core/error.h"
#include "runtime/generator.h"

namespace mlarun::cli {

namespace {

struct GenerateArgs {
  ModelArgs model;
  KvArgs kv;
  std::string prompt_ids;
  int n = 32;
  SamplerOptions sampling;
  bool expert_stats = false;
  bool verbose = false;
  bool ignore_eos = false;
};

// Prints, per MoE layer, min / max / coefficient of variation of tokens per routed expert.
void PrintExpertStats(const ExpertStats& stats, bool verbose) {
  std::fprintf(stderr, "expert load (tokens per routed expert, per MoE layer):\n");
  for (size_t layer = 0; layer < stats.counts.size(); ++layer) {
    const auto& counts = stats.counts[layer];
    if (counts.empty()) continue;
    int64_t total = 0;
    int64_t min_count = counts[0];
    int64_t max_count = counts[0];
    for (int64_t c : counts) {
      total += c;
      min_count = std::min(min_count, c);
      max_count = std::max(max_count, c);
    }
    const double mean = static_cast<double>(total) / static_cast<double>(counts.size());
    double var = 0.0;
    for (int64_t c : counts) var += (static_cast<double>(c) - mean) * (static_cast<double>(c) - mean);
    var /= static_cast<double>(counts.size());
    const double cv = mean > 0 ? std::sqrt(var) / mean : 0.0;
    std::fprintf(stderr, "  layer %2zu: %lld assignments, min %lld, max %lld, mean %.2f, cv %.3f\n",
                 layer, static_cast<long long>(total), static_cast<long long>(min_count),
                 static_cast<long long>(max_count), mean, cv);
    if (verbose) {
      std::fprintf(stderr, "    histogram:");
      for (int64_t c : counts) std::fprintf(stderr, " %lld", static_cast<long long>(c));
      std::fprintf(stderr, "\n");
    }
  }
}

int RunGenerate(const GenerateArgs& args) {
  ThreadPool pool(args.model.threads);
  Exec exec{pool, SelectKernels(args.model)};
  const std::unique_ptr<Model> model = LoadModel(args.model);
  const std::unique_ptr<KvCache> cache = MakeKvCache(*model, args.kv);
  const std::vector<int32_t> prompt = ParseIdList(args.prompt_ids, "--prompt-ids");
  const int32_t seq = cache->AddSequence();
  ExpertStats stats;
  GenerateOptions options{.max_new_tokens = args.n, .sampling = args.sampling};
  if (!args.ignore_eos) {
    for (int64_t eos : model->config().eos_token_ids) options.stop_ids.push_back(static_cast<int32_t>(eos));
  }
  if (args.expert_stats) options.expert_stats = &stats;
  bool first = true;
  options.on_token = [&](int32_t token) {
    std::printf("%s%d", first ? "" : ",", token);
    std::fflush(stdout);
    first = false;
    return true;
  };
  const GenerateResult result = Generate(*model, exec, *cache, seq, prompt, options);
  std::printf("\n");
  const double prefill_tps = static_cast<double>(result.prompt_tokens) / std::max(result.prefill_seconds, 1e-9);
  const size_t n_decoded = result.tokens.size() > 0 ? result.tokens.size() - 1 : 0;
  const double decode_tps = static_cast<double>(n_decoded) / std::max(result.decode_seconds, 1e-9);
  std::fprintf(stderr,
               "prompt tokens: %lld | prefill: %.1f tok/s | generated: %zu (%s) | decode: %.1f tok/s"
               " | KV bytes: %zu used, %zu allocated\n",
               static_cast<long long>(result.prompt_tokens), prefill_tps, result.tokens.size(),
               result.finish_reason.c_str(), decode_tps, cache->UsedBytes(), cache->AllocatedBytes());
  if (args.expert_stats) PrintExpertStats(stats, args.verbose);
  return 0;
}

}  // namespace

void RegisterGenerate(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate tokens from a prompt");
  AddModelOptions(*cmd, args->model);
  AddKvOptions(*cmd, args->kv, "f32");
  cmd->add_option("--prompt-ids", args->prompt_ids, "Prompt token ids, e.g. \"1,2,3\"")->required();
  cmd->add_option("-n,--max-tokens", args->n, "Tokens to generate")->capture_default_str();
  cmd->add_option("--temperature", args->sampling.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", args->sampling.top_k, "0 = off")->capture_default_str();
  cmd->add_option("--top-p", args->sampling.top_p, "1 = off")->capture_default_str();
  cmd->add_option("--min-p", args->sampling.min_p, "0 = off")->capture_default_str();
  cmd->add_option("--repeat-penalty", args->sampling.repetition_penalty, "1 = off")->capture_default_str();
  cmd->add_option("--presence-penalty", args->sampling.presence_penalty, "0 = off")->capture_default_str();
  cmd->add_option("--frequency-penalty", args->sampling.frequency_penalty, "0 = off")->capture_default_str();
  cmd->add_option("--seed", args->sampling.seed, "Sampling seed")->capture_default_str();
  cmd->add_flag("--ignore-eos", args->ignore_eos, "Do not stop at EOS");
  cmd->add_flag("--expert-stats", args->expert_stats, "Print tokens per routed expert per MoE layer");
  cmd->add_flag("--verbose,-v", args->verbose, "With --expert-stats: full histograms");
  cmd->callback([args, exit_code] { *exit_code = RunGenerate(*args); });
}

}  // namespace mlarun::cli
