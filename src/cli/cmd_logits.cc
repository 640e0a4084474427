// `mlarun logits`: float32 logits [n_tokens, vocab] of a token sequence, as a .npy file, computed
// in float32 throughout (activations and cache) for comparison with references.
#include <cstdio>
#include <limits>

#include "cli/common.h"
#include "core/error.h"
#include "core/npy.h"
#include "runtime/generator.h"

namespace mlarun::cli {

namespace {

struct LogitsArgs {
  ModelArgs model;
  KvArgs kv;
  std::string ids;
  std::string out;
  std::string mode = "prefill";
  std::string attention = "auto";
  int chunk = 0;
};

int RunLogits(const LogitsArgs& args) {
  ThreadPool pool(args.model.threads);
  ScratchArena scratch;  // forward-pass temporaries, reused across calls
  Exec exec{pool, SelectKernels(args.model, "auto"), &scratch};  // exact f32 for comparisons
  const std::unique_ptr<Model> model = LoadModel(args.model, pool, &exec.k);
  const std::unique_ptr<KvCache> cache = MakeKvCache(*model, args.kv);
  const std::vector<int32_t> ids = ParseIdList(args.ids, "--ids");
  const MlaPath path = ParseMlaPath(args.attention, "--attention");
  int64_t chunk = static_cast<int64_t>(ids.size());
  if (args.mode == "decode") {
    chunk = 1;
  } else if (args.mode != "prefill") {
    throw Error("--mode: '" + args.mode + "' is not one of prefill, decode");
  }
  if (args.chunk > 0) chunk = args.chunk;
  const int64_t vocab = model->config().vocab_size;
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<float> logits(static_cast<size_t>(n * vocab));
  const int32_t seq = cache->AddSequence();
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk);
    std::vector<BatchToken> batch;
    for (int64_t i = begin; i < end; ++i) {
      batch.push_back(
          {.token = ids[static_cast<size_t>(i)], .seq = seq, .pos = i, .want_logits = true});
    }
    ReserveOrThrow(*cache, seq, end - begin);
    model->Forward(exec, *cache, batch, {.mla_path = path}, logits.data() + begin * vocab);
  }
  WriteNpyF32(args.out, {n, vocab}, logits.data());
  std::fprintf(stderr, "wrote %s [%lld, %lld]; KV bytes used %zu\n", args.out.c_str(),
               static_cast<long long>(n), static_cast<long long>(vocab), cache->UsedBytes());
  return 0;
}

}  // namespace

void RegisterLogits(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<LogitsArgs>();
  CLI::App* cmd = app.add_subcommand("logits", "Write float32 logits of a token sequence to .npy");
  AddModelOptions(*cmd, args->model);
  AddKvOptions(*cmd, args->kv, "f32");
  cmd->add_option("--ids", args->ids, "Token ids, e.g. \"1,2,3\"")->required();
  cmd->add_option("--out,-o", args->out, "Output .npy file")->required();
  cmd->add_option("--mode", args->mode, "prefill (one pass) or decode (token by token)")
      ->capture_default_str();
  cmd->add_option("--attention", args->attention, "MLA path: auto, naive or absorbed")
      ->capture_default_str();
  cmd->add_option("--chunk", args->chunk,
                  "Tokens per forward pass (overrides --mode; 0: per --mode)")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  cmd->callback([args, exit_code] { *exit_code = RunLogits(*args); });
}

}  // namespace mlarun::cli
