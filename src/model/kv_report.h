// KV-cache memory of a model's attention and of the same attention redesigned (MHA, GQA, MQA,
// MLA, MLA + int8) at a given context, from config.json alone.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kv/kv_layout.h"
#include "kv/kv_policy.h"
#include "model/config.h"

namespace mlarun {

// The rows one token stores per layer for `config`'s own attention at `kv_dtype`.
KvLayout MakeKvLayoutFromConfig(const ModelConfig& config, DType kv_dtype);

struct KvReportRow {
  std::string name;             // "model", "MHA", "GQA-8", ...
  std::string attention;        // "MLA 576/512 (latent)", "GQA 4 kv heads x (192+128)", ...
  std::string kv_dtype;         // "bf16", "int8", ...
  std::string policy;           // "full", "window:512,sinks:4"
  int window = 0;               // effective sliding window (policy and model), 0 = none
  int64_t bytes_per_token = 0;  // per cached row, all layers
  int64_t rows_held = 0;        // cache rows at the context (policy applied)
  int64_t total_bytes = 0;      // bytes_per_token * rows_held
};

struct KvReportOptions {
  int64_t context = 4096;
  KvPolicy policy;
  DType kv_dtype = DType::kBF16;
};

// The first row is the model as configured by `options` (its attention, dtype and policy); then
// full-cache rows for MHA, GQA with 8/4/2 kv heads, MQA (head dims of the model), and for
// DeepSeek models MLA and MLA + int8.
std::vector<KvReportRow> BuildKvReport(const ModelConfig& config, const KvReportOptions& options);

// Total bytes of `row`'s design at another context length (for plots).
int64_t KvReportBytesAt(const KvReportRow& row, int64_t context);

}  // namespace mlarun
