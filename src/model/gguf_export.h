// `mlarun quantize --type T --out FILE.gguf`: a Hugging Face checkpoint (f32, f16, bf16 or FP8)
// written as a GGUF file that llama.cpp loads (its tensor names and metadata keys, as its
// converter writes them) and mlarun reads back (gguf_model.h), each matrix quantised to the block
// formats of a llama.cpp-style mix. One tensor in memory at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "model/config.h"
#include "model/weights.h"

namespace mlarun {

// The mixes `--type` names and the GGUF general.file_type (llama_ftype) each writes.
//   f32, f16, bf16:  every matrix in that type
//   q8_0, q6_k:      every matrix Q8_0 / Q6_K
//   q4_0:            Q4_0, the output matrix Q6_K
//   q4_k_m, q5_k_m:  Q4_K / Q5_K; Q6_K for the output matrix and, in the layers llama.cpp's
//                    use_more_bits picks (the first and last eighth, and every third layer in
//                    between), attn_v and the ffn_down matrices (dense, experts and shared)
// Rows whose length is not a multiple of 256 take llama.cpp's fallbacks (Q4_K -> Q5_0,
// Q5_K -> Q5_1, Q6_K -> Q8_0), e.g. DeepSeek's attn_k_b with rows of 128. Vectors (norms,
// biases, the noaux_tc bias) and the MoE router stay F32.
struct GgufMix {
  std::string_view name;
  uint32_t base_type = 0;       // ggml type of most matrices
  uint32_t more_bits_type = 0;  // attn_v / ffn_down in use_more_bits layers (0: base_type)
  uint32_t output_type = 0;     // output.weight (0: base_type)
  uint32_t file_type = 0;       // general.file_type
};
// The mix `name` names, or nullptr.
const GgufMix* FindGgufMix(std::string_view name);
// "f32, f16, bf16, q8_0, q6_k, q5_k_m, q4_k_m, q4_0".
std::string GgufMixNames();

// llama.cpp's use_more_bits(i, n): i < n / 8 || i >= 7 n / 8 || (i - n / 8) % 3 == 2.
bool UseMoreBits(int layer, int n_layers);

// The ggml type the mix gives a tensor: `gguf_name` without "blk.N." ("attn_v.weight",
// "ffn_down_exps.weight", "output.weight", ...), `row_length` its ne[0], `is_matrix` false for
// 1-D tensors.
uint32_t GgufTensorType(const GgufMix& mix, std::string_view gguf_name, int64_t row_length,
                        bool is_matrix, int layer, int n_layers);

// `--tensor-type PATTERN=TYPE` (as llama-quantize's option, with a glob instead of its regex):
// matrices whose GGUF name contains a match of the glob (fnmatch, `*` `?` `[...]`; e.g. "attn_v_b"
// or "blk.[0-2].ffn_down*") are stored in TYPE instead of the mix's choice (with the same
// fallbacks for rows TYPE's blocks do not divide).
struct GgufTypeOverride {
  std::string pattern;
  uint32_t ggml_type = 0;
};
// Parses PATTERN=TYPE; throws Error naming --tensor-type for a bad type.
GgufTypeOverride ParseGgufTypeOverride(const std::string& spec);

struct GgufExportOptions {
  const GgufMix* mix = nullptr;                // required
  std::vector<GgufTypeOverride> tensor_types;  // later entries win
  // true: MLA as attn_k_b + attn_v_b (llama.cpp's current layout); false: the older attn_kv_b.
  bool split_mla = true;
  ThreadPool* pool = nullptr;  // rows in parallel; a temporary pool if null
};

// Reads the checkpoint in `src_dir` (mapped) and writes `out_path` (via out_path.tmp, renamed at
// the end). Throws Error naming the tensor and row for a NaN or inf weight, and for shapes the
// mix cannot store.
void WriteGgufModel(const std::string& src_dir, const std::string& out_path,
                    const GgufExportOptions& options);

// The metadata of a GGUF file of `config`: general.*, the architecture's keys and the tokenizer
// of `tokenizer_dir` (tokenizer.json; a placeholder vocabulary where there is none).
std::vector<GgufKeyValue> GgufModelMetadata(const std::string& name,
                                            const std::string& tokenizer_dir,
                                            const ModelConfig& config, const GgufMix& mix);

// Called around each written tensor for the matrices it reads: `materialize` before (e.g. to
// generate a synthetic matrix whose data is still null), `release` after.
struct GgufWriteHooks {
  std::function<void(WeightMatrix&)> materialize;
  std::function<void(WeightMatrix&)> release;
};

// Writes `weights` (bound to `config`'s tensor list, ForEachTensor) with `metadata` as a GGUF file.
void WriteGgufTensors(const std::string& out_path, const ModelConfig& config, ModelWeights& weights,
                      const std::vector<GgufKeyValue>& metadata, const GgufExportOptions& options,
                      const GgufWriteHooks& hooks = {});

}  // namespace mlarun
