// Hugging Face checkpoint -> GGUF. Tensor names, shapes and metadata keys follow llama.cpp's
// converter (convert_hf_to_gguf.py: DeepseekV2Model, LlamaModel, Qwen2Model) and the keys its
// loader reads (llama-model.cpp); the mixes follow llama_tensor_get_type (llama-quant.cpp) for
// the tensors these architectures have.
#include "model/gguf_export.h"

#include <fnmatch.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "formats/gguf.h"
#include "kernels/block_formats.h"
#include "model/config.h"
#include "model/gguf_tokenizer.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace mlarun {

namespace {

// llama_ftype values (llama.h).
constexpr GgufMix kMixes[] = {
    {"f32", kGgmlF32, 0, 0, 0},
    {"f16", kGgmlF16, 0, 0, 1},
    {"bf16", kGgmlBF16, 0, 0, 32},
    {"q8_0", kGgmlQ8_0, 0, 0, 7},
    {"q6_k", kGgmlQ6_K, 0, 0, 18},
    {"q5_k_m", kGgmlQ5_K, kGgmlQ6_K, kGgmlQ6_K, 17},
    {"q4_k_m", kGgmlQ4_K, kGgmlQ6_K, kGgmlQ6_K, 15},
    {"q4_0", kGgmlQ4_0, 0, kGgmlQ6_K, 2},
};

// The type llama.cpp stores a row of `row_length` in when `type`'s blocks do not divide it.
uint32_t Fallback(uint32_t type, int64_t row_length) {
  const BlockFormat& f = GetBlockFormat(type);
  if (row_length % f.block_values == 0) return type;
  switch (type) {
    case kGgmlQ4_K:
      type = kGgmlQ5_0;
      break;
    case kGgmlQ5_K:
      type = kGgmlQ5_1;
      break;
    case kGgmlQ6_K:
      type = kGgmlQ8_0;
      break;
    default:
      type = kGgmlF16;
  }
  return row_length % GetBlockFormat(type).block_values == 0 ? type : kGgmlF16;
}

// A tensor to write: its declaration and its rows as float32 (row r of the 2-D [rows, ne[0]]
// view, rows = the product of the outer dimensions).
struct ExportTensor {
  GgufTensorDecl decl;
  std::function<void(int64_t row, float* out)> row;
  std::vector<WeightMatrix*> sources;  // the matrices `row` reads (GgufWriteHooks)
};

int64_t Rows(const GgufTensorDecl& d) {
  int64_t rows = 1;
  for (size_t i = 1; i < d.ne.size(); ++i) rows *= d.ne[i];
  return rows;
}

class Exporter {
 public:
  Exporter(const ModelConfig& c, ModelWeights& w, const GgufExportOptions& o)
      : c_(c), w_(w), o_(o) {}

  std::vector<ExportTensor> Tensors() {
    Matrix("token_embd.weight", w_.embed_tokens, -1);
    for (int i = 0; i < c_.num_hidden_layers; ++i) Layer(i);
    Vector("output_norm.weight", w_.norm);
    if (!c_.tie_word_embeddings) Matrix("output.weight", w_.lm_head, -1);
    return std::move(tensors_);
  }

 private:
  void Add(std::string name, std::vector<int64_t> ne, bool is_matrix, int layer,
           std::function<void(int64_t, float*)> row, std::vector<WeightMatrix*> sources = {}) {
    const std::string base = layer >= 0 ? name.substr(name.find('.', 4) + 1) : name;
    uint32_t type = GgufTensorType(*o_.mix, base, ne[0], is_matrix, layer, c_.num_hidden_layers);
    for (const GgufTypeOverride& o : o_.tensor_types) {
      const std::string glob = "*" + o.pattern + "*";
      if (is_matrix && fnmatch(glob.c_str(), name.c_str(), 0) == 0)
        type = Fallback(o.ggml_type, ne[0]);
    }
    tensors_.push_back({.decl = {.name = std::move(name), .ggml_type = type, .ne = std::move(ne)},
                        .row = std::move(row),
                        .sources = std::move(sources)});
  }
  void Matrix(const std::string& name, WeightMatrix& m, int layer) {
    Add(name, {m.cols, m.rows}, true, layer, [&m](int64_t r, float* out) { m.DecodeRow(r, out); },
        {&m});
  }
  void Vector(const std::string& name, const F32Vector& v, int layer = -1) {
    Add(name, {static_cast<int64_t>(v.values.size())}, false, layer,
        [&v](int64_t, float* out) { std::copy(v.values.begin(), v.values.end(), out); });
  }
  void Mlp(const std::string& b, MlpWeights& m, const std::string& suffix, int layer) {
    Matrix(b + "ffn_gate" + suffix + ".weight", m.gate_proj, layer);
    Matrix(b + "ffn_up" + suffix + ".weight", m.up_proj, layer);
    Matrix(b + "ffn_down" + suffix + ".weight", m.down_proj, layer);
  }
  void Layer(int i) {
    LayerWeights& l = w_.layers[static_cast<size_t>(i)];
    const std::string b = "blk." + std::to_string(i) + ".";
    Vector(b + "attn_norm.weight", l.input_layernorm, i);
    if (c_.family == ArchFamily::kDeepseek) {
      Mla(b, l.mla, i);
    } else {
      Gqa(b, l.gqa, i);
    }
    Vector(b + "ffn_norm.weight", l.post_attention_layernorm, i);
    if (c_.family == ArchFamily::kDeepseek && c_.IsMoeLayer(i)) {
      Matrix(b + "ffn_gate_inp.weight", l.moe.gate, i);
      if (!l.moe.e_score_correction_bias.empty())
        Vector(b + "exp_probs_b.bias", l.moe.e_score_correction_bias, i);
      std::vector<MlpWeights>& experts = l.moe.experts;
      const int64_t n = static_cast<int64_t>(experts.size());
      using Proj = WeightMatrix MlpWeights::*;
      for (auto [proj, name] : {std::pair<Proj, const char*>{&MlpWeights::gate_proj, "gate"},
                                {&MlpWeights::up_proj, "up"},
                                {&MlpWeights::down_proj, "down"}}) {
        const WeightMatrix& first = experts[0].*proj;
        const int64_t rows = first.rows;
        std::vector<WeightMatrix*> sources;
        for (MlpWeights& e : experts) sources.push_back(&(e.*proj));
        Add(
            b + "ffn_" + name + "_exps.weight", {first.cols, rows, n}, true, i,
            [&experts, proj, rows](int64_t r, float* out) {
              (experts[static_cast<size_t>(r / rows)].*proj).DecodeRow(r % rows, out);
            },
            std::move(sources));
      }
      if (c_.n_shared_experts > 0) Mlp(b, l.moe.shared, "_shexp", i);
    } else {
      Mlp(b, l.mlp, "", i);
    }
  }
  void Mla(const std::string& b, MlaWeights& m, int i) {
    if (c_.q_lora_rank > 0) {
      Matrix(b + "attn_q_a.weight", m.q_a_proj, i);
      Vector(b + "attn_q_a_norm.weight", m.q_a_layernorm, i);
      Matrix(b + "attn_q_b.weight", m.q_b_proj, i);
    } else {
      Matrix(b + "attn_q.weight", m.q_proj, i);
    }
    Matrix(b + "attn_kv_a_mqa.weight", m.kv_a_proj_with_mqa, i);
    Vector(b + "attn_kv_a_norm.weight", m.kv_a_layernorm, i);
    if (o_.split_mla) {
      // attn_k_b [n_head, rank, nope]: row (h, r) is column r of W_uk_h (kv_b_proj's rows
      // h (nope + v) + n, n < nope); attn_v_b [n_head, v, rank]: W_uv_h's rows as stored.
      const int64_t nope = c_.qk_nope_head_dim, dv = c_.v_head_dim, rank = c_.kv_lora_rank;
      WeightMatrix* kv_b = &m.kv_b_proj;
      Add(b + "attn_k_b.weight", {nope, rank, c_.num_attention_heads}, true, i,
          [kv_b, nope, dv, rank](int64_t r, float* out) {
            // Each thread decodes a head's W_uk [nope, rank] once for its run of rows.
            thread_local const void* cached = nullptr;
            thread_local int64_t cached_head = -1;
            thread_local std::vector<float> w_uk;
            const int64_t h = r / rank, col = r % rank;
            if (cached != kv_b->data || cached_head != h) {
              w_uk.resize(static_cast<size_t>(nope * rank));
              for (int64_t n = 0; n < nope; ++n)
                kv_b->DecodeRow(h * (nope + dv) + n, w_uk.data() + n * rank);
              cached = kv_b->data;
              cached_head = h;
            }
            for (int64_t n = 0; n < nope; ++n) out[n] = w_uk[static_cast<size_t>(n * rank + col)];
          },
          {kv_b});
      Add(b + "attn_v_b.weight", {rank, dv, c_.num_attention_heads}, true, i,
          [kv_b, nope, dv](int64_t r, float* out) {
            kv_b->DecodeRow(r / dv * (nope + dv) + nope + r % dv, out);
          },
          {kv_b});
    } else {
      Matrix(b + "attn_kv_b.weight", m.kv_b_proj, i);
    }
    Matrix(b + "attn_output.weight", m.o_proj, i);
  }
  void Gqa(const std::string& b, GqaWeights& g, int i) {
    const bool llama = c_.model_type != "qwen2";
    const int64_t d = c_.head_dim;
    for (auto [m, name] :
         {std::pair<WeightMatrix*, const char*>{&g.q_proj, "attn_q"}, {&g.k_proj, "attn_k"}}) {
      if (!llama) {
        Matrix(b + name + ".weight", *m, i);
        continue;
      }
      // llama.cpp rotates adjacent pairs: its converter reorders each head's rows
      // [2, d/2] -> [d/2, 2]; GGUF row h d + 2 j + k is Hugging Face row h d + k d/2 + j.
      Add(b + name + ".weight", {m->cols, m->rows}, true, i,
          [m, d](int64_t r, float* out) {
            const int64_t h = r / d, j = (r % d) / 2, k = r % 2;
            m->DecodeRow(h * d + k * (d / 2) + j, out);
          },
          {m});
    }
    Matrix(b + "attn_v.weight", g.v_proj, i);
    Matrix(b + "attn_output.weight", g.o_proj, i);
    if (c_.attention_bias) {
      Vector(b + "attn_q.bias", g.q_bias, i);
      Vector(b + "attn_k.bias", g.k_bias, i);
      Vector(b + "attn_v.bias", g.v_bias, i);
    }
  }

  const ModelConfig& c_;
  ModelWeights& w_;
  const GgufExportOptions& o_;
  std::vector<ExportTensor> tensors_;
};

void Put(std::vector<GgufKeyValue>& kv, std::string key, GgufValue value) {
  kv.push_back({std::move(key), std::move(value)});
}

std::vector<GgufKeyValue> Metadata(const std::string& name, const ModelConfig& c,
                                   const GgufMix& mix) {
  if (c.family == ArchFamily::kDeepseek && c.moe_layer_freq != 1) {
    throw Error("moe_layer_freq " + std::to_string(c.moe_layer_freq) +
                " has no GGUF key (deepseek2 makes every layer after the dense ones MoE)");
  }
  if (c.sliding_window != 0) {
    throw Error("sliding_window " + std::to_string(c.sliding_window) +
                " has no key in llama.cpp's llama architecture");
  }
  std::vector<GgufKeyValue> kv;
  const bool deepseek = c.family == ArchFamily::kDeepseek;
  const std::string arch = deepseek ? "deepseek2" : c.model_type == "qwen2" ? "qwen2" : "llama";
  const std::string a = arch + ".";
  Put(kv, "general.architecture", GgufValue::String(arch));
  Put(kv, "general.name", GgufValue::String(name));
  Put(kv, "general.alignment", GgufValue::Uint32(GgufFile::kDefaultAlignment));
  Put(kv, "general.file_type", GgufValue::Uint32(mix.file_type));
  Put(kv, "general.quantization_version", GgufValue::Uint32(2));
  auto u32 = [](int64_t v) { return GgufValue::Uint32(static_cast<uint32_t>(v)); };
  auto f32 = [](double v) { return GgufValue::Float32(static_cast<float>(v)); };
  Put(kv, a + "block_count", u32(c.num_hidden_layers));
  Put(kv, a + "context_length", u32(c.max_position_embeddings));
  Put(kv, a + "embedding_length", u32(c.hidden_size));
  Put(kv, a + "feed_forward_length", u32(c.intermediate_size));
  Put(kv, a + "attention.head_count", u32(c.num_attention_heads));
  // Absorbed MLA is multi-query attention over the latent: one KV head.
  Put(kv, a + "attention.head_count_kv", u32(deepseek ? 1 : c.num_key_value_heads));
  Put(kv, a + "rope.freq_base", f32(c.rope_theta));
  Put(kv, a + "attention.layer_norm_rms_epsilon", f32(c.rms_norm_eps));
  Put(kv, a + "vocab_size", u32(c.vocab_size));
  if (!deepseek) {
    Put(kv, a + "rope.dimension_count", u32(c.head_dim));
    Put(kv, a + "attention.key_length", u32(c.head_dim));
    Put(kv, a + "attention.value_length", u32(c.head_dim));
    return kv;
  }
  const int rope = c.qk_rope_head_dim;
  Put(kv, a + "leading_dense_block_count", u32(c.first_k_dense_replace));
  Put(kv, a + "attention.q_lora_rank", u32(c.q_lora_rank));
  Put(kv, a + "attention.kv_lora_rank", u32(c.kv_lora_rank));
  Put(kv, a + "attention.key_length", u32(c.kv_lora_rank + rope));
  Put(kv, a + "attention.value_length", u32(c.kv_lora_rank));
  Put(kv, a + "attention.key_length_mla", u32(c.qk_nope_head_dim + rope));
  Put(kv, a + "attention.value_length_mla", u32(c.v_head_dim));
  Put(kv, a + "rope.dimension_count", u32(rope));
  if (c.n_routed_experts > 0) {
    Put(kv, a + "expert_used_count", u32(c.num_experts_per_tok));
    Put(kv, a + "expert_feed_forward_length", u32(c.moe_intermediate_size));
    Put(kv, a + "expert_count", u32(c.n_routed_experts));
    Put(kv, a + "expert_shared_count", u32(c.n_shared_experts));
    Put(kv, a + "expert_weights_scale", f32(c.routed_scaling_factor));
    Put(kv, a + "expert_weights_norm", GgufValue::Bool(c.norm_topk_prob));
    Put(kv, a + "expert_gating_func", u32(c.scoring_func == ScoringFunc::kSigmoid ? 2 : 1));
    // A group limit that keeps every group limits nothing (and llama.cpp refuses it).
    if (c.n_group > 1 && c.topk_group < c.n_group) {
      Put(kv, a + "expert_group_count", u32(c.n_group));
      Put(kv, a + "expert_group_used_count", u32(c.topk_group));
    }
  }
  if (c.rope_scaling) {
    const RopeScaling& y = *c.rope_scaling;
    if (y.mscale != y.mscale_all_dim) {
      throw Error("rope_scaling mscale (" + std::to_string(y.mscale) +
                  ") differs from mscale_all_dim (" + std::to_string(y.mscale_all_dim) +
                  "), which GGUF cannot express (one yarn_log_multiplier)");
    }
    Put(kv, a + "rope.scaling.type", GgufValue::String("yarn"));
    Put(kv, a + "rope.scaling.factor", f32(y.factor));
    Put(kv, a + "rope.scaling.original_context_length", u32(y.original_max_position_embeddings));
    Put(kv, a + "rope.scaling.yarn_beta_fast", f32(y.beta_fast));
    Put(kv, a + "rope.scaling.yarn_beta_slow", f32(y.beta_slow));
    // llama.cpp's converter writes 0.1 * mscale_all_dim; its loader reads it back as such.
    Put(kv, a + "rope.scaling.yarn_log_multiplier", f32(0.1 * y.mscale_all_dim));
  }
  return kv;
}

// The bytes of tensor `t` in its type, rows in parallel.
void FillTensor(ThreadPool& pool, const ExportTensor& t, std::vector<uint8_t>& out) {
  const BlockFormat& f = GetBlockFormat(t.decl.ggml_type);
  const int64_t cols = t.decl.ne[0];
  const int64_t rows = Rows(t.decl);
  const int64_t row_bytes = f.Bytes(cols);
  out.resize(static_cast<size_t>(rows * row_bytes));
  std::atomic<int64_t> bad_row{-1};
  constexpr int64_t kRowsPerItem = 16;
  pool.ParallelFor((rows + kRowsPerItem - 1) / kRowsPerItem, [&](int64_t item, int) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(cols));
    for (int64_t r = item * kRowsPerItem; r < std::min(rows, (item + 1) * kRowsPerItem); ++r) {
      t.row(r, row.data());
      for (float v : row) {
        if (!std::isfinite(v)) {
          int64_t seen = bad_row.load();
          while ((seen < 0 || r < seen) && !bad_row.compare_exchange_weak(seen, r)) {
          }
          break;
        }
      }
      f.quantize(row.data(), cols, out.data() + r * row_bytes);
    }
  });
  if (bad_row.load() >= 0) {
    throw Error("tensor '" + t.decl.name + "' holds NaN or inf in row " +
                std::to_string(bad_row.load()));
  }
}

}  // namespace

const GgufMix* FindGgufMix(std::string_view name) {
  for (const GgufMix& m : kMixes) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

GgufTypeOverride ParseGgufTypeOverride(const std::string& spec) {
  const size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0) {
    throw Error("--tensor-type: '" + spec + "' is not PATTERN=TYPE (e.g. attn_v_b=bf16)");
  }
  const std::string type_name = spec.substr(eq + 1);
  const BlockFormat* f = FindBlockFormatByName(type_name);
  if (f == nullptr || f->quantize == nullptr || (f->block_values > 1 && !f->multipliable())) {
    throw Error("--tensor-type: '" + type_name +
                "' is not a type mlarun writes (f32, f16, bf16, q8_0, q6_k, q5_k, q4_k, q5_1, "
                "q5_0, q4_1, q4_0)");
  }
  return {.pattern = spec.substr(0, eq), .ggml_type = f->ggml_type};
}

std::string GgufMixNames() {
  std::string names;
  for (const GgufMix& m : kMixes) names += (names.empty() ? "" : ", ") + std::string(m.name);
  return names;
}

bool UseMoreBits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

uint32_t GgufTensorType(const GgufMix& mix, std::string_view gguf_name, int64_t row_length,
                        bool is_matrix, int layer, int n_layers) {
  if (!is_matrix || gguf_name == "ffn_gate_inp.weight") return kGgmlF32;
  uint32_t type = mix.base_type;
  if (gguf_name == "output.weight" && mix.output_type != 0) {
    type = mix.output_type;
  } else if (mix.more_bits_type != 0 && layer >= 0 && UseMoreBits(layer, n_layers) &&
             (gguf_name == "attn_v.weight" || gguf_name.starts_with("ffn_down"))) {
    type = mix.more_bits_type;
  }
  return Fallback(type, row_length);
}

void WriteGgufTensors(const std::string& out_path, const ModelConfig& config, ModelWeights& weights,
                      const std::vector<GgufKeyValue>& metadata, const GgufExportOptions& options,
                      const GgufWriteHooks& hooks) {
  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool& pool =
      options.pool != nullptr ? *options.pool : *(own_pool = std::make_unique<ThreadPool>(0));
  Exporter exporter(config, weights, options);
  const std::vector<ExportTensor> tensors = exporter.Tensors();
  std::vector<GgufTensorDecl> decls;
  std::map<std::string, const ExportTensor*> by_name;
  for (const ExportTensor& t : tensors) {
    decls.push_back(t.decl);
    by_name[t.decl.name] = &t;
  }
  WriteGguf(out_path, metadata, decls, [&](const GgufTensorDecl& d, std::vector<uint8_t>& out) {
    const ExportTensor& t = *by_name.at(d.name);
    if (hooks.materialize) {
      for (WeightMatrix* m : t.sources) hooks.materialize(*m);
    }
    FillTensor(pool, t, out);
    if (hooks.release) {
      for (WeightMatrix* m : t.sources) hooks.release(*m);
    }
  });
}

std::vector<GgufKeyValue> GgufModelMetadata(const std::string& name,
                                            const std::string& tokenizer_dir,
                                            const ModelConfig& config, const GgufMix& mix) {
  std::vector<GgufKeyValue> metadata = Metadata(name, config, mix);
  AddGgufTokenizer(tokenizer_dir, config, metadata);
  return metadata;
}

void WriteGgufModel(const std::string& src_dir, const std::string& out_path,
                    const GgufExportOptions& options) {
  if (options.mix == nullptr) throw Error("quantize: no GGUF type given");
  const ModelConfig config = LoadModelConfig(src_dir);
  if (config.q8_weights) {
    throw Error(src_dir +
                ": holds Q8 weights written by mlarun quantize; convert the checkpoint "
                "it was made from");
  }
  const SafetensorsArchive archive = SafetensorsArchive::Open(src_dir, FileLoad::kMmap);
  ModelWeights weights;
  LoadWeights(config, archive, src_dir, weights);
  std::vector<GgufKeyValue> metadata;
  try {
    metadata =
        GgufModelMetadata(std::filesystem::path(src_dir).lexically_normal().filename().string(),
                          src_dir, config, *options.mix);
  } catch (const Error& e) {
    throw Error(src_dir + "/config.json: " + e.what());
  }
  const GgufWriteHooks hooks{.release = [&](WeightMatrix& m) {
    archive.ReleasePages(m.data, static_cast<size_t>(WeightBytes(m, 0, m.rows)));
  }};
  try {
    WriteGgufTensors(out_path, config, weights, metadata, options, hooks);
  } catch (const Error& e) {
    throw Error(src_dir + ": " + e.what());
  }
}

}  // namespace mlarun
