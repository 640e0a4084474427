// `mlarun quantize`: write a model with its linear layers in Q8 (int8 blocks of 32 + f32 scales)
// as safetensors, so `--weights int8` loads instantly next time; or, with `--weights bf16`, in
// bf16 (an f32, f16 or FP8 checkpoint converted once instead of at every load).
#include <cstdio>

#include "cli/common.h"
#include "core/error.h"
#include "model/quantize.h"

namespace mlarun::cli {

namespace {

struct QuantizeArgs {
  ModelArgs model;
  std::string out;
};

int RunQuantize(QuantizeArgs args) {
  if (args.model.weights != "int8" && args.model.weights != "bf16" &&
      args.model.weights != "as-loaded") {
    throw Error("--weights: quantize writes int8 (the default) or bf16");
  }
  const bool bf16 = args.model.weights == "bf16";
  if (!bf16) args.model.weights = "int8";
  ThreadPool pool(args.model.threads);
  const std::string src = ResolveModelDir(args.model.model_dir);
  CheckOutputModelDir(args.out, src);
  if (bf16) {
    const std::unique_ptr<Model> model = LoadModel(args.model, pool, nullptr);
    WriteBf16Model(model->config(), model->weights(), src, args.out);
    std::fprintf(stderr, "wrote bf16 model to %s\n", args.out.c_str());
    return 0;
  }
  // The rows are quantised by the chosen kernels (`--isa`; every table gives the same bytes).
  const std::unique_ptr<Model> model =
      LoadModel(args.model, pool, &SelectKernels(args.model, "auto"));
  WriteQ8Model(model->config(), model->weights(), src, args.out);
  std::fprintf(stderr, "wrote Q8 model to %s\n", args.out.c_str());
  return 0;
}

}  // namespace

void RegisterQuantize(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd =
      app.add_subcommand("quantize",
                         "Write the model with int8 (Q8, blocks of 32) weights, or bf16 ones "
                         "(--weights bf16)");
  AddModelOptions(*cmd, args->model);
  cmd->add_option("--out,-o", args->out, "Output directory")->required();
  cmd->callback([args, exit_code] { *exit_code = RunQuantize(*args); });
}

}  // namespace mlarun::cli
