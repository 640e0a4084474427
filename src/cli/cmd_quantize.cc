// `mlarun quantize`: write a model with its linear layers in Q8 (int8 blocks of 32 + f16 scales)
// as safetensors, so `--weights int8` loads instantly next time; or, with `--weights bf16`, in
// bf16 (an f32, f16 or FP8 checkpoint converted once instead of at every load); or, with --type,
// as a GGUF file of a llama.cpp-style mix (model/gguf_export.h). One matrix at a time: memory
// holds one converted matrix, not the model (model/checkpoint_writer.h).
#include <cstdio>
#include <filesystem>

#include "cli/common.h"
#include "core/error.h"
#include "model/checkpoint_writer.h"
#include "model/gguf_export.h"

namespace mlarun::cli {

namespace {

struct QuantizeArgs {
  ModelArgs model;
  std::string out;
  std::string type;  // a GGUF mix: the output is a GGUF file
  std::string mla_layout = "split";
  std::vector<std::string> tensor_types;
};

int RunQuantizeGguf(const QuantizeArgs& args) {
  const GgufMix* mix = FindGgufMix(args.type);
  if (mix == nullptr) {
    throw Error("--type: '" + args.type + "' is not one of " + GgufMixNames());
  }
  if (args.mla_layout != "split" && args.mla_layout != "kv_b")
    throw Error("--mla-layout: '" + args.mla_layout + "' is not one of split, kv_b");
  if (args.out.empty() || std::filesystem::is_directory(args.out))
    throw Error("--out: with --type, the output is a .gguf file, not a directory");
  ThreadPool pool(args.model.threads);
  const std::string src = ResolveModelDir(args.model.model_dir);
  GgufExportOptions options{.mix = mix, .split_mla = args.mla_layout == "split", .pool = &pool};
  for (const std::string& spec : args.tensor_types)
    options.tensor_types.push_back(ParseGgufTypeOverride(spec));
  WriteGgufModel(src, args.out, options);
  std::fprintf(stderr, "wrote %s GGUF model to %s\n", std::string(mix->name).c_str(),
               args.out.c_str());
  return 0;
}

int RunQuantize(const QuantizeArgs& args) {
  if (!args.type.empty()) return RunQuantizeGguf(args);
  if (!args.tensor_types.empty()) throw Error("--tensor-type: needs --type (a GGUF output)");
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
                         "(--weights bf16), or as a GGUF file (--type q4_k_m, ...), one matrix "
                         "at a time");
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
  cmd->add_option("--type", args->type,
                  "Write a GGUF file instead, with this llama.cpp-style mix: " + GgufMixNames())
      ->check(CLI::IsMember(std::vector<std::string>{"f32", "f16", "bf16", "q8_0", "q6_k", "q5_k_m",
                                                     "q4_k_m", "q4_0"}));
  cmd->add_option(
      "--tensor-type", args->tensor_types,
      "With --type: PATTERN=TYPE stores the matrices whose GGUF name contains a match of "
      "the glob in TYPE (e.g. attn_v_b=bf16); repeatable, later ones win");
  cmd->add_option("--mla-layout", args->mla_layout,
                  "GGUF MLA tensors: split (attn_k_b + attn_v_b, llama.cpp's current layout) or "
                  "kv_b (the older attn_kv_b)")
      ->capture_default_str();
  cmd->add_option("--out,-o", args->out, "Output directory (a .gguf file with --type)")->required();
  cmd->callback([args, exit_code] { *exit_code = RunQuantize(*args); });
}

}  // namespace mlarun::cli
