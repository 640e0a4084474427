// KV memory arithmetic: bytes/token = n_layers * n_head_kv * (head_dim_k [+ head_dim_v]) * dtype
// size (int8 rows carry scales, see kernels/kv_row.h); rows held follow the policy formula.
#include "model/kv_report.h"

#include <algorithm>

namespace mlarun {

namespace {

std::string DtypeOption(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF16:
      return "f16";
    case DType::kBF16:
      return "bf16";
    case DType::kI8:
      return "int8";
    default:
      return std::string(DTypeName(dtype));
  }
}

int64_t BytesPerToken(const ModelConfig& c, const KvRowFormat& row) {
  return static_cast<int64_t>(row.RowBytes()) * c.num_hidden_layers;
}

// Head dims of a per-head (non-latent) cache of this model.
void HeadDims(const ModelConfig& c, int* head_dim_k, int* head_dim_v) {
  if (c.family == ArchFamily::kDeepseek) {
    *head_dim_k = c.QkHeadDim();
    *head_dim_v = c.v_head_dim;
  } else {
    *head_dim_k = c.head_dim;
    *head_dim_v = c.head_dim;
  }
}

}  // namespace

KvLayout MakeKvLayoutFromConfig(const ModelConfig& c, DType kv_dtype) {
  KvRowFormat row;
  if (c.family == ArchFamily::kDeepseek) {
    row = {.dtype = kv_dtype,
           .n_head_kv = 1,
           .head_dim_k = c.kv_lora_rank + c.qk_rope_head_dim,
           .head_dim_v = c.kv_lora_rank,
           .v_aliases_k = true,
           .rope_tail_dim = c.qk_rope_head_dim};
  } else {
    row = {.dtype = kv_dtype,
           .n_head_kv = c.num_key_value_heads,
           .head_dim_k = c.head_dim,
           .head_dim_v = c.head_dim,
           .v_aliases_k = false,
           .rope_tail_dim = 0,
           .quant_group = std::min(128, c.head_dim)};
  }
  KvLayout layout;
  layout.layers.assign(static_cast<size_t>(c.num_hidden_layers), row);
  return layout;
}

std::vector<KvReportRow> BuildKvReport(const ModelConfig& c, const KvReportOptions& o) {
  std::vector<KvReportRow> rows;
  int dk = 0;
  int dv = 0;
  HeadDims(c, &dk, &dv);
  const std::string dtype = DtypeOption(o.kv_dtype);
  const std::string head_dims = std::to_string(dk) + "+" + std::to_string(dv);
  const int effective_window =
      c.sliding_window > 0
          ? (o.policy.window > 0 ? std::min(o.policy.window, c.sliding_window) : c.sliding_window)
          : o.policy.window;

  // The model as configured.
  const KvRowFormat own = MakeKvLayoutFromConfig(c, o.kv_dtype).layers[0];
  KvReportRow model{.name = "model",
                    .kv_dtype = dtype,
                    .policy = o.policy.ToString(),
                    .window = effective_window,
                    .bytes_per_token = BytesPerToken(c, own),
                    .rows_held = PolicyRowsHeld(o.policy, effective_window, o.context)};
  model.attention =
      c.family == ArchFamily::kDeepseek
          ? "MLA latent " + std::to_string(c.kv_lora_rank) + "+" +
                std::to_string(c.qk_rope_head_dim)
          : "GQA " + std::to_string(c.num_key_value_heads) + " kv heads x " + head_dims;
  rows.push_back(model);

  auto per_head = [&](const std::string& name, int n_head_kv) {
    const KvRowFormat f{.dtype = o.kv_dtype,
                        .n_head_kv = n_head_kv,
                        .head_dim_k = dk,
                        .head_dim_v = dv,
                        .quant_group = std::min(128, dk)};
    rows.push_back({.name = name,
                    .attention = std::to_string(n_head_kv) + " kv heads x " + head_dims,
                    .kv_dtype = dtype,
                    .policy = "full",
                    .bytes_per_token = BytesPerToken(c, f),
                    .rows_held = o.context});
  };
  per_head("MHA", c.num_attention_heads);
  for (int groups : {8, 4, 2}) {
    if (groups < c.num_attention_heads && c.num_attention_heads % groups == 0) {
      per_head("GQA-" + std::to_string(groups), groups);
    }
  }
  per_head("MQA", 1);
  if (c.family == ArchFamily::kDeepseek) {
    std::vector<DType> dtypes = {o.kv_dtype};
    if (o.kv_dtype != DType::kI8) dtypes.push_back(DType::kI8);
    for (DType d : dtypes) {
      const KvRowFormat f = MakeKvLayoutFromConfig(c, d).layers[0];
      rows.push_back({.name = d == DType::kI8 ? "MLA+int8" : "MLA",
                      .attention = "latent " + std::to_string(c.kv_lora_rank) + "+" +
                                   std::to_string(c.qk_rope_head_dim),
                      .kv_dtype = DtypeOption(d),
                      .policy = "full",
                      .bytes_per_token = BytesPerToken(c, f),
                      .rows_held = o.context});
    }
  }
  for (KvReportRow& r : rows) r.total_bytes = r.bytes_per_token * r.rows_held;
  return rows;
}

int64_t KvReportBytesAt(const KvReportRow& row, int64_t context) {
  return row.bytes_per_token * PolicyRowsHeld(ParseKvPolicy(row.policy), row.window, context);
}

}  // namespace mlarun
