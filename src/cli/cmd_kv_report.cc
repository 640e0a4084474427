// `mlarun kv-report`: KV-cache bytes per token and at a context length for the model's attention
// and the same model redesigned as MHA / GQA / MQA / MLA (+int8), from config.json alone.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/svg_plot.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "model/kv_report.h"
#include "model/model.h"

namespace mlarun::cli {

namespace {

struct KvReportArgs {
  std::string model_dir;
  int64_t context = 4096;
  std::string kv_policy = "full";
  std::string kv_dtype = "bf16";
  std::string plot;
  bool json = false;
};

std::string WithCommas(int64_t v) {
  const std::string digits = std::to_string(v);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0 && digits[i - 1] != '-') out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

int RunKvReport(const KvReportArgs& args) {
  if (args.context <= 0) throw Error("--context must be positive");
  const std::string dir = ResolveModelDir(args.model_dir);
  const ModelConfig config = Model::LoadConfig(dir);
  const KvReportOptions options{.context = args.context,
                                .policy = ParseKvPolicy(args.kv_policy),
                                .kv_dtype = ParseKvDtype(args.kv_dtype)};
  const std::vector<KvReportRow> rows = BuildKvReport(config, options);
  int64_t mha_total = 0;
  for (const KvReportRow& r : rows) {
    if (r.name == "MHA") mha_total = r.total_bytes;
  }
  if (args.json) {
    nlohmann::json out = {{"context", args.context}, {"rows", nlohmann::json::array()}};
    for (const KvReportRow& r : rows) {
      out["rows"].push_back({{"name", r.name},
                             {"attention", r.attention},
                             {"kv_dtype", r.kv_dtype},
                             {"policy", r.policy},
                             {"bytes_per_token", r.bytes_per_token},
                             {"total_bytes", r.total_bytes}});
    }
    std::cout << out.dump(2) << "\n";
  } else {
    std::printf("KV cache of %s (%d layers) at context %lld\n", config.architecture.c_str(),
                config.num_hidden_layers, static_cast<long long>(args.context));
    std::printf("%-10s %-30s %-6s %-28s %14s %18s %9s\n", "name", "attention", "dtype", "policy",
                "bytes/token", "total bytes", "vs MHA");
    for (const KvReportRow& r : rows) {
      std::printf("%-10s %-30s %-6s %-28s %14s %18s %8.4fx\n", r.name.c_str(), r.attention.c_str(),
                  r.kv_dtype.c_str(), r.policy.c_str(), WithCommas(r.bytes_per_token).c_str(),
                  WithCommas(r.total_bytes).c_str(),
                  mha_total > 0
                      ? static_cast<double>(r.total_bytes) / static_cast<double>(mha_total)
                      : 0.0);
    }
  }
  if (!args.plot.empty()) {
    std::vector<PlotSeries> series;
    const int64_t max_context = std::max<int64_t>(args.context, 16);
    for (const KvReportRow& r : rows) {
      PlotSeries s{.label = r.name + " (" + r.kv_dtype +
                            (r.policy == "full" ? "" : ", " + r.policy) + ")"};
      int64_t previous = 0;
      for (double c = 1; previous < max_context; c *= 1.1) {
        const int64_t tokens =
            std::min<int64_t>(max_context, static_cast<int64_t>(std::llround(c)));
        if (tokens == previous) continue;
        previous = tokens;
        s.x.push_back(static_cast<double>(tokens));
        s.y.push_back(static_cast<double>(KvReportBytesAt(r, tokens)));
      }
      series.push_back(std::move(s));
    }
    WriteStringToFile(args.plot, RenderLogLogSvg(series, {.title = "KV cache memory vs context (" +
                                                                   config.architecture + ")",
                                                          .x_label = "context length (tokens)",
                                                          .y_label = "KV cache bytes"}));
    std::fprintf(stderr, "wrote %s\n", args.plot.c_str());
  }
  return 0;
}

}  // namespace

void RegisterKvReport(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<KvReportArgs>();
  CLI::App* cmd =
      app.add_subcommand("kv-report", "KV cache memory of MHA/GQA/MQA/MLA from config.json");
  cmd->add_option("--model,-m", args->model_dir,
                  "Model directory or .gguf file (only the configuration is read)");
  cmd->add_option("--context", args->context, "Context length in tokens")->capture_default_str();
  cmd->add_option("--kv-policy", args->kv_policy, "Policy of the first row")->capture_default_str();
  cmd->add_option("--kv-dtype", args->kv_dtype, "f32, bf16, f16 or int8")->capture_default_str();
  cmd->add_option("--plot", args->plot, "Write an SVG plot of memory vs context");
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->callback([args, exit_code] { *exit_code = RunKvReport(*args); });
}

}  // namespace mlarun::cli
