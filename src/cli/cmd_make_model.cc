// `mlarun make-model`: write a random model of a preset in the Hugging Face layout.
#include <cstdio>
#include <filesystem>

#include "cli/common.h"
#include "core/error.h"
#include "model/gguf_export.h"
#include "model/synthetic.h"

namespace mlarun::cli {

namespace {

struct MakeModelArgs {
  std::string preset;
  std::string out;
  std::string dtype = "f32";
  uint64_t seed = 1;
  int layers = 0;
  std::string max_shard = "0";
  std::string format = "safetensors";
  std::string type;
  std::string config_patch;
  int threads = 0;
};

int RunMakeModel(const MakeModelArgs& args) {
  SyntheticModelOptions options{.preset = args.preset,
                                .seed = args.seed,
                                .layers = args.layers,
                                .config_patch = args.config_patch};
  if (!ParseDTypeOption(args.dtype, &options.dtype) || options.dtype == DType::kI8) {
    throw Error("--dtype: '" + args.dtype + "' is not one of f32, bf16, f16, fp8");
  }
  options.max_shard_bytes = ParseByteSize(args.max_shard, "--max-shard-size");
  if (args.format == "gguf") {
    const GgufMix* mix = FindGgufMix(args.type.empty() ? "f32" : args.type);
    if (mix == nullptr) throw Error("--type: '" + args.type + "' is not one of " + GgufMixNames());
    if (args.out.empty() || std::filesystem::is_directory(args.out))
      throw Error("--out: with --format gguf, the output is a .gguf file, not a directory");
    ThreadPool pool(args.threads);
    WriteSyntheticGguf(options, *mix, args.out, &pool);
    std::fprintf(stderr, "wrote %s model as %s GGUF to %s\n", args.preset.c_str(),
                 std::string(mix->name).c_str(), args.out.c_str());
    return 0;
  }
  if (args.format != "safetensors")
    throw Error("--format: '" + args.format + "' is not one of safetensors, gguf");
  if (!args.type.empty()) throw Error("--type: needs --format gguf");
  CheckOutputModelDir(args.out);
  WriteSyntheticModel(options, args.out);
  std::fprintf(stderr, "wrote %s model to %s\n", args.preset.c_str(), args.out.c_str());
  return 0;
}

}  // namespace

void RegisterMakeModel(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<MakeModelArgs>();
  std::string presets;
  for (const std::string& p : SyntheticPresetNames()) presets += (presets.empty() ? "" : ", ") + p;
  CLI::App* cmd =
      app.add_subcommand("make-model", "Write a random model (HF layout) from a preset");
  cmd->add_option("--preset", args->preset, "One of: " + presets)->required();
  cmd->add_option("--out,-o", args->out, "Output directory (a .gguf file with --format gguf)")
      ->required();
  cmd->add_option("--format", args->format, "safetensors (a model directory) or gguf (one file)")
      ->capture_default_str();
  cmd->add_option(
      "--type", args->type,
      "With --format gguf: the weights' mix, one of " + GgufMixNames() + " (default f32)");
  cmd->add_option("--threads,-t", args->threads, "Worker threads for --format gguf (0: all cores)")
      ->check(CLI::Range(0, ThreadPool::MaxThreads()));
  cmd->add_option("--dtype", args->dtype, "f32, bf16, f16 or fp8 (128x128 block scales)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  cmd->add_option("--layers", args->layers, "Override num_hidden_layers (0: the preset's)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--config-patch", args->config_patch,
                  "A JSON merge patch of the preset's config.json, e.g. '{\"hidden_size\": 256}' "
                  "(the tensors follow the patched shapes)");
  cmd->add_option("--max-shard-size", args->max_shard,
                  "Split into shards of at most this size (0: one file)");
  cmd->callback([args, exit_code] { *exit_code = RunMakeModel(*args); });
}

}  // namespace mlarun::cli
