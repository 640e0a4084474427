// A loaded model: config, weights (memory-mapped) and the forward pass over a batch of tokens
// from one or more sequences, reading and writing a paged KV cache.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernel_table.h"
#include "kv/kv_cache.h"
#include "model/config.h"
#include "model/layers/rope.h"
#include "model/safetensors.h"
#include "model/weights.h"

namespace mlarun {

// One token of a batch. Tokens of a sequence appear in increasing, consecutive positions that
// continue the sequence's cache.
struct BatchToken {
  int32_t token = 0;
  int32_t seq = 0;  // KvCache sequence handle
  int64_t pos = 0;  // position in the sequence
  bool want_logits = false;
};

// How MLA attention is computed.
enum class MlaPath {
  kAuto,      // per sequence, the path with fewer multiply-adds (NaiveMlaIsCheaper)
  kNaive,     // expand the latent to per-head K/V (MHA 192/128)
  kAbsorbed,  // W_uk folded into q, W_uv after attention over the latent (MQA 576/512)
};

// The attention work of one sequence's new tokens in a forward pass.
struct MlaChunkShape {
  int64_t new_tokens = 0;     // queries
  int64_t expanded_rows = 0;  // distinct cache rows they see (what the naive path expands)
  int64_t attended_rows = 0;  // sum over the queries of the rows each sees
};

// Whether the naive MLA path costs fewer multiply-adds per layer than the absorbed one (both
// forms of MLA attention: DeepSeek-V2, arXiv 2405.04434, sec. 2.1.2, where absorbing W_uk into
// the query and W_uv into the output is described for inference). With
// H heads, latent r = kv_lora_rank, dn/dr/dv = qk_nope/qk_rope/v head dims:
//   naive    = H r (dn + dv) expanded_rows + H (dn + dr + dv) attended_rows
//   absorbed = H r (dn + dv) new_tokens    + H (2 r + dr)     attended_rows
// (the absorbed path multiplies each query by W_uk and each output by W_uv, H r (dn + dv) per
// token; the naive one expands each row by W_uk and W_uv instead). Projections and the MLP are
// the same on both paths. After a context of D tokens, n new ones cost 12,288 (n D + n (n + 1) / 2)
// more multiply-adds absorbed and 2,097,152 D more naive per layer and 16 heads with
// DeepSeek-V2/V3's head dims: the absorbed path wins up to 167 new tokens at depth 4,096 (158 at
// 1,024, 170 as the depth grows), the naive one at depth 0. Measured on a 2-core AVX2 VM
// (engine_bench PrefillAtDepth), the faster path switches between 128 and 256 new tokens.
bool NaiveMlaIsCheaper(const ModelConfig& config, const MlaChunkShape& shape);

// Per MoE layer, how many tokens each routed expert received.
struct ExpertStats {
  std::vector<std::vector<int64_t>> counts;  // [n_layers][n_routed_experts] (empty for dense)
};

// Weight storage after loading.
enum class WeightFormat {
  kAsLoaded,  // as in the checkpoint (memory-mapped, no copy)
  kInt8,      // linear layers quantised to Q8 blocks at load (router and embedding kept)
  kBf16,      // linear layers in bf16: f32, f16 and FP8 ones converted at load (the rest kept)
};

struct ModelLoadOptions {
  WeightFormat weights = WeightFormat::kAsLoaded;
  // kMmap: weights used in place from the page cache (instant load); kCopy: read once into
  // anonymous huge-page memory (a read of the files at load; faster decode, docs/performance.md).
  // Matrices quantised at load (kInt8 on a checkpoint not already Q8) land in huge pages either
  // way: the files are then mapped, not copied, and the quantised matrices' pages released.
  FileLoad file_load = FileLoad::kMmap;
  // bf16 and f16 weights, and FP8 ones where `kernels` has matmul_rows_f8_packed: copy the
  // matrices into Layout16::kPacked16 for the SIMD kernels' outer-product form. With kCopy the
  // files are then mapped instead of copied (the packed copies, and plain copies of the other
  // streamed matrices, take the copy's place; norms and the embedding table are read in place).
  // Ignored for int8 weights.
  bool pack_16bit = false;
  ThreadPool* pool = nullptr;  // for load-time quantisation and packing; a temporary pool if null
  // Kernels of load-time quantisation and packing (`--weights int8`; every table quantises
  // bitwise alike); the table the model will run with, since it decides whether FP8 is packed
  // (pack_16bit). null: the scalar table.
  const KernelTable* kernels = nullptr;
  std::function<void(int64_t, int64_t)> on_progress;  // (tensors bound, total)
};

// Whether loading with `file_load` for `kernels` should pack bf16 and f16 matrices
// (ModelLoadOptions::pack_16bit): when the files are copied anyway and the kernels read the
// packed layout fastest. The rule of the CLI and the engine benchmark.
bool Pack16BitFor(FileLoad file_load, const KernelTable& kernels);

struct ForwardOptions {
  MlaPath mla_path = MlaPath::kAuto;
  ExpertStats* expert_stats = nullptr;  // accumulated when set
};

class GgufWeights;

class Model {
 public:
  // Loads `<dir>/config.json` and the safetensors weights (mmap), or a GGUF file when `model_dir`
  // is one (gguf_model.h). Throws Error on bad input.
  static std::unique_ptr<Model> Load(const std::string& model_dir,
                                     const ModelLoadOptions& options = {});

  // The configuration of the model at `path`: `<path>/config.json`, or a GGUF file's metadata.
  static ModelConfig LoadConfig(const std::string& path);

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  // The cache rows one token stores per layer with cache dtype `kv_dtype`.
  KvLayout MakeKvLayout(DType kv_dtype) const;
  // Bytes of weights one decoded token reads: every dense matrix, the router, shared experts and
  // `num_experts_per_tok` routed experts per MoE layer, one embedding row and the lm_head.
  int64_t WeightBytesPerDecodedToken() const;
  // The model's own sliding window (0 = none), for KvCacheOptions::model_window.
  int model_window() const { return config_.sliding_window; }

  // Runs the batch through the model. The caller must have reserved cache room for every
  // sequence's new tokens; they are committed on return. logits: [n_want_logits, vocab_size]
  // in batch order.
  void Forward(Exec& exec, KvCache& cache, std::span<const BatchToken> batch,
               const ForwardOptions& options, float* logits) const;

 private:
  Model() = default;
  // Split MLA GGUF files: W_uk^T and W_uv of absorbed MLA as stored (attn_k_b, attn_v_b).
  void BindSplitMla(const GgufWeights& source);
  void PrepareDerived();
  void QuantizeDerivedQ8(const KernelTable& kernels);

  ModelConfig config_;
  std::unique_ptr<WeightSource> archive_;
  ModelWeights weights_;
  RopeTable rope_;
  float attention_scale_ = 1.0f;
};

}  // namespace mlarun
