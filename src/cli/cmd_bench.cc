// `mlarun bench`: prefill and decode speed at several context depths, the bytes one decoded token
// touches (weights + KV), the GB/s that implies and the machine's measured read bandwidth.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/common.h"
#include "core/error.h"
#include "kernels/matmul.h"
#include "runtime/bandwidth.h"
#include "runtime/generator.h"

namespace mlarun::cli {

namespace {

struct BenchArgs {
  ModelArgs model;
  int prompt = 512;
  int decode = 64;
  std::string depths = "0,4096";
  std::string kv_dtype = "bf16";
  int repeats = 3;
  bool json = false;
  bool products = false;  // the decode's weight products by shape (ExecMeter::shapes)
};

// The index of the median of `v` (non-empty; the upper one of an even count).
size_t MedianIndex(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  return order[order.size() / 2];
}

double Median(const std::vector<double>& v) { return v.empty() ? 0.0 : v[MedianIndex(v)]; }

// The GB/s of a product shape's calls (0 for a shape timed at 0 s, which a nanosecond clock does
// not give).
double ShapeGbS(const ExecMeter::ProductShape& s) {
  return s.seconds > 0.0 ? static_cast<double>(s.weight_bytes * s.calls) / s.seconds / 1e9 : 0.0;
}

// The decode's weight products by shape, the longest total time first.
std::vector<ExecMeter::ProductShape> LongestFirst(std::vector<ExecMeter::ProductShape> shapes) {
  std::stable_sort(shapes.begin(), shapes.end(),
                   [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  return shapes;
}

// --products for --json and for the table: `decode_seconds` is the decode's time, `tokens` the
// tokens it decoded.
nlohmann::json ProductsJson(const std::vector<ExecMeter::ProductShape>& shapes,
                            double decode_seconds, int tokens) {
  nlohmann::json out = nlohmann::json::array();
  for (const ExecMeter::ProductShape& s : LongestFirst(shapes)) {
    out.push_back({{"jobs", s.jobs},
                   {"rows", s.rows},
                   {"cols", s.cols},
                   {"tokens", s.tokens},
                   {"weight_bytes_per_call", s.weight_bytes},
                   {"calls_per_decoded_token", static_cast<double>(s.calls) / tokens},
                   {"us_per_call", 1e6 * s.seconds / static_cast<double>(s.calls)},
                   {"gb_s", ShapeGbS(s)},
                   {"decode_time_fraction", s.seconds / decode_seconds}});
  }
  return out;
}

void PrintProducts(int32_t depth, const std::vector<ExecMeter::ProductShape>& shapes,
                   double decode_seconds, int tokens) {
  std::printf(
      "decode products at depth %d (the round of the median decode rate), longest first:\n"
      "%6s %15s %6s %9s %12s %10s %8s %12s\n",
      depth, "jobs", "rows x cols", "tokens", "MB/call", "calls/token", "us/call", "GB/s",
      "decode time");
  for (const ExecMeter::ProductShape& s : LongestFirst(shapes)) {
    std::printf("%6lld %6lld x %-6lld %6lld %9.2f %12.2f %10.1f %8.2f %11.1f%%\n",
                static_cast<long long>(s.jobs), static_cast<long long>(s.rows),
                static_cast<long long>(s.cols), static_cast<long long>(s.tokens),
                static_cast<double>(s.weight_bytes) / 1e6, static_cast<double>(s.calls) / tokens,
                1e6 * s.seconds / static_cast<double>(s.calls), ShapeGbS(s),
                100.0 * s.seconds / decode_seconds);
  }
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<int32_t> BenchTokens(int64_t n, int64_t vocab, uint64_t salt) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  uint64_t state = 0x9e3779b97f4a7c15ull ^ salt;
  for (int32_t& id : ids) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(vocab));
  }
  return ids;
}

int RunBench(const BenchArgs& args) {
  if (args.prompt <= 0 || args.decode <= 0 || args.repeats <= 0) {
    throw Error("-p, -n and --repeats must be positive");
  }
  ThreadPool pool(args.model.threads);
  ScratchArena scratch;  // forward-pass temporaries, reused across calls
  Exec exec{pool, SelectKernels(args.model), &scratch};
  const std::vector<int32_t> depths =
      ParseIdList(args.depths, "--depth", "context depth in tokens");
  const DType kv_dtype = ParseKvDtype(args.kv_dtype);
  // The probe runs before and after the model load and the better figure counts: right after
  // mapping a multi-GB model the kernel's page-cache work can take a few GB/s from it.
  const BandwidthProbe probe(exec);
  const double peak_before_load = probe.Measure(exec);
  const auto load_start = std::chrono::steady_clock::now();
  const std::unique_ptr<Model> model = LoadModel(args.model, pool, &exec.k);
  const double load_seconds = Seconds(load_start);
  const double peak_gb_s = std::max(peak_before_load, probe.Measure(exec));
  const int64_t vocab = model->config().vocab_size;
  // Checked before any depth is filled: the fill of a depth past the model's context would run
  // for minutes before its forward pass refused the position.
  for (int32_t depth : depths) {
    std::string what = "--depth " + std::to_string(depth);
    what.append(" + -p ").append(std::to_string(args.prompt));
    what.append(" + -n ").append(std::to_string(args.decode));
    CheckWithinContext(*model, int64_t{depth} + args.prompt + args.decode, what);
  }
  const int64_t weight_bytes = model->WeightBytesPerDecodedToken();
  if (!args.json) {
    std::printf(
        "model %s (%s), %d threads, kernels %s, load %.2f s, peak read bandwidth %.1f GB/s\n",
        ResolveModelDir(args.model.model_dir).c_str(), model->config().architecture.c_str(),
        pool.size(), std::string(IsaName(exec.k.isa)).c_str(), load_seconds, peak_gb_s);
    std::printf("cpu: %s\n", DescribeCpuFeatures().c_str());
    if (const double speedup = Bf16DotSpeedup(); speedup > 0.0) {
      std::printf(
          "vdpbf16ps: %.2fx the multiply-adds per second of f32 FMAs (--isa fast uses %s)\n",
          speedup, speedup > 1.0 ? "it" : "f32 FMAs, and AVX512-BF16's int8-cache attention");
    }
    if (IsaSupported(Isa::kAmx)) {
      std::printf("amx: --isa fast multiplies packed bf16 weights by tiles for 16+ tokens\n");
    }
    std::printf("%8s %8s %12s %8s %12s %14s %10s %10s %9s %9s %10s %9s %7s\n", "depth", "prefill",
                "prefill t/s", "decode", "decode t/s", "bytes/token", "GB/s", "probe GB/s",
                "roofline", "products", "prod. GB/s", "attention", "drop");
  }
  // One cache per depth, filled first; then every round measures each depth in turn (prefill,
  // decode, then the bandwidth probe right after the decode). The machines this runs on drift by
  // 15% or more over minutes: interleaving keeps the depths comparable, and each roofline fraction
  // compares a decode with a probe taken the same moment (the median fraction is reported).
  const KvLayout layout = model->MakeKvLayout(kv_dtype);
  struct DepthRun {
    int32_t depth = 0;
    std::unique_ptr<KvCache> cache;
    int32_t base = 0;
    std::vector<double> prefill_rates, decode_rates, probes, fractions;
    // Of each decode run: the shares of its time in weight products and in attention, and the
    // products' read rate.
    std::vector<double> product_shares, product_rates, attention_shares;
    std::vector<std::vector<ExecMeter::ProductShape>> shapes;  // --products: each round's
  };
  std::vector<DepthRun> runs;
  for (int32_t depth : depths) {
    const int64_t total = depth + args.prompt + args.decode;
    const size_t budget =
        (static_cast<size_t>(total) * 2 + 4096) * layout.BytesPerToken() + (64u << 20);
    DepthRun run{.depth = depth,
                 .cache = std::make_unique<KvCache>(
                     layout, KvCacheOptions{.block_size = 64, .budget_bytes = budget})};
    run.base = run.cache->AddSequence();
    if (depth > 0) {
      Prefill(*model, exec, *run.cache, run.base, BenchTokens(depth, vocab, 1),
              {.prefill_chunk = 512});
    }
    runs.push_back(std::move(run));
  }
  const int64_t kv_bytes_per_token = static_cast<int64_t>(layout.BytesPerToken());
  auto bytes_per_decoded_token = [&](int32_t depth) {
    // KV rows read per decoded token: the mean context over the decode run.
    const int64_t mean_context = depth + args.prompt + args.decode / 2;
    return weight_bytes + mean_context * kv_bytes_per_token;
  };
  std::vector<float> logits(static_cast<size_t>(vocab));
  for (int r = 0; r < args.repeats; ++r) {
    for (DepthRun& run : runs) {
      KvCache& cache = *run.cache;
      const int32_t seq = cache.ForkSequence(run.base, run.depth);
      const std::vector<int32_t> prompt =
          BenchTokens(args.prompt, vocab, 2 + static_cast<uint64_t>(r));
      auto start = std::chrono::steady_clock::now();
      Prefill(*model, exec, cache, seq, prompt, {.prefill_chunk = args.prompt});
      run.prefill_rates.push_back(args.prompt / Seconds(start));
      int32_t token = prompt.back();
      ExecMeter meter{.by_shape = args.products};
      exec.meter = &meter;
      start = std::chrono::steady_clock::now();
      for (int i = 0; i < args.decode; ++i) {
        ReserveOrThrow(cache, seq, 1);
        const BatchToken next{
            .token = token, .seq = seq, .pos = cache.Length(seq), .want_logits = true};
        model->Forward(exec, cache, std::span<const BatchToken>(&next, 1), {}, logits.data());
        token = Argmax(logits);
      }
      const double decode_seconds = Seconds(start);
      exec.meter = nullptr;
      const double decode_tok_s = args.decode / decode_seconds;
      run.decode_rates.push_back(decode_tok_s);
      run.product_shares.push_back(meter.product_seconds / decode_seconds);
      run.product_rates.push_back(meter.product_seconds > 0.0
                                      ? static_cast<double>(meter.product_weight_bytes) /
                                            meter.product_seconds / 1e9
                                      : 0.0);
      run.attention_shares.push_back(meter.attention_seconds / decode_seconds);
      run.shapes.push_back(std::move(meter.shapes));
      cache.RemoveSequence(seq);
      const double probe_gb_s = probe.Measure(exec);
      run.probes.push_back(probe_gb_s);
      run.fractions.push_back(static_cast<double>(bytes_per_decoded_token(run.depth)) *
                              decode_tok_s / 1e9 / probe_gb_s);
    }
  }
  const WeightMatrix& probe_matrix = model->weights().layers[0].mla.o_proj.empty()
                                         ? model->weights().layers[0].gqa.o_proj
                                         : model->weights().layers[0].mla.o_proj;
  // GGUF blocks: the format of o_proj, lower case ("q4_k" in a Q4_K_M file).
  std::string weights =
      probe_matrix.dtype == DType::kI8 ? "int8" : std::string(DTypeName(probe_matrix.dtype));
  if (probe_matrix.dtype == DType::kBlocks) {
    weights = probe_matrix.blocks->name;
    for (char& c : weights) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  for (DepthRun& run : runs) {
    const double prefill_tok_s = Median(run.prefill_rates);
    const double decode_tok_s = Median(run.decode_rates);
    const int64_t bytes = bytes_per_decoded_token(run.depth);
    const double gb_s = static_cast<double>(bytes) * decode_tok_s / 1e9;
    const double fraction = Median(run.fractions);
    // The time split of the round whose decode rate is the median (medians taken one by one
    // could add up to more than the whole).
    const size_t median_round = MedianIndex(run.decode_rates);
    const double product_share = run.product_shares[median_round];
    const double product_gb_s = run.product_rates[median_round];
    const double attention_share = run.attention_shares[median_round];
    // How much slower than the first depth, paired round by round (the two decodes of a round
    // run seconds apart, the rounds minutes apart on a drifting machine): 1 - the median of the
    // per-round ratios.
    std::vector<double> ratios;
    for (size_t r = 0; r < run.decode_rates.size(); ++r)
      ratios.push_back(run.decode_rates[r] / runs.front().decode_rates[r]);
    const double drop = 1.0 - Median(ratios);
    if (args.json) {
      const auto probe_range = std::minmax_element(run.probes.begin(), run.probes.end());
      nlohmann::json line = {{"weights", weights},
                             {"kv_dtype", args.kv_dtype},
                             {"isa", std::string(IsaName(exec.k.isa))},
                             {"threads", pool.size()},
                             {"load", args.model.load},
                             {"load_seconds", load_seconds},
                             {"depth", run.depth},
                             {"prefill_tokens", args.prompt},
                             {"prefill_tok_s", prefill_tok_s},
                             {"decode_tokens", args.decode},
                             {"decode_tok_s", decode_tok_s},
                             {"bytes_per_decoded_token", bytes},
                             {"decode_gb_s", gb_s},
                             {"peak_read_gb_s", Median(run.probes)},
                             {"peak_read_gb_s_min", *probe_range.first},
                             {"peak_read_gb_s_max", *probe_range.second},
                             {"roofline_fraction", fraction},
                             {"decode_product_time_fraction", product_share},
                             {"decode_product_gb_s", product_gb_s},
                             {"decode_attention_time_fraction", attention_share},
                             {"decode_drop_vs_first_depth", drop}};
      if (args.products) {
        line["decode_products"] = ProductsJson(
            run.shapes[median_round], args.decode / run.decode_rates[median_round], args.decode);
      }
      std::printf("%s\n", line.dump().c_str());
    } else {
      std::printf(
          "%8d %8d %12.1f %8d %12.2f %14lld %10.2f %10.2f %8.1f%% %8.1f%% %10.2f %8.1f%% %6.1f%%\n",
          run.depth, args.prompt, prefill_tok_s, args.decode, decode_tok_s,
          static_cast<long long>(bytes), gb_s, Median(run.probes), 100.0 * fraction,
          100.0 * product_share, product_gb_s, 100.0 * attention_share, 100.0 * drop);
    }
  }
  if (!args.json) {
    std::vector<double> all_probes;
    for (const DepthRun& run : runs) {
      all_probes.insert(all_probes.end(), run.probes.begin(), run.probes.end());
    }
    if (const std::string note = ProbeDriftNote(all_probes); !note.empty()) {
      std::printf("%s\n", note.c_str());
    }
    if (args.products) {
      for (const DepthRun& run : runs) {
        const size_t median_round = MedianIndex(run.decode_rates);
        PrintProducts(run.depth, run.shapes[median_round],
                      args.decode / run.decode_rates[median_round], args.decode);
      }
    }
  }
  // Timed by the first int8 prefill batch on AMX-INT8 tables (never for bf16 weights).
  if (!args.json && weights == "int8" && exec.k.matmul_rows_q8_tiles != nullptr) {
    const double speedup = Q8TilesSpeedup();
    std::printf(
        "amx-int8: tiles %.2fx the VNNI kernel's rate on packed Q8 products (used for %s)\n",
        speedup, speedup > kQ8TilesMinSpeedup ? "batches of 16+ tokens" : "nothing; VNNI kept");
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

void RegisterBench(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd =
      app.add_subcommand("bench", "Prefill/decode tok/s at context depths, GB/s vs measured peak");
  args->model.load = "copy";  // throughput figures: weights in huge pages (docs/performance.md)
  AddModelOptions(*cmd, args->model);
  cmd->add_option("-p,--prompt", args->prompt, "Prefill tokens per measurement")
      ->capture_default_str();
  cmd->add_option("-n,--decode", args->decode, "Decoded tokens per measurement")
      ->capture_default_str();
  cmd->add_option("--depth", args->depths, "Context depths, e.g. 0,4096,16384")
      ->capture_default_str();
  cmd->add_option("--kv-dtype", args->kv_dtype, "KV cache dtype")->capture_default_str();
  cmd->add_option("--repeats", args->repeats,
                  "Rounds; each measures every depth once, then probes the bandwidth (medians "
                  "reported)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "One JSON object per line per measurement");
  cmd->add_flag("--products", args->products,
                "Also list the decode's weight products by shape (jobs per parallel region, the "
                "first matrix's rows x cols): calls per token, time and GB/s of each");
  cmd->callback([args, exit_code] { *exit_code = RunBench(*args); });
}

}  // namespace mlarun::cli
