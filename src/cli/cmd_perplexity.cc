// `mlarun perplexity`: perplexity of a text file. Protocol (shared with tools/train/evaluate.py):
// ids = encode(text) without BOS; consecutive non-overlapping chunks of `--context` tokens (a last
// chunk with >= 2 tokens is kept); every chunk starts from an empty cache at position 0;
// NLL(j) = -log p(id_j | ids_<j of its chunk) for j >= 1; perplexity = exp(sum NLL / count).
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/progress.h"
#include "cli/text_io.h"
#include "core/error.h"
#include "runtime/generator.h"

namespace mlarun::cli {

namespace {

struct PerplexityArgs {
  ModelArgs model;
  KvArgs kv;
  std::string file;
  int64_t context = 256;
  int64_t max_chunks = 0;
  bool expert_stats = false;
  bool verbose = false;
  bool json = false;
};

int RunPerplexity(const PerplexityArgs& args) {
  if (args.context < 2) throw Error("--context must be at least 2");
  ThreadPool pool(args.model.threads);
  ScratchArena scratch;  // forward-pass temporaries, reused across calls
  Exec exec{pool, SelectKernels(args.model, "auto"),
            &scratch};  // exact f32, as the reference evaluation
  const std::string model_dir = ResolveModelDir(args.model.model_dir);
  const std::unique_ptr<Model> model = LoadModel(args.model, pool, &exec.k);
  CheckWithinContext(*model, args.context, "--context");
  const Tokenizer tokenizer = LoadTokenizer(model_dir);
  const std::string text = ReadInput(args.file);
  size_t bad = 0;
  if (!IsValidUtf8(text, &bad))
    throw Error(args.file + ": invalid UTF-8 at byte " + std::to_string(bad));
  const std::vector<int32_t> ids = tokenizer.Encode(text, false);
  const int64_t n = static_cast<int64_t>(ids.size());
  int64_t n_chunks = (n + args.context - 1) / args.context;
  if (n_chunks > 0 && n - (n_chunks - 1) * args.context < 2)
    --n_chunks;  // a 1-token tail predicts nothing
  if (args.max_chunks > 0) n_chunks = std::min(n_chunks, args.max_chunks);
  if (n_chunks == 0) throw Error(args.file + ": fewer than 2 tokens");

  const std::unique_ptr<KvCache> cache = MakeKvCache(*model, args.kv);
  const int64_t vocab = model->config().vocab_size;
  ExpertStats stats;
  ProgressBar bar("perplexity", n_chunks);
  double total_nll = 0.0;
  int64_t scored = 0;
  std::vector<float> logits;
  constexpr int64_t kPassTokens = 512;  // tokens per forward pass inside a chunk
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t begin = c * args.context;
    const int64_t end = std::min(n, begin + args.context);
    const int32_t seq = cache->AddSequence();
    for (int64_t pass = begin; pass < end; pass += kPassTokens) {
      const int64_t pass_end = std::min(end, pass + kPassTokens);
      std::vector<BatchToken> batch;
      for (int64_t i = pass; i < pass_end; ++i) {
        batch.push_back({.token = ids[static_cast<size_t>(i)],
                         .seq = seq,
                         .pos = i - begin,
                         .want_logits = true});
      }
      logits.resize(batch.size() * static_cast<size_t>(vocab));
      ReserveOrThrow(*cache, seq, static_cast<int64_t>(batch.size()));
      model->Forward(exec, *cache, batch, {.expert_stats = args.expert_stats ? &stats : nullptr},
                     logits.data());
      // Token i's logits predict token i + 1 (inside the chunk).
      for (int64_t i = pass; i < pass_end && i + 1 < end; ++i) {
        const float* row = logits.data() + (i - pass) * vocab;
        float max_logit = row[0];
        for (int64_t v = 1; v < vocab; ++v) max_logit = std::max(max_logit, row[v]);
        double sum = 0.0;
        for (int64_t v = 0; v < vocab; ++v)
          sum += std::exp(static_cast<double>(row[v] - max_logit));
        total_nll += std::log(sum) + max_logit - row[ids[static_cast<size_t>(i + 1)]];
        ++scored;
      }
    }
    cache->RemoveSequence(seq);
    bar.Update(c + 1);
  }
  bar.Finish();
  const double ppl = std::exp(total_nll / static_cast<double>(scored));
  if (args.json) {
    std::printf("%s\n", nlohmann::json({{"perplexity", ppl},
                                        {"mean_nll", total_nll / static_cast<double>(scored)},
                                        {"tokens_scored", scored},
                                        {"chunks", n_chunks},
                                        {"context", args.context},
                                        {"kv_policy", args.kv.kv_policy},
                                        {"kv_dtype", args.kv.kv_dtype},
                                        {"kv_bytes_per_token", cache->BytesPerToken()}})
                            .dump()
                            .c_str());
  } else {
    std::printf("perplexity %.4f (mean NLL %.5f over %lld tokens, %lld chunks of %lld; kv %s %s)\n",
                ppl, total_nll / static_cast<double>(scored), static_cast<long long>(scored),
                static_cast<long long>(n_chunks), static_cast<long long>(args.context),
                args.kv.kv_policy.c_str(), args.kv.kv_dtype.c_str());
  }
  if (args.expert_stats) PrintExpertStats(stats, args.verbose);
  return 0;
}

}  // namespace

void RegisterPerplexity(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<PerplexityArgs>();
  CLI::App* cmd = app.add_subcommand("perplexity", "Perplexity of a text file");
  AddModelOptions(*cmd, args->model);
  AddKvOptions(*cmd, args->kv, "f32");
  cmd->add_option("--file,-f", args->file, "Text file")->required();
  cmd->add_option("--context,-c", args->context, "Tokens per independently evaluated chunk")
      ->capture_default_str();
  cmd->add_option("--max-chunks", args->max_chunks, "Evaluate only the first N chunks (0: all)")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  cmd->add_flag("--expert-stats", args->expert_stats,
                "Print tokens per routed expert per MoE layer");
  cmd->add_flag("--verbose,-v", args->verbose, "With --expert-stats: full histograms");
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->callback([args, exit_code] { *exit_code = RunPerplexity(*args); });
}

}  // namespace mlarun::cli
