// Shared CLI option handling.
#include "cli/common.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>

#include "cli/progress.h"
#include "core/error.h"
#include "core/thread_pool.h"

namespace mlarun::cli {

void AddModelOptions(CLI::App& app, ModelArgs& args) {
  app.add_option(
      "--model,-m", args.model_dir,
      "Model directory (config.json + *.safetensors) or .gguf file; default: the embedded "
      "demo model");
  app.add_option("--threads,-t", args.threads,
                 "Worker threads (0, the default: all cores; at most 8 per core)")
      ->check(CLI::Range(0, ThreadPool::MaxThreads()));
  app.add_option("--weights", args.weights,
                 "Weight format: as-loaded, bf16 (f32, f16 and FP8 matrices converted at load; "
                 "bf16 ones kept) or int8 (Q8 blocks, quantised at load)")
      ->capture_default_str();
  app.add_option("--load", args.load,
                 "How weight files are loaded: mmap (in place, instant) or copy (read into "
                 "huge-page memory, bf16 and f16 matrices packed in 16-row groups, FP8 ones too "
                 "for --isa fast's bf16 kernels: slower start, faster decode and prefill)")
      ->capture_default_str();
  app.add_option(
      "--isa", args.isa,
      "Kernels: auto (best exact f32), fast (bf16 activations for bf16 and FP8 weights where "
      "vdpbf16ps outpaces f32 FMAs, else auto with int8-query attention over int8 caches; plus "
      "AMX tiles for packed bf16 weights in batches of 16+ tokens where the CPU has AMX, and "
      "AMX-INT8 tiles for int8 weights where they measure faster at start-up), scalar, avx2, "
      "avx512, avx512-bf16, amx (default: $MLARUN_ISA, else per command)");
}

void AddKvOptions(CLI::App& app, KvArgs& args, const std::string& default_dtype) {
  args.kv_dtype = default_dtype;
  app.add_option("--kv-dtype", args.kv_dtype, "KV cache dtype: f32, bf16, f16, int8")
      ->capture_default_str();
  app.add_option("--kv-policy", args.kv_policy,
                 "KV cache policy: full | window:W[,sinks:S][,compress:K]")
      ->capture_default_str();
  app.add_option("--kv-budget", args.kv_budget, "Upper bound on KV cache memory, e.g. 2GiB")
      ->capture_default_str();
  app.add_option("--kv-block-size", args.kv_block_size, "Tokens per KV block")
      ->capture_default_str();
}

std::string ResolveModelDir(const std::string& model_dir) {
  namespace fs = std::filesystem;
  if (!model_dir.empty()) return model_dir;
  if (const char* env = std::getenv("MLARUN_MODEL"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path candidate = exe.parent_path() / ".." / ".." / "models" / "default";
    if (fs::exists(candidate / "config.json")) return fs::weakly_canonical(candidate).string();
  }
  if (fs::exists("models/default/config.json")) return "models/default";
  throw Error(
      "--model: no model directory given and the embedded default model "
      "(models/default) was not found");
}

std::unique_ptr<Model> LoadModel(const ModelArgs& args, ThreadPool& pool,
                                 const KernelTable* kernels) {
  ModelLoadOptions options{.pool = &pool, .kernels = kernels};
  if (args.weights == "int8") {
    options.weights = WeightFormat::kInt8;
  } else if (args.weights == "bf16") {
    options.weights = WeightFormat::kBf16;
  } else if (args.weights != "as-loaded") {
    throw Error("--weights: '" + args.weights + "' is not one of as-loaded, bf16, int8");
  }
  if (args.load == "copy") {
    options.file_load = FileLoad::kCopy;
    options.pack_16bit = kernels != nullptr && Pack16BitFor(options.file_load, *kernels);
  } else if (args.load != "mmap") {
    throw Error("--load: '" + args.load + "' is not one of mmap, copy");
  }
  std::optional<ProgressBar> bar;
  options.on_progress = [&](int64_t done, int64_t total) {
    if (!bar) bar.emplace("loading", total);
    bar->Update(done);
  };
  std::unique_ptr<Model> model = Model::Load(ResolveModelDir(args.model_dir), options);
  if (bar) bar->Finish();
  return model;
}

void AddSamplingOptions(CLI::App& app, SamplerOptions& sampling) {
  // The server's ranges (openai_api.cc), but for temperature: up to 100 here, 2 there.
  app.add_option("--temperature", sampling.temperature, "0 = greedy")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app.add_option("--top-k", sampling.top_k, "0 = off")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()))
      ->capture_default_str();
  app.add_option("--top-p", sampling.top_p, "1 = off")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--min-p", sampling.min_p, "0 = off")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app.add_option("--repeat-penalty", sampling.repetition_penalty, "1 = off")
      ->check(CLI::Range(0.01, 100.0))
      ->capture_default_str();
  app.add_option("--presence-penalty", sampling.presence_penalty, "0 = off")
      ->check(CLI::Range(-2.0, 2.0))
      ->capture_default_str();
  app.add_option("--frequency-penalty", sampling.frequency_penalty, "0 = off")
      ->check(CLI::Range(-2.0, 2.0))
      ->capture_default_str();
  app.add_option("--seed", sampling.seed, "Sampling seed")->capture_default_str();
}

void CheckOutputModelDir(const std::string& out_dir, const std::string& source_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (out_dir.empty()) throw Error("--out: no directory given");
  if (!fs::exists(out_dir, ec)) return;
  if (!fs::is_directory(out_dir, ec)) throw Error("--out " + out_dir + ": exists and is a file");
  if (!source_dir.empty() && fs::equivalent(out_dir, source_dir, ec)) {
    throw Error("--out " + out_dir +
                ": is the model directory being read; write to another directory");
  }
  if (fs::exists(fs::path(out_dir) / "config.json", ec)) return;
  if (!fs::is_empty(out_dir, ec)) {
    throw Error("--out " + out_dir +
                ": not empty and not a model directory (no config.json); refusing to write a "
                "model into it");
  }
}

void CheckWithinContext(const Model& model, int64_t positions, const std::string& what) {
  if (const int64_t max_positions = model.config().max_position_embeddings;
      positions > max_positions) {
    std::string message = what;
    message.append(" = ").append(std::to_string(positions));
    message.append(" positions: more than the model's max_position_embeddings ");
    message.append(std::to_string(max_positions));
    throw Error(message);
  }
}

std::vector<int32_t> StopTokenIds(const Model& model, const Tokenizer* tokenizer) {
  std::vector<int32_t> ids;
  for (int64_t eos : model.config().eos_token_ids) ids.push_back(static_cast<int32_t>(eos));
  if (tokenizer != nullptr) ids.push_back(tokenizer->eos_id());
  return ids;
}

const KernelTable& SelectKernels(const ModelArgs& args, const std::string& fallback) {
  std::string name = args.isa;
  if (name.empty()) {
    const char* env = std::getenv("MLARUN_ISA");
    name = env != nullptr && *env != '\0' ? env : fallback;
  }
  Isa isa;
  if (!ParseIsa(name, &isa)) {
    throw Error("--isa: '" + name +
                "' is not one of auto, fast, scalar, avx2, avx512, avx512-bf16, amx");
  }
  if (!IsaSupported(isa)) {
    throw Error("--isa: this CPU does not support " + name + " (" + DescribeCpuFeatures() + ")");
  }
  return name == "fast" ? FastestKernelTable() : GetKernelTable(isa);
}

DType ParseKvDtype(const std::string& text) {
  DType dtype;
  if (!ParseDTypeOption(text, &dtype) || dtype == DType::kF8E4M3) {
    throw Error("--kv-dtype: '" + text + "' is not one of f32, bf16, f16, int8");
  }
  return dtype;
}

MlaPath ParseMlaPath(const std::string& text, const std::string& option) {
  if (text == "auto") return MlaPath::kAuto;
  if (text == "naive") return MlaPath::kNaive;
  if (text == "absorbed") return MlaPath::kAbsorbed;
  throw Error(option + ": '" + text + "' is not one of auto, naive, absorbed");
}

std::unique_ptr<KvCache> MakeKvCache(const Model& model, const KvArgs& args) {
  if (args.kv_block_size <= 0) throw Error("--kv-block-size must be positive");
  const KvCacheOptions options{.block_size = args.kv_block_size,
                               .budget_bytes = ParseByteSize(args.kv_budget, "--kv-budget"),
                               .policy = ParseKvPolicy(args.kv_policy),
                               .model_window = model.model_window()};
  return std::make_unique<KvCache>(model.MakeKvLayout(ParseKvDtype(args.kv_dtype)), options);
}

uint64_t ParseByteSize(const std::string& text, const std::string& option) {
  double value = 0.0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || !std::isfinite(value) || value < 0) {  // from_chars takes "inf", "nan"
    throw Error(option + ": '" + text + "' is not a size (e.g. 512MiB, 2GiB)");
  }
  const std::string unit(ptr, end);
  double multiplier = 1.0;
  if (unit.empty() || unit == "B") {
    multiplier = 1.0;
  } else if (unit == "KiB") {
    multiplier = 1024.0;
  } else if (unit == "MiB") {
    multiplier = 1024.0 * 1024.0;
  } else if (unit == "GiB") {
    multiplier = 1024.0 * 1024.0 * 1024.0;
  } else if (unit == "TiB") {
    multiplier = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  } else if (unit == "KB") {
    multiplier = 1e3;
  } else if (unit == "MB") {
    multiplier = 1e6;
  } else if (unit == "GB") {
    multiplier = 1e9;
  } else if (unit == "TB") {
    multiplier = 1e12;
  } else {
    throw Error(option + ": unknown unit '" + unit +
                "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
  }
  // Casting a double past 2^64 to an integer is undefined; an exbibyte is past any real budget.
  constexpr double kMaxBytes = 1152921504606846976.0;  // 2^60
  if (value * multiplier > kMaxBytes) throw Error(option + ": '" + text + "' is more than 1 EiB");
  return static_cast<uint64_t>(value * multiplier);
}

std::vector<int32_t> ParseIdList(const std::string& text, const std::string& option,
                                 std::string_view item_name) {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string item = text.substr(pos, comma - pos);
    const size_t first = item.find_first_not_of(' ');
    const size_t last = item.find_last_not_of(' ');
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    int32_t id = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), id);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || id < 0) {
      std::string message = option;
      message.append(": '").append(item).append("' is not a ").append(item_name);
      message.append(" (expected e.g. \"1,2,3\")");
      throw Error(message);
    }
    ids.push_back(id);
    pos = comma + 1;
  }
  if (ids.empty()) throw Error(option + ": nothing given");
  return ids;
}

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
    for (int64_t c : counts)
      var += (static_cast<double>(c) - mean) * (static_cast<double>(c) - mean);
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

}  // namespace mlarun::cli
