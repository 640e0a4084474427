// Weights addressed by their Hugging Face names through per-layer structs. One visitor,
// ForEachTensor, lists every tensor with its expected shape; the loader, the random-model writer
// and the tests all iterate that same list.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/huge_pages.h"
#include "kernels/matmul.h"  // WeightMatrix
#include "model/config.h"

namespace mlarun {

class WeightSource;

// A small float vector (norm weights, biases, router bias), converted to float32 at load.
struct F32Vector {
  std::vector<float> values;
  bool empty() const { return values.empty(); }
  const float* data() const { return values.data(); }
};

struct MlpWeights {
  WeightMatrix gate_proj;  // [intermediate, hidden]
  WeightMatrix up_proj;    // [intermediate, hidden]
  WeightMatrix down_proj;  // [hidden, intermediate]
};

// Multi-head Latent Attention (DeepSeek-V2 paper, section 2.1).
struct MlaWeights {
  WeightMatrix q_proj;              // [n_head_q * (nope + rope), hidden]       (no q LoRA)
  WeightMatrix q_a_proj;            // [q_lora_rank, hidden]                     (q LoRA)
  F32Vector q_a_layernorm;          // [q_lora_rank]
  WeightMatrix q_b_proj;            // [n_head_q * (nope + rope), q_lora_rank]
  WeightMatrix kv_a_proj_with_mqa;  // [kv_lora_rank + rope, hidden]
  F32Vector kv_a_layernorm;         // [kv_lora_rank]
  WeightMatrix kv_b_proj;           // [n_head_q * (nope + v), kv_lora_rank]: per head W_uk; W_uv
  WeightMatrix o_proj;              // [hidden, n_head_q * v]
  // Derived at load for the absorbed path: W_uk of every head transposed (split MLA GGUF
  // files: views of attn_k_b).
  std::vector<WeightMatrix> w_uk_t;  // [n_head_q] of [kv_lora_rank, nope]
  // Split MLA GGUF files only (else empty: the absorbed path reads W_uv from kv_b_proj): attn_v_b,
  // W_uv of every head one after the other.
  WeightMatrix w_uv;  // [n_head_q * v, kv_lora_rank]
};

// MHA / GQA / MQA (Llama layout).
struct GqaWeights {
  WeightMatrix q_proj;  // [n_head_q * head_dim, hidden]
  WeightMatrix k_proj;  // [n_head_kv * head_dim, hidden]
  WeightMatrix v_proj;  // [n_head_kv * head_dim, hidden]
  WeightMatrix o_proj;  // [hidden, n_head_q * head_dim]
  F32Vector q_bias;     // [n_head_q * head_dim]  (Qwen2)
  F32Vector k_bias;     // [n_head_kv * head_dim]
  F32Vector v_bias;     // [n_head_kv * head_dim]
};

// DeepSeekMoE (DeepSeek-V2 paper section 2.2; V3 paper section 2.1.2).
struct MoeWeights {
  WeightMatrix gate;                  // [n_routed_experts, hidden] router, kept exact
  F32Vector e_score_correction_bias;  // [n_routed_experts] (noaux_tc)
  std::vector<MlpWeights> experts;    // [n_routed_experts], moe_intermediate_size
  MlpWeights shared;                  // moe_intermediate_size * n_shared_experts (may be empty)
};

struct LayerWeights {
  F32Vector input_layernorm;           // [hidden]
  F32Vector post_attention_layernorm;  // [hidden]
  MlaWeights mla;                      // DeepSeek family
  GqaWeights gqa;                      // Llama family
  MlpWeights mlp;                      // dense layers
  MoeWeights moe;                      // MoE layers
};

struct ModelWeights {
  WeightMatrix embed_tokens;  // [vocab, hidden]
  F32Vector norm;             // [hidden]
  WeightMatrix lm_head;       // [vocab, hidden] (embed_tokens when tied)
  std::vector<LayerWeights> layers;
  std::vector<std::unique_ptr<uint8_t[]>> owned;  // copies of unaligned or derived tensors
  std::vector<HugePageBuffer> owned_pages;        // packed and plain copies (Pack16BitWeights, ...)
  // Packed Q8 matrices made at load (quantised, derived or repacked), bump-allocated 64-byte
  // aligned from huge-page chunks: streamed at memory bandwidth like the copied weights.
  std::vector<HugePageBuffer> q8_pages;
  size_t q8_pages_used = 0;  // bytes taken from q8_pages.back()
  size_t q8_bytes = 0;       // bytes taken from all of q8_pages
};

// What a tensor binds to: exactly one of matrix / vector is set.
struct TensorSlot {
  std::string name;
  std::vector<int64_t> shape;  // expected, outermost first
  WeightMatrix* matrix = nullptr;
  F32Vector* vector = nullptr;
  bool quantizable = false;  // may be stored as FP8 with block scales (linear layers but router)
};

// Calls `fn` for every tensor the config requires, in a fixed order.
void ForEachTensor(const ModelConfig& config, ModelWeights& weights,
                   const std::function<void(const TensorSlot&)>& fn);

// Binds every required tensor of `archive` (mmap, no copy where aligned); throws Error naming the
// file and tensor for a missing tensor, a wrong shape or an unsupported dtype.
void LoadWeights(const ModelConfig& config, const WeightSource& archive,
                 const std::string& model_dir, ModelWeights& weights,
                 const std::function<void(int64_t, int64_t)>& on_progress = {});

}  // namespace mlarun
