// Model hyper-parameters parsed from a Hugging Face config.json into plain structs. The
// architecture is read from `architectures` / `model_type`, never inferred from tensors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kv/kv_policy.h"

namespace mlarun {

enum class ArchFamily {
  kDeepseek,  // DeepseekV2ForCausalLM, DeepseekV3ForCausalLM: MLA + DeepSeekMoE
  kLlama,     // LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM: MHA/GQA/MQA + SwiGLU
};

enum class TopkMethod { kGreedy, kGroupLimitedGreedy, kNoauxTc };
enum class ScoringFunc { kSoftmax, kSigmoid };

// YaRN context extension (Peng et al. 2023, arXiv 2309.00071) as configured by DeepSeek.
struct RopeScaling {
  double factor = 1.0;
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;  // 0: not set
};

struct ModelConfig {
  std::string architecture;  // architectures[0]
  std::string model_type;    // deepseek_v2, deepseek_v3, llama, mistral, qwen2
  ArchFamily family = ArchFamily::kDeepseek;

  int64_t vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;  // dense MLP
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;  // Llama family
  int head_dim = 0;             // Llama family
  float rms_norm_eps = 1e-6f;
  double rope_theta = 10000.0;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;

  // MLA (DeepSeek).
  int q_lora_rank = 0;  // 0: no q LoRA (q_lora_rank null)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
  std::optional<RopeScaling> rope_scaling;

  // DeepSeekMoE.
  int moe_intermediate_size = 0;
  int n_routed_experts = 0;
  int n_shared_experts = 0;
  int num_experts_per_tok = 0;
  int first_k_dense_replace = 0;
  int moe_layer_freq = 1;
  TopkMethod topk_method = TopkMethod::kGreedy;
  int n_group = 1;
  int topk_group = 1;
  ScoringFunc scoring_func = ScoringFunc::kSoftmax;
  bool norm_topk_prob = false;
  double routed_scaling_factor = 1.0;
  // DeepSeek-V2's published gate either renormalises or scales; V3 renormalises then scales.
  bool scale_after_norm = false;

  // Llama family.
  bool attention_bias = false;  // Qwen2: q/k/v biases
  int sliding_window = 0;       // Mistral / Qwen2 (use_sliding_window), 0 = none

  // FP8 checkpoints (quantization_config.weight_block_size).
  int fp8_block_rows = 0;
  int fp8_block_cols = 0;
  // Q8 checkpoints written by `mlarun quantize` (quantization_config.quant_method mlarun_q8).
  bool q8_weights = false;
  // Their matrices are stored packed for the kernels (quantization_config.layout "packed16"),
  // mapped in place at load; else row-major ("row_major", the default), packed at load.
  bool q8_packed = false;

  bool IsMoeLayer(int layer) const {
    return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }
  int QkHeadDim() const { return qk_nope_head_dim + qk_rope_head_dim; }
};

// Parses config.json text; `path` is used in error messages. Throws Error naming the field.
ModelConfig ParseModelConfig(const std::string& json_text, const std::string& path);
// Reads and parses `<dir>/config.json`.
ModelConfig LoadModelConfig(const std::string& model_dir);

}  // namespace mlarun
