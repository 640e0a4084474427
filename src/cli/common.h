// Options shared by the CLI commands (model directory, threads, KV cache settings) and helpers to
// turn them into engine objects.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "kernels/kernel_table.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace mlarun::cli {

struct ModelArgs {
  std::string model_dir;              // empty: the embedded default model
  int threads = 0;                    // 0: all cores
  std::string isa;                    // empty: $MLARUN_ISA, else the best the CPU supports
  std::string weights = "as-loaded";  // or bf16 (converted at load) or int8 (quantised)
  std::string load = "mmap";          // or copy (weights read into huge-page memory)
};

struct KvArgs {
  std::string kv_dtype = "f32";
  std::string kv_policy = "full";
  std::string kv_budget = "4GiB";
  int kv_block_size = 64;
};

// Adds --model, -t/--threads, --isa, --weights and --load (default: args.load as set).
void AddModelOptions(CLI::App& app, ModelArgs& args);
// Adds --temperature, --top-k, --top-p, --min-p, --repeat-penalty, --presence-penalty,
// --frequency-penalty and --seed.
void AddSamplingOptions(CLI::App& app, SamplerOptions& sampling);
// The end-of-sequence ids that stop generation: config.json's eos_token_id(s) and the
// tokenizer's EOS (when there is one).
std::vector<int32_t> StopTokenIds(const Model& model, const Tokenizer* tokenizer);
// Adds --kv-dtype, --kv-policy, --kv-budget, --kv-block-size.
void AddKvOptions(CLI::App& app, KvArgs& args, const std::string& default_dtype);

// Returns the model directory: --model, else $MLARUN_MODEL, else models/default next to the
// source tree of this binary (build/bin/../../models/default) or the working directory.
std::string ResolveModelDir(const std::string& model_dir);
// Loads the model of --model (and --weights, --load), with a progress bar on a terminal; `pool`
// is used for load-time quantisation and packing. With `--load copy` and kernels that read packed
// 16-bit matrices fastest (`kernels`, the command's table), bf16 and f16 matrices are copied in
// that layout (ModelLoadOptions::pack_16bit); `kernels` also quantise the weight rows of
// `--weights int8` (null: the scalar table).
std::unique_ptr<Model> LoadModel(const ModelArgs& args, ThreadPool& pool,
                                 const KernelTable* kernels = nullptr);
// The kernel set chosen by --isa, else $MLARUN_ISA, else `fallback` ("auto": exact f32
// activations; "fast": FastestKernelTable, bf16 activations for bf16 and FP8 weights where the
// CPU's AVX512-BF16 dot products outpace f32 FMAs); throws Error if the CPU lacks the requested
// set.
const KernelTable& SelectKernels(const ModelArgs& args, const std::string& fallback = "fast");
// Builds a KV cache for `model` from the options; throws Error naming the bad option.
std::unique_ptr<KvCache> MakeKvCache(const Model& model, const KvArgs& args);

// Parses "2GiB", "512MiB", "64KiB", "1GB", "1000"; throws Error naming `option`.
uint64_t ParseByteSize(const std::string& text, const std::string& option);
// Parses "1,2,3" into non-negative ints (token ids unless `item_name` says otherwise); throws
// Error naming `option`.
std::vector<int32_t> ParseIdList(const std::string& text, const std::string& option,
                                 std::string_view item_name = "token id");
DType ParseKvDtype(const std::string& text);
// Checks `--out DIR` before a command writes config.json / *.safetensors into it: DIR may be new,
// empty or a model directory (holding config.json: overwritten), but not a file, another
// non-empty directory (`--out /` wrote a model into the root) or `source_dir` itself (the weights
// being read). Throws Error naming --out.
void CheckOutputModelDir(const std::string& out_dir, const std::string& source_dir = "");
// Throws Error "`what` = N positions: more than the model's max_position_embeddings M" if
// `positions` exceeds the model's context (checked before long work, not at the failing position).
void CheckWithinContext(const Model& model, int64_t positions, const std::string& what);
// Parses "auto", "naive" or "absorbed"; throws Error naming `option`.
MlaPath ParseMlaPath(const std::string& text, const std::string& option);
// Prints, per MoE layer, tokens per routed expert: min / max / mean / coefficient of variation
// (and every count with `verbose`), to stderr.
void PrintExpertStats(const ExpertStats& stats, bool verbose);

// Registers the subcommands; each returns its own exit code through `*exit_code`.
void RegisterGenerate(CLI::App& app, int* exit_code);
void RegisterLogits(CLI::App& app, int* exit_code);
void RegisterMakeModel(CLI::App& app, int* exit_code);
void RegisterKvReport(CLI::App& app, int* exit_code);
void RegisterBench(CLI::App& app, int* exit_code);
void RegisterServe(CLI::App& app, int* exit_code);
void RegisterTokenize(CLI::App& app, int* exit_code);  // tokenize and detokenize
void RegisterChat(CLI::App& app, int* exit_code);
void RegisterPerplexity(CLI::App& app, int* exit_code);
void RegisterQuantize(CLI::App& app, int* exit_code);

}  // namespace mlarun::cli
