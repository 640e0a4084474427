// `mlarun generate`: prefill a prompt, sample new tokens, print them and a summary line.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>

#include "cli/common.h"
#include "cli/progress.h"
#include "cli/text_io.h"
#include "core/error.h"
#include "runtime/generator.h"
#include "runtime/text_stream.h"

namespace mlarun::cli {

namespace {

struct GenerateArgs {
  ModelArgs model;
  KvArgs kv;
  std::string prompt;
  std::string prompt_file;
  std::string prompt_ids;
  std::vector<std::string> stop;
  int64_t ctx_size = 0;
  int n = 32;
  SamplerOptions sampling;
  bool expert_stats = false;
  bool verbose = false;
  bool ignore_eos = false;
};

int RunGenerate(const GenerateArgs& args) {
  const int n_prompt_sources =
      !args.prompt.empty() + !args.prompt_file.empty() + !args.prompt_ids.empty();
  if (n_prompt_sources != 1) throw Error("give exactly one of --prompt, --file and --prompt-ids");
  ThreadPool pool(args.model.threads);
  ScratchArena scratch;  // forward-pass temporaries, reused across calls
  Exec exec{pool, SelectKernels(args.model), &scratch};
  const std::string model_dir = ResolveModelDir(args.model.model_dir);
  const std::unique_ptr<Model> model = LoadModel(args.model, pool, &exec.k);
  const bool text_mode = args.prompt_ids.empty();
  std::optional<Tokenizer> tokenizer;
  std::vector<int32_t> prompt;
  if (text_mode) {
    tokenizer.emplace(LoadTokenizer(model_dir));
    const std::string text = args.prompt_file.empty() ? args.prompt : ReadInput(args.prompt_file);
    size_t bad = 0;
    if (!IsValidUtf8(text, &bad)) {
      throw Error((args.prompt_file.empty() ? std::string("--prompt") : args.prompt_file) +
                  ": invalid UTF-8 at byte " + std::to_string(bad));
    }
    prompt = tokenizer->Encode(text, tokenizer->add_bos_token());
  } else {
    prompt = ParseIdList(args.prompt_ids, "--prompt-ids");
  }
  CheckWithinContext(*model, args.ctx_size, "--ctx-size");
  const int64_t ctx = args.ctx_size > 0 ? args.ctx_size : model->config().max_position_embeddings;
  if (static_cast<int64_t>(prompt.size()) >= ctx) {
    throw Error("the prompt is " + std::to_string(prompt.size()) + " tokens, but the context is " +
                std::to_string(ctx) + " tokens (--ctx-size)");
  }
  const std::unique_ptr<KvCache> cache = MakeKvCache(*model, args.kv);
  const int32_t seq = cache->AddSequence();
  ExpertStats stats;
  const int64_t room = ctx - static_cast<int64_t>(prompt.size());
  GenerateOptions options{
      .max_new_tokens = static_cast<int>(args.n < 0 ? room : std::min<int64_t>(args.n, room)),
      .sampling = args.sampling};
  if (!args.ignore_eos) options.stop_ids = StopTokenIds(*model, tokenizer ? &*tokenizer : nullptr);
  if (args.expert_stats) options.expert_stats = &stats;
  ProgressBar prefill_bar("prefill", static_cast<int64_t>(prompt.size()));
  if (static_cast<int>(prompt.size()) > options.prefill_chunk) {
    options.on_prefill_progress = [&](int64_t done, int64_t) {
      prefill_bar.Update(done);
      if (done == static_cast<int64_t>(prompt.size())) prefill_bar.Finish();
    };
  }
  bool first = true;
  std::optional<TextStream> stream;
  if (text_mode) stream.emplace(*tokenizer, args.stop);
  bool stopped_by_string = false;
  options.on_token = [&](int32_t token) {
    if (stream) {
      std::fputs(stream->Push(token, &stopped_by_string).c_str(), stdout);
    } else {
      std::printf("%s%d", first ? "" : ",", token);
    }
    std::fflush(stdout);
    first = false;
    return !stopped_by_string;
  };
  const GenerateResult result = Generate(*model, exec, *cache, seq, prompt, options);
  if (stream) std::fputs(stream->Finish().c_str(), stdout);
  std::printf("\n");
  std::fflush(stdout);  // the text ends before the summary line on stderr, even through a pipe
  const double prefill_tps =
      static_cast<double>(result.prompt_tokens) / std::max(result.prefill_seconds, 1e-9);
  const size_t n_decoded = result.tokens.size() > 0 ? result.tokens.size() - 1 : 0;
  const double decode_tps = static_cast<double>(n_decoded) / std::max(result.decode_seconds, 1e-9);
  std::fprintf(
      stderr,
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
  cmd->add_option("--prompt,-p", args->prompt, "Prompt text (streamed output is text)");
  cmd->add_option("--file,-f", args->prompt_file, "Read the prompt text from a file");
  cmd->add_option("--prompt-ids", args->prompt_ids,
                  "Prompt token ids, e.g. \"1,2,3\" (output is ids)");
  cmd->add_option("--stop", args->stop, "Stop string (repeatable); not printed");
  cmd->add_option("-c,--ctx-size", args->ctx_size,
                  "Context length limit (0, the default: max_position_embeddings)")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
  cmd->add_option("-n,--max-tokens", args->n, "Tokens to generate (-1: until the context is full)")
      ->check(CLI::Range(-1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  AddSamplingOptions(*cmd, args->sampling);
  cmd->add_flag("--ignore-eos", args->ignore_eos, "Do not stop at EOS");
  cmd->add_flag("--expert-stats", args->expert_stats,
                "Print tokens per routed expert per MoE layer");
  cmd->add_flag("--verbose,-v", args->verbose, "With --expert-stats: full histograms");
  cmd->callback([args, exit_code] { *exit_code = RunGenerate(*args); });
}

}  // namespace mlarun::cli
