// GGUF metadata -> config.json, and GGUF tensors -> Hugging Face names. Keys and tensor names
// are those llama.cpp's converter (convert_hf_to_gguf.py, gguf-py constants.py) writes and its
// loader (llama-model.cpp, LLM_ARCH_DEEPSEEK2 / LLAMA / QWEN2) reads.
#include "model/gguf_model.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "kernels/matmul.h"

namespace mlarun {

namespace {

using Json = nlohmann::json;

// Reads metadata keys of one architecture, naming the file and the key in errors.
class MetadataReader {
 public:
  MetadataReader(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

  std::string Key(const std::string& suffix) const { return arch_ + "." + suffix; }
  uint64_t Uint(const std::string& suffix) const { return file_.GetUint(Key(suffix)); }
  uint64_t UintOr(const std::string& suffix, uint64_t fallback) const {
    return file_.FindUint(Key(suffix)).value_or(fallback);
  }
  double Float(const std::string& suffix) const { return file_.GetFloat(Key(suffix)); }
  double FloatOr(const std::string& suffix, double fallback) const {
    return file_.FindFloat(Key(suffix)).value_or(fallback);
  }
  bool BoolOr(const std::string& suffix, bool fallback) const {
    return file_.FindBool(Key(suffix)).value_or(fallback);
  }
  bool Has(const std::string& suffix) const { return file_.Find(Key(suffix)) != nullptr; }
  [[noreturn]] void Fail(const std::string& suffix, const std::string& what) const {
    throw Error(file_.path() + ": metadata key '" + Key(suffix) + "' " + what);
  }

 private:
  const GgufFile& file_;
  std::string arch_;
};

// The vocabulary size: `{arch}.vocab_size`, else the tokenizer's token count, else the
// embedding table's rows.
int64_t VocabSize(const GgufFile& file, const MetadataReader& meta) {
  if (const auto v = file.FindUint(meta.Key("vocab_size"))) return static_cast<int64_t>(*v);
  if (const auto* tokens = file.FindStringArray("tokenizer.ggml.tokens"))
    return static_cast<int64_t>(tokens->size());
  if (const GgufTensor* embd = file.FindTensor("token_embd.weight"); embd && embd->ne.size() == 2)
    return embd->ne[1];
  throw Error(file.path() + ": metadata key '" + meta.Key("vocab_size") +
              "' is missing (and there is no tokenizer.ggml.tokens or token_embd.weight)");
}

void AddDeepseek(const GgufFile& file, const MetadataReader& meta, Json& c) {
  const uint64_t rope = meta.Uint("rope.dimension_count");
  c["qk_rope_head_dim"] = rope;
  c["kv_lora_rank"] = meta.Uint("attention.kv_lora_rank");
  const uint64_t q_lora = meta.UintOr("attention.q_lora_rank", 0);
  c["q_lora_rank"] = q_lora == 0 ? Json(nullptr) : Json(q_lora);
  // Files with attn_k_b / attn_v_b give the MLA head sizes in key_length_mla / value_length_mla
  // (key_length and value_length then describe the latent MQA); older files in key_length.
  const bool mla_keys = meta.Has("attention.key_length_mla");
  const uint64_t key_length =
      meta.Uint(mla_keys ? "attention.key_length_mla" : "attention.key_length");
  if (key_length <= rope) {
    meta.Fail(mla_keys ? "attention.key_length_mla" : "attention.key_length",
              "must exceed rope.dimension_count (" + std::to_string(rope) + "), got " +
                  std::to_string(key_length));
  }
  c["qk_nope_head_dim"] = key_length - rope;
  c["v_head_dim"] = meta.Uint(mla_keys ? "attention.value_length_mla" : "attention.value_length");
  const uint64_t n_expert = meta.UintOr("expert_count", 0);
  // expert_gating_func: 1 softmax, 2 sigmoid (llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE); files
  // written before the key existed are DeepSeek-V2's softmax.
  const uint64_t gating = meta.UintOr("expert_gating_func", 1);
  if (gating != 1 && gating != 2)
    meta.Fail("expert_gating_func", "must be 1 (softmax) or 2 (sigmoid)");
  const bool sigmoid = gating == 2;
  c["architectures"] = {sigmoid ? "DeepseekV3ForCausalLM" : "DeepseekV2ForCausalLM"};
  c["model_type"] = sigmoid ? "deepseek_v3" : "deepseek_v2";
  if (n_expert > 0) {
    c["n_routed_experts"] = n_expert;
    c["moe_intermediate_size"] = meta.Uint("expert_feed_forward_length");
    c["num_experts_per_tok"] = meta.Uint("expert_used_count");
    c["n_shared_experts"] = meta.UintOr("expert_shared_count", 0);
    c["first_k_dense_replace"] = meta.UintOr("leading_dense_block_count", 0);
    c["norm_topk_prob"] = meta.BoolOr("expert_weights_norm", false);
    c["routed_scaling_factor"] = meta.FloatOr("expert_weights_scale", 1.0);
    c["scoring_func"] = sigmoid ? "sigmoid" : "softmax";
    const uint64_t groups = meta.UintOr("expert_group_count", 1);
    c["n_group"] = groups;
    c["topk_group"] = meta.UintOr("expert_group_used_count", groups);
    // DeepSeek-V3's noaux_tc (sigmoid scores, e_score_correction_bias); V2 limits the groups by
    // their top score where it has groups (group_limited_greedy).
    c["topk_method"] = sigmoid ? "noaux_tc" : groups > 1 ? "group_limited_greedy" : "greedy";
  }
  if (file.FindString(meta.Key("rope.scaling.type")) != nullptr) {
    const std::string& type = file.GetString(meta.Key("rope.scaling.type"));
    if (type == "yarn") {
      // The converter writes 0.1 * mscale_all_dim as yarn_log_multiplier; DeepSeek's configs
      // have mscale == mscale_all_dim, the only case GGUF can express.
      const double mscale = meta.FloatOr("rope.scaling.yarn_log_multiplier", 0.0) / 0.1;
      c["rope_scaling"] = {
          {"type", "yarn"},
          {"factor", meta.Float("rope.scaling.factor")},
          {"original_max_position_embeddings", meta.Uint("rope.scaling.original_context_length")},
          {"beta_fast", meta.FloatOr("rope.scaling.yarn_beta_fast", 32.0)},
          {"beta_slow", meta.FloatOr("rope.scaling.yarn_beta_slow", 1.0)},
          {"mscale", mscale},
          {"mscale_all_dim", mscale}};
    } else if (type != "none") {
      meta.Fail("rope.scaling.type", "'" + type + "' is not supported (yarn, none)");
    }
  }
}

void AddLlama(const GgufFile& file, const MetadataReader& meta, const std::string& arch, Json& c) {
  const bool qwen2 = arch == "qwen2";
  c["architectures"] = {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"};
  c["model_type"] = arch;
  const uint64_t heads = meta.Uint("attention.head_count");
  c["num_key_value_heads"] = meta.UintOr("attention.head_count_kv", heads);
  if (const auto head_dim = file.FindUint(meta.Key("attention.key_length")))
    c["head_dim"] = *head_dim;
  if (qwen2) c["use_sliding_window"] = false;
  if (const std::string* type = file.FindString(meta.Key("rope.scaling.type"));
      type != nullptr && *type != "none") {
    meta.Fail("rope.scaling.type", "'" + *type + "' is not supported for " + arch);
  }
}

}  // namespace

bool IsGgufFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

std::string GgufConfigJson(const GgufFile& file) {
  const std::string& arch = file.GetString("general.architecture");
  if (arch != "deepseek2" && arch != "llama" && arch != "qwen2") {
    throw Error(file.path() + ": metadata key 'general.architecture' is '" + arch +
                "', which mlarun does not run (supported: deepseek2, llama, qwen2)");
  }
  const MetadataReader meta(file, arch);
  Json c;
  c["vocab_size"] = VocabSize(file, meta);
  c["hidden_size"] = meta.Uint("embedding_length");
  c["num_hidden_layers"] = meta.Uint("block_count");
  c["num_attention_heads"] = meta.Uint("attention.head_count");
  c["intermediate_size"] = meta.Uint("feed_forward_length");
  c["rms_norm_eps"] = meta.Float("attention.layer_norm_rms_epsilon");
  c["rope_theta"] = meta.FloatOr("rope.freq_base", 10000.0);
  c["max_position_embeddings"] = meta.Uint("context_length");
  // llama.cpp ties the output to token_embd when the file has no output.weight.
  c["tie_word_embeddings"] = file.FindTensor("output.weight") == nullptr;
  if (const auto bos = file.FindUint("tokenizer.ggml.bos_token_id")) c["bos_token_id"] = *bos;
  if (const auto eos = file.FindUint("tokenizer.ggml.eos_token_id")) c["eos_token_id"] = *eos;
  if (arch == "deepseek2") {
    AddDeepseek(file, meta, c);
  } else {
    AddLlama(file, meta, arch, c);
  }
  return c.dump();
}

ModelConfig GgufModelConfig(const GgufFile& file) {
  return ParseModelConfig(GgufConfigJson(file), file.path() + " (GGUF metadata as config.json)");
}

namespace {

// Per-layer tensors: the name after "blk.N." and after "model.layers.N.".
struct LayerName {
  const char* gguf;
  const char* hf;
};
constexpr LayerName kLayerNames[] = {
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_a.weight", "self_attn.q_a_proj.weight"},
    {"attn_q_a_norm.weight", "self_attn.q_a_layernorm.weight"},
    {"attn_q_b.weight", "self_attn.q_b_proj.weight"},
    {"attn_kv_a_mqa.weight", "self_attn.kv_a_proj_with_mqa.weight"},
    {"attn_kv_a_norm.weight", "self_attn.kv_a_layernorm.weight"},
    {"attn_kv_b.weight", "self_attn.kv_b_proj.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_gate_inp.weight", "mlp.gate.weight"},
    {"exp_probs_b.bias", "mlp.gate.e_score_correction_bias"},
    {"ffn_gate_shexp.weight", "mlp.shared_experts.gate_proj.weight"},
    {"ffn_up_shexp.weight", "mlp.shared_experts.up_proj.weight"},
    {"ffn_down_shexp.weight", "mlp.shared_experts.down_proj.weight"},
};
// Stacked experts [n_expert, rows, cols]: expert E is model.layers.N.mlp.experts.E.<hf>.
constexpr LayerName kExpertNames[] = {
    {"ffn_gate_exps.weight", "gate_proj.weight"},
    {"ffn_up_exps.weight", "up_proj.weight"},
    {"ffn_down_exps.weight", "down_proj.weight"},
};
constexpr LayerName kGlobalNames[] = {
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};

// "blk.12.attn_q.weight" -> layer 12, rest "attn_q.weight"; false for other names.
bool SplitLayerName(const std::string& name, int* layer, std::string* rest) {
  if (name.rfind("blk.", 0) != 0) return false;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot > 10) return false;
  int n = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    n = n * 10 + (name[i] - '0');
  }
  *layer = n;
  *rest = name.substr(dot + 1);
  return true;
}

// The TensorInfo of a GGUF tensor (2-D views of 3-D ones are made by the caller).
TensorInfo InfoOf(const GgufTensor& t, const std::string& path) {
  TensorInfo info;
  info.name = t.name;
  info.file = path;
  info.shape.assign(t.ne.rbegin(), t.ne.rend());
  info.data = t.data;
  info.n_bytes = t.n_bytes;
  switch (t.ggml_type) {
    case kGgmlF32:
      info.dtype = DType::kF32;
      break;
    case kGgmlF16:
      info.dtype = DType::kF16;
      break;
    case kGgmlBF16:
      info.dtype = DType::kBF16;
      break;
    default:
      info.dtype = DType::kBlocks;
      info.blocks = t.format;
  }
  return info;
}

// The matrix view of a 2-D TensorInfo, for decoding rows.
WeightMatrix MatrixOf(const TensorInfo& t) {
  return {
      .dtype = t.dtype, .rows = t.shape[0], .cols = t.shape[1], .data = t.data, .blocks = t.blocks};
}

int64_t InfoRowBytes(const TensorInfo& t) { return RowBytes(MatrixOf(t)); }

}  // namespace

std::unique_ptr<GgufWeights> GgufWeights::Open(const std::string& path, FileLoad load) {
  std::unique_ptr<GgufWeights> w(new GgufWeights(GgufFile::Open(path, load)));
  w->config_ = GgufModelConfig(w->file_);
  w->MapTensors();
  return w;
}

const TensorInfo* GgufWeights::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void GgufWeights::ReleasePages(const void* data, size_t bytes) const {
  file_.ReleasePages(data, bytes);
}

const TensorInfo* GgufWeights::SplitKeyUp(int layer) const {
  auto it = k_b_.find(layer);
  return it == k_b_.end() ? nullptr : &it->second;
}

const TensorInfo* GgufWeights::SplitValueUp(int layer) const {
  auto it = v_b_.find(layer);
  return it == v_b_.end() ? nullptr : &it->second;
}

void GgufWeights::Add(const std::string& hf_name, TensorInfo info) {
  tensors_.insert_or_assign(hf_name, std::move(info));
}

uint8_t* GgufWeights::Own(size_t bytes) {
  owned_.push_back(std::make_unique<uint8_t[]>(bytes));
  return owned_.back().get();
}

void GgufWeights::MapTensors() {
  const ModelConfig& c = config_;
  const std::string& path = file_.path();
  const bool llama_rope_order = file_.GetString("general.architecture") == "llama";
  for (const GgufTensor& t : file_.tensors()) {
    const std::string where = path + ": tensor '" + t.name + "'";
    for (const LayerName& g : kGlobalNames) {
      if (t.name == g.gguf) {
        Add(g.hf, InfoOf(t, path));
      }
    }
    int layer = 0;
    std::string rest;
    if (!SplitLayerName(t.name, &layer, &rest) || layer >= c.num_hidden_layers) continue;
    const std::string hf_layer = "model.layers." + std::to_string(layer) + ".";
    if (rest == "attn_k_b.weight" || rest == "attn_v_b.weight") {
      // [n_head, rank, nope] resp. [n_head, v, rank], viewed as 2-D stacks of heads.
      const bool key = rest == "attn_k_b.weight";
      const std::vector<int64_t> expected =
          key ? std::vector<int64_t>{c.num_attention_heads, c.kv_lora_rank, c.qk_nope_head_dim}
              : std::vector<int64_t>{c.num_attention_heads, c.v_head_dim, c.kv_lora_rank};
      TensorInfo info = InfoOf(t, path);
      if (info.shape != expected) {
        TensorInfo e;
        e.shape = expected;
        throw Error(where + " has shape " + info.ShapeString() + " (outermost first), expected " +
                    e.ShapeString());
      }
      info.shape = {expected[0] * expected[1], expected[2]};
      (key ? k_b_ : v_b_)[layer] = std::move(info);
      continue;
    }
    for (const LayerName& e : kExpertNames) {
      if (rest != e.gguf) continue;
      TensorInfo stacked = InfoOf(t, path);
      if (stacked.shape.size() != 3 || stacked.shape[0] != c.n_routed_experts) {
        throw Error(where + " has shape " + stacked.ShapeString() +
                    " (outermost first), expected " + std::to_string(c.n_routed_experts) +
                    " stacked experts");
      }
      const int64_t rows = stacked.shape[1];
      const int64_t cols = stacked.shape[2];
      TensorInfo one = stacked;
      one.shape = {rows, cols};
      const size_t expert_bytes = static_cast<size_t>(rows * InfoRowBytes(one));
      for (int64_t x = 0; x < stacked.shape[0]; ++x) {
        TensorInfo info = one;
        info.name = t.name + "[" + std::to_string(x) + "]";
        info.data = stacked.data + static_cast<size_t>(x) * expert_bytes;
        info.n_bytes = expert_bytes;
        Add(hf_layer + "mlp.experts." + std::to_string(x) + "." + e.hf, std::move(info));
      }
    }
    for (const LayerName& n : kLayerNames) {
      if (rest != n.gguf) continue;
      TensorInfo info = InfoOf(t, path);
      const bool q = rest == "attn_q.weight";
      if (llama_rope_order && (q || rest == "attn_k.weight") && info.shape.size() == 2) {
        // llama.cpp's converter reorders each head's rows [2, d/2] -> [d/2, 2] so that its
        // RoPE rotates adjacent pairs; Hugging Face Llama rotates (i, i + d/2): undo it.
        const int64_t d = c.head_dim;
        const int64_t heads = q ? c.num_attention_heads : c.num_key_value_heads;
        if (d <= 0 || info.shape[0] != heads * d) {
          throw Error(where + " has " + std::to_string(info.shape[0]) + " rows, expected " +
                      std::to_string(heads * d));
        }
        const int64_t row_bytes = InfoRowBytes(info);
        uint8_t* rows = Own(info.n_bytes);
        for (int64_t r = 0; r < info.shape[0]; ++r) {
          const int64_t h = r / d, half = (r % d) / (d / 2), i = r % (d / 2);
          const int64_t from = h * d + 2 * i + half;
          std::memcpy(rows + r * row_bytes, info.data + from * row_bytes,
                      static_cast<size_t>(row_bytes));
        }
        info.data = rows;
      }
      Add(hf_layer + n.hf, std::move(info));
    }
  }
  for (const auto& [layer, k_b] : k_b_) {
    auto v_b = v_b_.find(layer);
    if (v_b == v_b_.end()) {
      throw Error(path + ": tensor 'blk." + std::to_string(layer) +
                  ".attn_v_b.weight' is missing (the file has attn_k_b)");
    }
    RebuildKvB(layer, k_b, v_b->second);
  }
  for (const auto& [layer, v_b] : v_b_) {
    if (!k_b_.contains(layer)) {
      throw Error(path + ": tensor 'blk." + std::to_string(layer) +
                  ".attn_k_b.weight' is missing (the file has attn_v_b)");
    }
  }
}

void GgufWeights::RebuildKvB(int layer, const TensorInfo& k_b, const TensorInfo& v_b) {
  // kv_b_proj [n_head * (nope + v), rank]: head h's rows are W_uk_h [nope, rank] (attn_k_b's
  // [rank, nope] transposed) and then W_uv_h [v, rank] (attn_v_b as stored).
  const ModelConfig& c = config_;
  const int64_t rank = c.kv_lora_rank, nope = c.qk_nope_head_dim, dv = c.v_head_dim;
  const int64_t rows = int64_t{c.num_attention_heads} * (nope + dv);
  float* out = reinterpret_cast<float*>(Own(static_cast<size_t>(rows * rank) * sizeof(float)));
  const WeightMatrix k = MatrixOf(k_b);
  const WeightMatrix v = MatrixOf(v_b);
  std::vector<float> row(static_cast<size_t>(std::max(rank, nope)));
  for (int64_t h = 0; h < c.num_attention_heads; ++h) {
    float* head = out + h * (nope + dv) * rank;
    for (int64_t r = 0; r < rank; ++r) {
      k.DecodeRow(h * rank + r, row.data());
      for (int64_t n = 0; n < nope; ++n) head[n * rank + r] = row[static_cast<size_t>(n)];
    }
    for (int64_t j = 0; j < dv; ++j) v.DecodeRow(h * dv + j, head + (nope + j) * rank);
  }
  TensorInfo info;
  info.name = "blk." + std::to_string(layer) + ".attn_k_b.weight + attn_v_b.weight";
  info.file = k_b.file;
  info.dtype = DType::kF32;
  info.shape = {rows, rank};
  info.data = reinterpret_cast<const uint8_t*>(out);
  info.n_bytes = static_cast<size_t>(rows * rank) * sizeof(float);
  Add("model.layers." + std::to_string(layer) + ".self_attn.kv_b_proj.weight", std::move(info));
}

}  // namespace mlarun
