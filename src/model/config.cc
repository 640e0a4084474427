// config.json parsing and validation. Field semantics follow the published DeepSeek-V2/V3 and
// Llama/Mistral/Qwen2 configs on Hugging Face.
#include "model/config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"

namespace mlarun {

namespace {

using Json = nlohmann::json;

class FieldReader {
 public:
  FieldReader(const Json& json, std::string path) : json_(json), path_(std::move(path)) {}

  [[noreturn]] void Fail(const std::string& field, const std::string& what) const {
    throw Error(path_ + ": field '" + field + "' " + what);
  }
  bool Has(const std::string& field) const {
    return json_.contains(field) && !json_.at(field).is_null();
  }
  int64_t Int(const std::string& field) const {
    if (!json_.contains(field)) Fail(field, "is missing");
    return IntValue(field, json_.at(field));
  }
  int64_t IntOr(const std::string& field, int64_t fallback) const {
    return Has(field) ? IntValue(field, json_.at(field)) : fallback;
  }
  double Number(const std::string& field) const {
    if (!json_.contains(field)) Fail(field, "is missing");
    return NumberValue(field, json_.at(field));
  }
  double NumberOr(const std::string& field, double fallback) const {
    return Has(field) ? NumberValue(field, json_.at(field)) : fallback;
  }
  bool BoolOr(const std::string& field, bool fallback) const {
    if (!Has(field)) return fallback;
    if (!json_.at(field).is_boolean()) Fail(field, "must be true or false");
    return json_.at(field).get<bool>();
  }
  std::string String(const std::string& field) const {
    if (!json_.contains(field)) Fail(field, "is missing");
    if (!json_.at(field).is_string()) Fail(field, "must be a string");
    return json_.at(field).get<std::string>();
  }
  std::string StringOr(const std::string& field, const std::string& fallback) const {
    return Has(field) ? String(field) : fallback;
  }
  int Positive(const std::string& field) const {
    const int64_t v = Int(field);
    if (v <= 0) Fail(field, "must be positive, got " + std::to_string(v));
    return static_cast<int>(v);
  }

 private:
  int64_t IntValue(const std::string& field, const Json& v) const {
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float() &&
        v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))) {
      return static_cast<int64_t>(v.get<double>());
    }
    Fail(field, "must be an integer");
  }
  double NumberValue(const std::string& field, const Json& v) const {
    if (!v.is_number()) Fail(field, "must be a number");
    return v.get<double>();
  }
  const Json& json_;
  std::string path_;
};

void ParseDeepseek(const FieldReader& f, const Json& json, const std::string& path,
                   ModelConfig& c) {
  c.q_lora_rank = f.Has("q_lora_rank") ? static_cast<int>(f.Int("q_lora_rank")) : 0;
  if (f.Has("q_lora_rank") && c.q_lora_rank <= 0) f.Fail("q_lora_rank", "must be null or positive");
  c.kv_lora_rank = f.Positive("kv_lora_rank");
  c.qk_nope_head_dim = f.Positive("qk_nope_head_dim");
  c.qk_rope_head_dim = f.Positive("qk_rope_head_dim");
  if (c.qk_rope_head_dim % 2 != 0) f.Fail("qk_rope_head_dim", "must be even");
  c.v_head_dim = f.Positive("v_head_dim");
  c.first_k_dense_replace = static_cast<int>(f.IntOr("first_k_dense_replace", 0));
  c.moe_layer_freq = static_cast<int>(f.IntOr("moe_layer_freq", 1));
  if (c.moe_layer_freq <= 0) f.Fail("moe_layer_freq", "must be positive");
  c.n_routed_experts = static_cast<int>(f.IntOr("n_routed_experts", 0));
  if (c.n_routed_experts > 0) {
    c.moe_intermediate_size = f.Positive("moe_intermediate_size");
    c.n_shared_experts = static_cast<int>(f.IntOr("n_shared_experts", 0));
    c.num_experts_per_tok = f.Positive("num_experts_per_tok");
    if (c.num_experts_per_tok > c.n_routed_experts) {
      f.Fail("num_experts_per_tok", "exceeds n_routed_experts");
    }
    const std::string topk = f.StringOr("topk_method", "greedy");
    if (topk == "greedy") {
      c.topk_method = TopkMethod::kGreedy;
    } else if (topk == "group_limited_greedy") {
      c.topk_method = TopkMethod::kGroupLimitedGreedy;
    } else if (topk == "noaux_tc") {
      c.topk_method = TopkMethod::kNoauxTc;
    } else {
      f.Fail("topk_method", "'" + topk + "' is not one of greedy, group_limited_greedy, noaux_tc");
    }
    c.n_group = static_cast<int>(f.IntOr("n_group", 1));
    c.topk_group = static_cast<int>(f.IntOr("topk_group", 1));
    if (c.n_group <= 0 || c.n_routed_experts % c.n_group != 0) {
      f.Fail("n_group", "must be positive and divide n_routed_experts");
    }
    if (c.topk_group <= 0 || c.topk_group > c.n_group)
      f.Fail("topk_group", "must be in [1, n_group]");
    if (c.topk_method != TopkMethod::kGreedy &&
        c.num_experts_per_tok > c.topk_group * (c.n_routed_experts / c.n_group)) {
      f.Fail("num_experts_per_tok", "exceeds the experts of topk_group groups");
    }
    const std::string scoring = f.StringOr("scoring_func", "softmax");
    if (scoring == "softmax") {
      c.scoring_func = ScoringFunc::kSoftmax;
    } else if (scoring == "sigmoid") {
      c.scoring_func = ScoringFunc::kSigmoid;
    } else {
      f.Fail("scoring_func", "'" + scoring + "' is not one of softmax, sigmoid");
    }
    c.norm_topk_prob = f.BoolOr("norm_topk_prob", false);
    c.routed_scaling_factor = f.NumberOr("routed_scaling_factor", 1.0);
    // modeling_deepseek.py (V2) scales only when it does not renormalise; V3 does both.
    c.scale_after_norm = c.model_type == "deepseek_v3";
  }
  if (f.Has("rope_scaling")) {
    const Json& rs = json.at("rope_scaling");
    if (!rs.is_object()) f.Fail("rope_scaling", "must be an object or null");
    FieldReader r(rs, path);
    const std::string type = rs.contains("type") ? r.String("type") : r.StringOr("rope_type", "");
    if (type != "yarn") {
      f.Fail("rope_scaling", "type '" + type + "' is not supported (only yarn)");
    }
    RopeScaling scaling;
    scaling.factor = r.Number("factor");
    scaling.original_max_position_embeddings = r.Int("original_max_position_embeddings");
    scaling.beta_fast = r.NumberOr("beta_fast", 32.0);
    scaling.beta_slow = r.NumberOr("beta_slow", 1.0);
    scaling.mscale = r.NumberOr("mscale", 1.0);
    scaling.mscale_all_dim = r.NumberOr("mscale_all_dim", 0.0);
    c.rope_scaling = scaling;
  }
}

void ParseQuantization(const FieldReader& f, const Json& json, const std::string& path,
                       ModelConfig& c) {
  if (f.Has("quantization_config")) {
    const Json& q = json.at("quantization_config");
    FieldReader r(q, path);
    const std::string method = r.StringOr("quant_method", "");
    if (method == "mlarun_q8") {
      if (r.IntOr("block_size", 32) != 32) f.Fail("quantization_config.block_size", "must be 32");
      const std::string layout = r.StringOr("layout", "row_major");
      if (layout != "row_major" && layout != "packed16") {
        f.Fail("quantization_config.layout",
               "'" + layout + "' is not supported (row_major, packed16)");
      }
      c.q8_weights = true;
      c.q8_packed = layout == "packed16";
      return;
    }
    if (method != "fp8") {
      f.Fail("quantization_config",
             "quant_method '" + method + "' is not supported (fp8, mlarun_q8)");
    }
    if (!q.contains("weight_block_size") || !q.at("weight_block_size").is_array() ||
        q.at("weight_block_size").size() != 2) {
      f.Fail("quantization_config.weight_block_size", "must be [rows, cols]");
    }
    c.fp8_block_rows = q.at("weight_block_size")[0].get<int>();
    c.fp8_block_cols = q.at("weight_block_size")[1].get<int>();
    if (c.fp8_block_rows <= 0 || c.fp8_block_cols <= 0) {
      f.Fail("quantization_config.weight_block_size", "must be positive");
    }
  }
}

void ParseLlama(const FieldReader& f, ModelConfig& c) {
  c.num_key_value_heads = static_cast<int>(f.IntOr("num_key_value_heads", c.num_attention_heads));
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0) {
    f.Fail("num_key_value_heads", "must divide num_attention_heads");
  }
  c.head_dim = static_cast<int>(f.IntOr("head_dim", c.hidden_size / c.num_attention_heads));
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) f.Fail("head_dim", "must be positive and even");
  c.attention_bias = c.model_type == "qwen2" || f.BoolOr("attention_bias", false);
  if (f.Has("rope_scaling")) f.Fail("rope_scaling", "is not supported for " + c.architecture);
  const bool use_window = c.model_type == "qwen2" ? f.BoolOr("use_sliding_window", false) : true;
  if (use_window && f.Has("sliding_window")) {
    c.sliding_window = static_cast<int>(f.Int("sliding_window"));
    if (c.sliding_window < 0) f.Fail("sliding_window", "must be non-negative");
  }
}

}  // namespace

ModelConfig ParseModelConfig(const std::string& json_text, const std::string& path) {
  Json json;
  try {
    json = Json::parse(json_text);
  } catch (const Json::parse_error& e) {
    throw Error(path + ": invalid JSON: " + e.what());
  }
  if (!json.is_object()) throw Error(path + ": expected a JSON object");
  FieldReader f(json, path);
  ModelConfig c;
  if (!json.contains("architectures") || !json.at("architectures").is_array() ||
      json.at("architectures").empty() || !json.at("architectures")[0].is_string()) {
    f.Fail("architectures", "must be a non-empty list of strings");
  }
  c.architecture = json.at("architectures")[0].get<std::string>();
  c.model_type = f.String("model_type");
  struct Known {
    const char* architecture;
    const char* model_type;
    ArchFamily family;
  };
  static constexpr Known kKnown[] = {
      {"DeepseekV2ForCausalLM", "deepseek_v2", ArchFamily::kDeepseek},
      {"DeepseekV3ForCausalLM", "deepseek_v3", ArchFamily::kDeepseek},
      {"LlamaForCausalLM", "llama", ArchFamily::kLlama},
      {"MistralForCausalLM", "mistral", ArchFamily::kLlama},
      {"Qwen2ForCausalLM", "qwen2", ArchFamily::kLlama},
  };
  bool known = false;
  for (const Known& k : kKnown) {
    if (c.architecture == k.architecture) {
      if (c.model_type != k.model_type) {
        f.Fail("model_type",
               "'" + c.model_type + "' does not match architecture " + c.architecture);
      }
      c.family = k.family;
      known = true;
    }
  }
  if (!known) {
    f.Fail("architectures", "'" + c.architecture +
                                "' is not supported (DeepseekV2ForCausalLM, DeepseekV3ForCausalLM, "
                                "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)");
  }
  c.vocab_size = f.Positive("vocab_size");
  c.hidden_size = f.Positive("hidden_size");
  c.intermediate_size = f.Positive("intermediate_size");
  c.num_hidden_layers = f.Positive("num_hidden_layers");
  c.num_attention_heads = f.Positive("num_attention_heads");
  c.rms_norm_eps = static_cast<float>(f.Number("rms_norm_eps"));
  c.rope_theta = f.NumberOr("rope_theta", 10000.0);
  c.max_position_embeddings = f.Int("max_position_embeddings");
  c.tie_word_embeddings = f.BoolOr("tie_word_embeddings", false);
  if (f.Has("bos_token_id")) c.bos_token_id = f.Int("bos_token_id");
  if (f.Has("eos_token_id")) {
    const Json& eos = json.at("eos_token_id");
    if (eos.is_array()) {
      for (const Json& e : eos) c.eos_token_ids.push_back(e.get<int64_t>());
    } else {
      c.eos_token_ids.push_back(f.Int("eos_token_id"));
    }
  }
  if (c.family == ArchFamily::kDeepseek) {
    ParseDeepseek(f, json, path, c);
  } else {
    ParseLlama(f, c);
  }
  ParseQuantization(f, json, path, c);
  return c;
}

ModelConfig LoadModelConfig(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  return ParseModelConfig(ReadFileToString(path), path);
}

}  // namespace mlarun
