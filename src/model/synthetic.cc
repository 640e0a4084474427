// Presets for random models. Weights are uniform with standard deviation 1/sqrt(fan_in) for
// matrices (variance-preserving), 1 +- 0.2 for norm weights, small for biases, generated per
// tensor from SplitMix64 seeded by (seed, tensor name), so f32 / bf16 / fp8 files of one seed hold
// the same model at different precisions.
#include "model/synthetic.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/data/tokenizer_corpus.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "tokenizer/bpe_trainer.h"

namespace mlarun {

namespace {

using Json = nlohmann::json;

Json YarnScaling(double factor, int original, double mscale) {
  return {
      {"type", "yarn"},          {"factor", factor}, {"original_max_position_embeddings", original},
      {"beta_fast", 32},         {"beta_slow", 1},   {"mscale", mscale},
      {"mscale_all_dim", mscale}};
}

Json TinyDeepseekBase() {
  return {{"vocab_size", 512},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"moe_intermediate_size", 32},
          {"num_hidden_layers", 3},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 4},
          {"q_lora_rank", nullptr},
          {"kv_lora_rank", 32},
          {"qk_nope_head_dim", 16},
          {"qk_rope_head_dim", 8},
          {"v_head_dim", 16},
          {"n_routed_experts", 8},
          {"n_shared_experts", 2},
          {"num_experts_per_tok", 2},
          {"first_k_dense_replace", 1},
          {"moe_layer_freq", 1},
          {"topk_method", "greedy"},
          {"n_group", 1},
          {"topk_group", 1},
          {"scoring_func", "softmax"},
          {"norm_topk_prob", false},
          {"routed_scaling_factor", 1.0},
          {"rms_norm_eps", 1e-6},
          {"rope_theta", 10000.0},
          {"rope_scaling", YarnScaling(4.0, 64, 0.707)},
          {"max_position_embeddings", 1 << 20},
          {"tie_word_embeddings", false},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"torch_dtype", "bfloat16"}};
}

Json TinyLlamaBase(const char* arch, const char* type, int n_head_kv) {
  return {{"architectures", {arch}},
          {"model_type", type},
          {"vocab_size", 512},
          {"hidden_size", 64},
          {"intermediate_size", 128},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"num_key_value_heads", n_head_kv},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"max_position_embeddings", 1 << 20},
          {"tie_word_embeddings", false},
          {"bos_token_id", 1},
          {"eos_token_id", 2},
          {"hidden_act", "silu"},
          {"torch_dtype", "bfloat16"}};
}

Json PresetConfig(const std::string& preset) {
  if (preset == "tiny-v2-lite") {
    Json c = TinyDeepseekBase();
    c["architectures"] = {"DeepseekV2ForCausalLM"};
    c["model_type"] = "deepseek_v2";
    return c;
  }
  if (preset == "tiny-v2") {
    Json c = TinyDeepseekBase();
    c["architectures"] = {"DeepseekV2ForCausalLM"};
    c["model_type"] = "deepseek_v2";
    c["q_lora_rank"] = 24;
    c["topk_method"] = "group_limited_greedy";
    c["n_group"] = 4;
    c["topk_group"] = 2;
    c["routed_scaling_factor"] = 2.0;
    return c;
  }
  if (preset == "tiny-v3") {
    Json c = TinyDeepseekBase();
    c["architectures"] = {"DeepseekV3ForCausalLM"};
    c["model_type"] = "deepseek_v3";
    c["q_lora_rank"] = 24;
    c["n_routed_experts"] = 16;
    c["n_shared_experts"] = 1;
    c["num_experts_per_tok"] = 4;
    c["topk_method"] = "noaux_tc";
    c["scoring_func"] = "sigmoid";
    c["n_group"] = 4;
    c["topk_group"] = 2;
    c["norm_topk_prob"] = true;
    c["routed_scaling_factor"] = 2.5;
    c["rope_scaling"] = YarnScaling(4.0, 64, 1.0);
    c["num_hidden_layers"] = 4;
    c["first_k_dense_replace"] = 1;
    return c;
  }
  if (preset == "bench-v2-lite") {
    // DeepSeek-V2-Lite's exact layer shapes (published config.json), 4 layers by default.
    return {{"architectures", {"DeepseekV2ForCausalLM"}},
            {"model_type", "deepseek_v2"},
            {"vocab_size", 102400},
            {"hidden_size", 2048},
            {"intermediate_size", 10944},
            {"moe_intermediate_size", 1408},
            {"num_hidden_layers", 4},
            {"num_attention_heads", 16},
            {"num_key_value_heads", 16},
            {"q_lora_rank", nullptr},
            {"kv_lora_rank", 512},
            {"qk_nope_head_dim", 128},
            {"qk_rope_head_dim", 64},
            {"v_head_dim", 128},
            {"n_routed_experts", 64},
            {"n_shared_experts", 2},
            {"num_experts_per_tok", 6},
            {"first_k_dense_replace", 1},
            {"moe_layer_freq", 1},
            {"topk_method", "greedy"},
            {"n_group", 1},
            {"topk_group", 1},
            {"scoring_func", "softmax"},
            {"norm_topk_prob", false},
            {"routed_scaling_factor", 1.0},
            {"rms_norm_eps", 1e-6},
            {"rope_theta", 10000},
            {"rope_scaling", YarnScaling(40, 4096, 0.707)},
            {"max_position_embeddings", 163840},
            {"tie_word_embeddings", false},
            {"bos_token_id", 100000},
            {"eos_token_id", 100001},
            {"hidden_act", "silu"},
            {"torch_dtype", "bfloat16"}};
  }
  if (preset == "tiny-llama-mha") return TinyLlamaBase("LlamaForCausalLM", "llama", 4);
  if (preset == "tiny-llama-gqa") return TinyLlamaBase("LlamaForCausalLM", "llama", 2);
  if (preset == "tiny-llama-mqa") return TinyLlamaBase("LlamaForCausalLM", "llama", 1);
  if (preset == "tiny-mistral-swa") {
    Json c = TinyLlamaBase("MistralForCausalLM", "mistral", 2);
    c["sliding_window"] = 8;
    return c;
  }
  if (preset == "tiny-qwen2") {
    Json c = TinyLlamaBase("Qwen2ForCausalLM", "qwen2", 2);
    c["tie_word_embeddings"] = true;
    c["use_sliding_window"] = false;
    c["sliding_window"] = 4096;
    return c;
  }
  throw Error("--preset: unknown preset '" + preset + "'");
}

}  // namespace

void GenerateSyntheticValues(const std::string& name, const std::vector<int64_t>& shape,
                             uint64_t seed, std::vector<float>& values) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  values.resize(static_cast<size_t>(count));
  Rng rng(seed ^ HashName(name));
  const bool is_norm = name.find("norm.weight") != std::string::npos;
  const bool is_bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
  float scale;
  float offset = 0.0f;
  if (is_norm) {
    scale = 0.2f;
    offset = 1.0f;
  } else if (name.find("e_score_correction_bias") != std::string::npos) {
    scale = 0.05f;
  } else if (is_bias) {
    scale = 0.1f;
  } else if (name == "model.embed_tokens.weight") {
    scale = 1.0f;
  } else {
    scale = static_cast<float>(std::sqrt(3.0 / static_cast<double>(shape.back())));
  }
  for (float& v : values) v = offset + scale * rng.NextSymmetric();
}

namespace {

void Encode(const std::vector<float>& values, DType dtype, std::vector<uint8_t>& bytes) {
  bytes.resize(values.size() * DTypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::kF32:
        std::memcpy(bytes.data() + 4 * i, &values[i], 4);
        break;
      case DType::kBF16: {
        const uint16_t h = F32ToBF16(values[i]);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
        break;
      }
      case DType::kF16: {
        const uint16_t h = F32ToF16(values[i]);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
        break;
      }
      default:
        throw Error("unsupported dtype for synthetic tensors");
    }
  }
}

constexpr int kFp8Block = 128;  // DeepSeek-V3 weight_block_size

// FP8 E4M3 with one scale per 128x128 block: scale_inv = max|w| / 448 (DeepSeek-V3 release format).
void QuantizeFp8(const std::vector<float>& w, int64_t rows, int64_t cols, std::vector<uint8_t>& q,
                 std::vector<float>& scale_inv) {
  const int64_t block_rows = (rows + kFp8Block - 1) / kFp8Block;
  const int64_t block_cols = (cols + kFp8Block - 1) / kFp8Block;
  scale_inv.assign(static_cast<size_t>(block_rows * block_cols), 1.0f);
  q.resize(static_cast<size_t>(rows * cols));
  for (int64_t br = 0; br < block_rows; ++br) {
    for (int64_t bc = 0; bc < block_cols; ++bc) {
      const int64_t r_end = std::min(rows, (br + 1) * kFp8Block);
      const int64_t c_end = std::min(cols, (bc + 1) * kFp8Block);
      float max_abs = 0.0f;
      for (int64_t r = br * kFp8Block; r < r_end; ++r) {
        for (int64_t c = bc * kFp8Block; c < c_end; ++c) {
          max_abs = std::max(max_abs, std::fabs(w[static_cast<size_t>(r * cols + c)]));
        }
      }
      const float scale = max_abs > 0.0f ? max_abs / 448.0f : 1.0f;
      scale_inv[static_cast<size_t>(br * block_cols + bc)] = scale;
      for (int64_t r = br * kFp8Block; r < r_end; ++r) {
        for (int64_t c = bc * kFp8Block; c < c_end; ++c) {
          q[static_cast<size_t>(r * cols + c)] =
              F32ToF8E4M3(w[static_cast<size_t>(r * cols + c)] / scale);
        }
      }
    }
  }
}

// The special tokens of preset tokenizers, in DeepSeek's spelling; they take the last ids.
const std::vector<std::string> kSpecialTokens = {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
                                                 "<｜User｜>", "<｜Assistant｜>"};
// Presets with at most this many tokens get a trained tokenizer (bench-v2-lite's 102,400 do not).
constexpr int64_t kMaxTokenizerVocab = 4096;

bool HasTokenizer(const Json& config) {
  return config.at("vocab_size").get<int64_t>() <= kMaxTokenizerVocab;
}

}  // namespace

std::vector<std::string> SyntheticPresetNames() {
  return {"tiny-v2-lite",   "tiny-v2",        "tiny-v3",          "bench-v2-lite", "tiny-llama-mha",
          "tiny-llama-gqa", "tiny-llama-mqa", "tiny-mistral-swa", "tiny-qwen2"};
}

std::string SyntheticConfigJson(const SyntheticModelOptions& options) {
  Json config = PresetConfig(options.preset);
  if (HasTokenizer(config)) {
    const int64_t vocab = config.at("vocab_size").get<int64_t>();
    config["bos_token_id"] = vocab - static_cast<int64_t>(kSpecialTokens.size());
    config["eos_token_id"] = vocab - static_cast<int64_t>(kSpecialTokens.size()) + 1;
  }
  if (options.layers > 0) config["num_hidden_layers"] = options.layers;
  if (!options.config_patch.empty()) {
    try {
      config.merge_patch(Json::parse(options.config_patch));
    } catch (const Json::parse_error& e) {
      throw Error("config_patch: invalid JSON: " + std::string(e.what()));
    }
  }
  if (options.dtype == DType::kF8E4M3) {
    config["quantization_config"] = {{"activation_scheme", "dynamic"},
                                     {"fmt", "e4m3"},
                                     {"quant_method", "fp8"},
                                     {"weight_block_size", {kFp8Block, kFp8Block}}};
  }
  config["torch_dtype"] = options.dtype == DType::kF32 ? "float32" : "bfloat16";
  return config.dump(2) + "\n";
}

ModelConfig WriteSyntheticConfig(const SyntheticModelOptions& options, const std::string& out_dir) {
  const std::string config_text = SyntheticConfigJson(options);
  const ModelConfig config = ParseModelConfig(config_text, "preset " + options.preset);
  std::filesystem::create_directories(out_dir);
  WriteStringToFile(out_dir + "/config.json", config_text);
  if (config.vocab_size <= kMaxTokenizerVocab) {
    WriteStringToFile(out_dir + "/tokenizer.json",
                      TrainByteLevelBpeJson(kTokenizerCorpus, static_cast<int>(config.vocab_size),
                                            kSpecialTokens));
    WriteStringToFile(out_dir + "/tokenizer_config.json",
                      MakeTokenizerConfigJson(kSpecialTokens[0], kSpecialTokens[1]));
  }
  return config;
}

void WriteSyntheticModel(const SyntheticModelOptions& options, const std::string& out_dir) {
  if (options.dtype != DType::kF32 && options.dtype != DType::kBF16 &&
      options.dtype != DType::kF16 && options.dtype != DType::kF8E4M3) {
    throw Error("--dtype must be f32, bf16, f16 or fp8");
  }
  const ModelConfig config = WriteSyntheticConfig(options, out_dir);

  // Declare every tensor (and FP8 scales), assign shards, then stream the data.
  struct Planned {
    TensorDecl decl;
    bool is_scale = false;
    std::string source;  // for scales: the weight they belong to
  };
  std::vector<Planned> planned;
  ModelWeights scratch;
  ForEachTensor(config, scratch, [&](const TensorSlot& slot) {
    const bool fp8 = options.dtype == DType::kF8E4M3 && slot.quantizable;
    DType dtype = options.dtype;
    if (options.dtype == DType::kF8E4M3 && !slot.quantizable) dtype = DType::kBF16;
    if (slot.vector != nullptr) dtype = options.dtype == DType::kF32 ? DType::kF32 : DType::kBF16;
    if (slot.name.find("e_score_correction_bias") != std::string::npos) dtype = DType::kF32;
    planned.push_back({.decl = {slot.name, fp8 ? DType::kF8E4M3 : dtype, slot.shape}});
    if (fp8) {
      const int64_t rows = (slot.shape[0] + kFp8Block - 1) / kFp8Block;
      const int64_t cols = (slot.shape[1] + kFp8Block - 1) / kFp8Block;
      planned.push_back({.decl = {slot.name + "_scale_inv", DType::kF32, {rows, cols}},
                         .is_scale = true,
                         .source = slot.name});
    }
  });
  std::vector<std::vector<size_t>> shards(1);
  uint64_t shard_bytes = 0;
  for (size_t i = 0; i < planned.size(); ++i) {
    uint64_t bytes = DTypeSize(planned[i].decl.dtype);
    for (int64_t d : planned[i].decl.shape) bytes *= static_cast<uint64_t>(d);
    const bool keep_with_weight = planned[i].is_scale;  // a scale stays next to its weight
    if (options.max_shard_bytes > 0 && shard_bytes > 0 && !keep_with_weight &&
        shard_bytes + bytes > options.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(i);
    shard_bytes += bytes;
  }
  std::map<std::string, const Planned*> by_name;
  for (const Planned& p : planned) by_name[p.decl.name] = &p;
  std::vector<float> values;
  std::vector<uint8_t> fp8_bytes;
  std::vector<float> scales;
  auto fill = [&](const TensorDecl& decl, std::vector<uint8_t>& bytes) {
    const Planned& p = *by_name.at(decl.name);
    const std::string& weight_name = p.is_scale ? p.source : decl.name;
    const std::vector<int64_t>& shape = p.is_scale ? by_name.at(p.source)->decl.shape : decl.shape;
    GenerateSyntheticValues(weight_name, shape, options.seed, values);
    if (decl.dtype == DType::kF8E4M3 || p.is_scale) {
      QuantizeFp8(values, shape[0], shape[1], fp8_bytes, scales);
      if (p.is_scale) {
        bytes.resize(scales.size() * 4);
        std::memcpy(bytes.data(), scales.data(), bytes.size());
      } else {
        bytes = fp8_bytes;
      }
      return;
    }
    Encode(values, decl.dtype, bytes);
  };
  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  if (shards.size() == 1) {
    std::vector<TensorDecl> decls;
    decls.reserve(planned.size());
    for (const Planned& p : planned) decls.push_back(p.decl);
    WriteSafetensorsStreaming(out_dir + "/model.safetensors", decls, metadata, fill);
    std::filesystem::remove(out_dir + "/model.safetensors.index.json");
    return;
  }
  Json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", Json::object()}};
  uint64_t total = 0;
  for (size_t s = 0; s < shards.size(); ++s) {
    char file[64];
    std::snprintf(file, sizeof(file), "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    std::vector<TensorDecl> decls;
    for (size_t i : shards[s]) {
      decls.push_back(planned[i].decl);
      index["weight_map"][planned[i].decl.name] = file;
      uint64_t bytes = DTypeSize(planned[i].decl.dtype);
      for (int64_t d : planned[i].decl.shape) bytes *= static_cast<uint64_t>(d);
      total += bytes;
    }
    WriteSafetensorsStreaming(out_dir + "/" + file, decls, metadata, fill);
  }
  index["metadata"]["total_size"] = total;
  std::filesystem::remove(out_dir + "/model.safetensors");
  WriteStringToFile(out_dir + "/model.safetensors.index.json", index.dump(2) + "\n");
}

}  // namespace mlarun
