// `mlarun quantize`: write a model with its linear layers in Q8 (int8 blocks of 32 + f16 scales)
// as safetensors, so `--weights int8` loads instantly next time; or, with `--weights bf16`, in
// bf16 (an f32, f16 or FP8 checkpoint converted once instead of at every load). One matrix at a
// time: memory holds one converted matrix, not the model (model/checkpoint_writer.h).
#include <cstdio>

#include "cli/common.h"
#include "core/error.h"
#include "model/checkpoint_writer.h"

namespace mlarun::cli {

namespace {

struct QuantizeArgs {
  ModelArgs model;
  std::string out;
};

int RunQuantize(const QuantizeArgs& args) {
  if (args.model.weights != "int8" && args.model.weights != "bf16") {
    throw Error("--weights: quantize writes int8 (the default) or bf16, not '" +
                args.model.weights + "'");
  }
  const bool bf16 = args.model.weights == "bf16";
  ThreadPool pool(args.model.threads);
  const std::string src = ResolveModelDir(args.model.model_dir);
  CheckOutputModelDir(args.out, src);
  // The rows are quantised by the chosen kernels (`--isa`; every table gives the same bytes).
  WriteConvertedCheckpoint(src, args.out,
                           {.weights = bf16 ? WeightFormat::kBf16 : WeightFormat::kInt8,
                            .pool = &pool,
                            .kernels = &SelectKernels(args.model, "auto")});
  std::fprintf(stderr, "wrote %s model to %s\n", bf16 ? "bf16" : "Q8", args.out.c_str());
  return 0;
}

}  // namespace

void RegisterQuantize(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<QuantizeArgs>();
  args->model.weights = "int8";
  CLI::App* cmd =
      app.add_subcommand("quantize",
                         "Write the model with int8 (Q8, blocks of 32) weights, or bf16 ones "
                         "(--weights bf16), one matrix at a time");
  cmd->add_option("--model,-m", args->model.model_dir,
                  "Model directory (config.json + *.safetensors); default: the embedded demo "
                  "model");
  cmd->add_option("--threads,-t", args->model.threads,
                  "Worker threads (0, the default: all cores; at most 8 per core)")
      ->check(CLI::Range(0, ThreadPool::MaxThreads()));
  cmd->add_option("--weights", args->model.weights,
                  "Written format: int8 (Q8 blocks, packed for the kernels) or bf16 (f32, f16 "
                  "and FP8 matrices rounded; bf16 ones kept)")
      ->capture_default_str();
  cmd->add_option("--isa", args->model.isa,
                  "Quantisation kernels: auto, scalar, avx2, avx512, avx512-bf16, amx (all "
                  "write the same bytes; default: $MLARUN_ISA, else auto)");
  cmd->add_option("--out,-o", args->out, "Output directory")->required();
  cmd->callback([args, exit_code] { *exit_code = RunQuantize(*args); });
}

}  // namespace mlarun::cli
