// Models in GGUF files (as llama.cpp's converter writes them): the configuration their metadata
// describes, and their tensors under the Hugging Face names the loader binds (weights.h), so a
// `.gguf` file is accepted wherever a model directory is.
//
// Architectures: `deepseek2` (DeepSeek-V2, V2-Lite, V3 / R1), `llama`, `qwen2`. Tensor names
// (llama.cpp's gguf-py constants, tensor_mapping.py) and how they map:
//   token_embd, output_norm, output          -> model.embed_tokens, model.norm, lm_head
//   blk.N.attn_norm, blk.N.ffn_norm          -> input_layernorm, post_attention_layernorm
//   deepseek2: attn_q | attn_q_a, attn_q_a_norm, attn_q_b; attn_kv_a_mqa, attn_kv_a_norm;
//              attn_kv_b (older files) or attn_k_b [n_head, rank, nope] + attn_v_b
//              [n_head, v, rank] (newer files, split for absorbed MLA); attn_output;
//              ffn_gate_inp (router), exp_probs_b.bias (noaux_tc bias); ffn_{gate,up,down}_exps
//              (experts stacked: [n_expert, rows, cols]); ffn_{gate,up,down}_shexp (shared);
//              ffn_{gate,up,down} (dense layers)
//   llama, qwen2: attn_q, attn_k (llama: rows reordered for adjacent-pair RoPE, undone here),
//              attn_v, attn_output (+ q/k/v .bias for qwen2); ffn_{gate,up,down}
// GGUF dimensions are innermost first (ne[0] = columns); Hugging Face shapes outermost first.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "formats/gguf.h"
#include "model/config.h"
#include "model/weight_source.h"

namespace mlarun {

// Whether `path` is a regular file that starts with the GGUF magic.
bool IsGgufFile(const std::string& path);

// The config.json (as JSON text) that the file's metadata describes, for ParseModelConfig.
// Throws Error naming the file and key for a missing required key or an unsupported
// architecture (listing the supported ones).
std::string GgufConfigJson(const GgufFile& file);

// The model configuration of a GGUF file (GgufConfigJson, validated by ParseModelConfig).
ModelConfig GgufModelConfig(const GgufFile& file);

// The tensors of a GGUF model by Hugging Face name: views into the mapped file, except the llama
// q/k rows put back in Hugging Face order and, for split MLA files, kv_b_proj rebuilt in float32
// from attn_k_b and attn_v_b (the naive MLA path's expansion matrix; the absorbed path multiplies
// the split tensors as stored, SplitMla).
class GgufWeights final : public WeightSource {
 public:
  static std::unique_ptr<GgufWeights> Open(const std::string& path,
                                           FileLoad load = FileLoad::kMmap);

  const ModelConfig& config() const { return config_; }
  const GgufFile& file() const { return file_; }

  const TensorInfo* Find(const std::string& name) const override;
  void ReleasePages(const void* data, size_t bytes) const override;
  size_t MappedBytes() const override { return file_.MappedBytes(); }

  // Split MLA files: layer N's attn_k_b [n_head * kv_lora_rank, nope] (W_uk^T of each head, one
  // after the other) and attn_v_b [n_head * v, kv_lora_rank] (W_uv of each head), as stored;
  // nullptr for files with attn_kv_b.
  const TensorInfo* SplitKeyUp(int layer) const;
  const TensorInfo* SplitValueUp(int layer) const;

 private:
  explicit GgufWeights(GgufFile file) : file_(std::move(file)) {}
  void MapTensors();
  void Add(const std::string& hf_name, TensorInfo info);
  uint8_t* Own(size_t bytes);
  void RebuildKvB(int layer, const TensorInfo& k_b, const TensorInfo& v_b);

  GgufFile file_;
  ModelConfig config_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<int, TensorInfo> k_b_;
  std::map<int, TensorInfo> v_b_;
  std::vector<std::unique_ptr<uint8_t[]>> owned_;
};

}  // namespace mlarun
