// `mlarun make-model`: write a random model of a preset in the Hugging Face layout.
#include <cstdio>

#include "cli/common.h"
#include "core/error.h"
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
};

int RunMakeModel(const MakeModelArgs& args) {
  SyntheticModelOptions options{.preset = args.preset, .seed = args.seed, .layers = args.layers};
  if (!ParseDTypeOption(args.dtype, &options.dtype) || options.dtype == DType::kI8) {
    throw Error("--dtype: '" + args.dtype + "' is not one of f32, bf16, f16, fp8");
  }
  options.max_shard_bytes = ParseByteSize(args.max_shard, "--max-shard-size");
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
  cmd->add_option("--out,-o", args->out, "Output directory")->required();
  cmd->add_option("--dtype", args->dtype, "f32, bf16, f16 or fp8 (128x128 block scales)")
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  cmd->add_option("--layers", args->layers, "Override num_hidden_layers (0: the preset's)")
      ->check(CLI::Range(0, 1024));
  cmd->add_option("--max-shard-size", args->max_shard,
                  "Split into shards of at most this size (0: one file)");
  cmd->callback([args, exit_code] { *exit_code = RunMakeModel(*args); });
}

}  // namespace mlarun::cli
