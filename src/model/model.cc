// Model loading and the forward pass: embedding, per-layer attention + MLP/MoE with residuals,
// final norm and lm_head.
#include "model/model.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/finite_check.h"
#include "model/gguf_model.h"
#include "model/kv_report.h"
#include "model/layers/layer_context.h"
#include "model/quantize.h"

namespace mlarun {

namespace {

// The attention shape of a sequence's new tokens from the spans each sees.
MlaChunkShape ChunkShape(const SequenceSlice& slice,
                         const std::vector<std::vector<KvSpan>>& spans) {
  MlaChunkShape shape{.new_tokens = static_cast<int64_t>(slice.token_indices.size())};
  int64_t most_visible = 0;
  for (const int32_t t : slice.token_indices) {
    const int64_t visible = TotalRows(spans[static_cast<size_t>(t)]);
    shape.attended_rows += visible;
    most_visible = std::max(most_visible, visible);
  }
  // Each later query sees at most one row more (its own); the rows are those of the cache.
  shape.expanded_rows = std::min(most_visible + shape.new_tokens - 1, slice.n_written);
  return shape;
}

}  // namespace

bool NaiveMlaIsCheaper(const ModelConfig& c, const MlaChunkShape& shape) {
  const int64_t heads = c.num_attention_heads;
  const int64_t per_row_or_token =
      heads * c.kv_lora_rank * (c.qk_nope_head_dim + c.v_head_dim);  // H r (dn + dv)
  const int64_t naive_per_pair = heads * (c.qk_nope_head_dim + c.qk_rope_head_dim + c.v_head_dim);
  const int64_t absorbed_per_pair = heads * (2 * int64_t{c.kv_lora_rank} + c.qk_rope_head_dim);
  const double naive = static_cast<double>(per_row_or_token) * shape.expanded_rows +
                       static_cast<double>(naive_per_pair) * shape.attended_rows;
  const double absorbed = static_cast<double>(per_row_or_token) * shape.new_tokens +
                          static_cast<double>(absorbed_per_pair) * shape.attended_rows;
  return naive <= absorbed;
}

bool Pack16BitFor(FileLoad file_load, const KernelTable& kernels) {
  return file_load == FileLoad::kCopy && kernels.packed_bf16_fastest;
}

std::unique_ptr<Model> Model::Load(const std::string& model_dir, const ModelLoadOptions& options) {
  std::unique_ptr<Model> model(new Model());
  const bool gguf = IsGgufFile(model_dir);
  std::unique_ptr<GgufWeights> gguf_weights;
  if (!gguf) model->config_ = LoadModelConfig(model_dir);
  const bool int8 = options.weights == WeightFormat::kInt8 || model->config_.q8_weights;
  const bool pack_16bit = options.pack_16bit && !int8;
  // Packing and quantising at load copy the matrices they convert anyway: the files are mapped.
  const bool quantize_at_load = int8 && !model->config_.q8_weights;
  const FileLoad file_load = pack_16bit || quantize_at_load ? FileLoad::kMmap : options.file_load;
  if (gguf) {
    gguf_weights = GgufWeights::Open(model_dir, file_load);
    model->config_ = gguf_weights->config();
    model->archive_ = std::move(gguf_weights);
  } else {
    model->archive_ =
        std::make_unique<SafetensorsArchive>(SafetensorsArchive::Open(model_dir, file_load));
  }
  LoadWeights(model->config_, *model->archive_, model_dir, model->weights_, options.on_progress);
  if (gguf) model->BindSplitMla(static_cast<const GgufWeights&>(*model->archive_));
  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool* pool = options.pool;
  const bool copy = options.file_load == FileLoad::kCopy;
  const bool to_bf16 = options.weights == WeightFormat::kBf16;
  if (to_bf16 && model->config_.q8_weights) {
    throw Error(model_dir +
                ": --weights bf16: the checkpoint holds Q8 weights (written by mlarun quantize); "
                "load the checkpoint it was made from");
  }
  if ((int8 || pack_16bit || copy || to_bf16) && pool == nullptr) {
    pool = (own_pool = std::make_unique<ThreadPool>(0)).get();
  }
  const KernelTable& kernels =
      options.kernels != nullptr ? *options.kernels : GetKernelTable(Isa::kScalar);
  // Quantisation errors (a NaN or inf weight) name the tensor; this adds the model directory.
  auto in_model_dir = [&](auto&& quantize) {
    try {
      quantize();
    } catch (const Error& e) {
      throw Error(model_dir + ": " + e.what());
    }
  };
  // A copying load reads every weight anyway, so it refuses NaN and inf (finite_check.h): the
  // streamed matrices row by row as they are packed or copied below (pack_16bit) or quantised
  // (int8), everything else here (all of it when the archive itself made the copy). A mapped
  // load stays instant and passes them through.
  if (copy) {
    const bool streamed_checked_later = pack_16bit || options.weights == WeightFormat::kInt8;
    in_model_dir([&] {
      CheckWeightsFinite(*pool, model->config_, model->weights_, [&](const TensorSlot& slot) {
        return !streamed_checked_later || slot.vector != nullptr || KeepsLoadedDtype(slot.name);
      });
    });
  }
  // The mapped file's pages of quantised or converted matrices are dropped from the process
  // afterwards (they stay in the reclaimable page cache), as for packing below.
  const WeightSource& archive = *model->archive_;
  auto release = [&](const void* data, size_t bytes) { archive.ReleasePages(data, bytes); };
  if (options.weights == WeightFormat::kInt8) {
    in_model_dir(
        [&] { QuantizeWeightsQ8(*pool, kernels, model->config_, model->weights_, release); });
  }
  if (to_bf16) {
    in_model_dir([&] {
      ConvertWeightsBf16(*pool, kernels, model->config_, model->weights_, pack_16bit, release);
    });
  }
  model->PrepareDerived();
  if (int8) {
    in_model_dir([&] { model->QuantizeDerivedQ8(kernels); });
    PackQ8Weights(*pool, model->config_, model->weights_);
  }
  if (pack_16bit) {
    // The mapped file's pages of packed matrices are then dropped from the process (they stay
    // in the reclaimable page cache), so memory holds the weights once.
    in_model_dir([&] {
      Pack16BitWeights(*pool, kernels, model->config_, model->weights_, release);
      // The files were mapped instead of copied: the matrices not packed get their copy here.
      if (copy) CopyStreamedWeights(*pool, model->config_, model->weights_, release);
    });
  }
  return model;
}

ModelConfig Model::LoadConfig(const std::string& path) {
  if (IsGgufFile(path)) return GgufModelConfig(GgufFile::Open(path));
  return LoadModelConfig(path);
}

void Model::BindSplitMla(const GgufWeights& source) {
  const ModelConfig& c = config_;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const TensorInfo* k_b = source.SplitKeyUp(l);
    const TensorInfo* v_b = source.SplitValueUp(l);
    if (k_b == nullptr || v_b == nullptr) continue;
    MlaWeights& mla = weights_.layers[static_cast<size_t>(l)].mla;
    auto view = [](const TensorInfo& t, int64_t row_begin, int64_t rows) {
      WeightMatrix m{.dtype = t.dtype, .rows = rows, .cols = t.shape[1], .blocks = t.blocks};
      m.data = t.data + row_begin * RowBytes(m);
      return m;
    };
    mla.w_uk_t.clear();
    for (int h = 0; h < c.num_attention_heads; ++h)
      mla.w_uk_t.push_back(view(*k_b, int64_t{h} * c.kv_lora_rank, c.kv_lora_rank));
    mla.w_uv = view(*v_b, 0, v_b->shape[0]);
  }
}

void Model::PrepareDerived() {
  const ModelConfig& c = config_;
  if (c.family == ArchFamily::kDeepseek) {
    rope_ = MakeDeepseekRope(c);
    attention_scale_ = DeepseekSoftmaxScale(c);
    // W_uk^T per head for the absorbed path: [kv_lora_rank, nope], same dtype (kv_b_proj's rows
    // decoded whatever their layout, e.g. packed by `--weights bf16`, and stored back exactly),
    // FP8, Q8 and GGUF blocks dequantised to f32.
    for (LayerWeights& layer : weights_.layers) {
      if (!layer.mla.w_uk_t.empty()) continue;  // split MLA files: attn_k_b as stored
      const WeightMatrix& kv_b = layer.mla.kv_b_proj;
      const bool decode =
          kv_b.dtype == DType::kF8E4M3 || kv_b.dtype == DType::kI8 || kv_b.dtype == DType::kBlocks;
      const DType dtype = decode ? DType::kF32 : kv_b.dtype;
      const size_t element = DTypeSize(dtype);
      std::vector<float> row(static_cast<size_t>(kv_b.cols));
      for (int h = 0; h < c.num_attention_heads; ++h) {
        const size_t bytes = static_cast<size_t>(c.kv_lora_rank) * c.qk_nope_head_dim * element;
        auto buffer = std::make_unique<uint8_t[]>(bytes);
        for (int n = 0; n < c.qk_nope_head_dim; ++n) {
          kv_b.DecodeRow(static_cast<int64_t>(h) * (c.qk_nope_head_dim + c.v_head_dim) + n,
                         row.data());
          for (int r = 0; r < c.kv_lora_rank; ++r) {
            uint8_t* dst =
                buffer.get() + (static_cast<size_t>(r) * c.qk_nope_head_dim + n) * element;
            const float v = row[static_cast<size_t>(r)];
            if (dtype == DType::kF32) {
              std::memcpy(dst, &v, sizeof(v));
            } else {  // bf16, f16: the decoded value is exact in its own dtype
              const uint16_t bits = dtype == DType::kBF16 ? F32ToBF16(v) : F32ToF16(v);
              std::memcpy(dst, &bits, sizeof(bits));
            }
          }
        }
        layer.mla.w_uk_t.push_back({.dtype = dtype,
                                    .rows = c.kv_lora_rank,
                                    .cols = c.qk_nope_head_dim,
                                    .data = buffer.get()});
        weights_.owned.push_back(std::move(buffer));
      }
    }
  } else {
    rope_ = MakeLlamaRope(c);
  }
}

namespace {

int64_t MatrixBytes(const WeightMatrix& m) { return WeightBytes(m, 0, m.rows); }

int64_t MlpBytes(const MlpWeights& w) {
  return MatrixBytes(w.gate_proj) + MatrixBytes(w.up_proj) + MatrixBytes(w.down_proj);
}

}  // namespace

int64_t Model::WeightBytesPerDecodedToken() const {
  const ModelConfig& c = config_;
  // The lm_head and the embedding row of the token (looked up, not multiplied).
  int64_t bytes = MatrixBytes(weights_.lm_head) + WeightBytes(weights_.embed_tokens, 0, 1);
  for (size_t i = 0; i < weights_.layers.size(); ++i) {
    const LayerWeights& l = weights_.layers[i];
    for (const WeightMatrix* m :
         {&l.mla.q_proj, &l.mla.q_a_proj, &l.mla.q_b_proj, &l.mla.kv_a_proj_with_mqa, &l.mla.o_proj,
          &l.gqa.q_proj, &l.gqa.k_proj, &l.gqa.v_proj, &l.gqa.o_proj, &l.moe.gate}) {
      bytes += MatrixBytes(*m);
    }
    // Absorbed MLA reads W_uk^T and W_uv: kv_b_proj's bytes, or the split tensors'.
    if (l.mla.w_uv.empty()) {
      bytes += MatrixBytes(l.mla.kv_b_proj);
    } else {
      bytes += MatrixBytes(l.mla.w_uv);
      for (const WeightMatrix& m : l.mla.w_uk_t) bytes += MatrixBytes(m);
    }
    bytes += MlpBytes(l.mlp) + MlpBytes(l.moe.shared);
    if (!l.moe.experts.empty()) bytes += c.num_experts_per_tok * MlpBytes(l.moe.experts[0]);
  }
  return bytes;
}

void Model::QuantizeDerivedQ8(const KernelTable& kernels) {
  for (size_t l = 0; l < weights_.layers.size(); ++l) {
    const std::string name =
        "W_uk^T of model.layers." + std::to_string(l) + ".self_attn.kv_b_proj.weight";
    for (WeightMatrix& m : weights_.layers[l].mla.w_uk_t)
      m = QuantizeMatrixQ8(nullptr, kernels, m, weights_, name);
  }
}

KvLayout Model::MakeKvLayout(DType kv_dtype) const {
  return MakeKvLayoutFromConfig(config_, kv_dtype);
}

void WriteCacheRows(const LayerContext& ctx, const float* rows) {
  const int n_values =
      ctx.cache.pool().layout().layers[static_cast<size_t>(ctx.layer)].ValuesPerRow();
  for (int64_t t = 0; t < ctx.n_tokens(); ++t) {
    const BatchToken& token = ctx.batch[static_cast<size_t>(t)];
    ctx.cache.WriteRow(token.seq, ctx.layer, token.pos, rows + t * n_values);
  }
  for (const SequenceSlice& slice : ctx.sequences) {
    ctx.cache.UpdateSummaries(slice.seq, ctx.layer, slice.n_written);
  }
}

void Model::Forward(Exec& exec, KvCache& cache, std::span<const BatchToken> batch,
                    const ForwardOptions& options, float* logits) const {
  const ModelConfig& c = config_;
  const int64_t n = static_cast<int64_t>(batch.size());
  const int64_t hidden = c.hidden_size;
  if (n == 0) return;
  ScratchArena own_scratch;
  ScratchArena& scratch = exec.scratch != nullptr ? *exec.scratch : own_scratch;
  const ScratchArena::Frame frame(scratch);

  // Group tokens by sequence and check positions continue each sequence's cache.
  std::map<int32_t, size_t> slice_of;
  std::vector<SequenceSlice> sequences;
  for (int64_t t = 0; t < n; ++t) {
    const BatchToken& token = batch[static_cast<size_t>(t)];
    if (token.token < 0 || token.token >= c.vocab_size) {
      throw Error("token id " + std::to_string(token.token) + " is outside the vocabulary [0, " +
                  std::to_string(c.vocab_size) + ")");
    }
    auto [it, inserted] = slice_of.try_emplace(token.seq, sequences.size());
    if (inserted) {
      sequences.push_back({.seq = token.seq, .n_written = cache.Length(token.seq)});
    }
    SequenceSlice& slice = sequences[it->second];
    if (token.pos != slice.n_written) {
      throw Error("batch position " + std::to_string(token.pos) + " does not continue sequence " +
                  std::to_string(token.seq) + " at " + std::to_string(slice.n_written));
    }
    if (token.pos >= c.max_position_embeddings) {
      throw Error("position " + std::to_string(token.pos) + " exceeds max_position_embeddings " +
                  std::to_string(c.max_position_embeddings));
    }
    slice.token_indices.push_back(static_cast<int32_t>(t));
    ++slice.n_written;
  }
  // Per token: RoPE cos/sin and the spans of cache rows it sees (the same in every layer).
  const int pairs = rope_.n_pairs();
  std::vector<float> cos(static_cast<size_t>(n * pairs));
  std::vector<float> sin(static_cast<size_t>(n * pairs));
  std::vector<std::vector<KvSpan>> spans(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    const BatchToken& token = batch[static_cast<size_t>(t)];
    rope_.CosSin(token.pos, cos.data() + t * pairs, sin.data() + t * pairs);
    cache.VisibleSpans(token.seq, token.pos, &spans[static_cast<size_t>(t)]);
  }
  for (SequenceSlice& slice : sequences) {
    slice.use_naive_mla =
        options.mla_path == MlaPath::kNaive ||
        (options.mla_path == MlaPath::kAuto && NaiveMlaIsCheaper(c, ChunkShape(slice, spans)));
  }

  // Residual stream, normalised input and branch output: [n, hidden] each, from the arena (a
  // prefill chunk's buffers are megabytes; fresh zero-filled vectors cost page faults per call).
  const std::span<float> x = scratch.Alloc<float>(static_cast<size_t>(n * hidden));
  for (int64_t t = 0; t < n; ++t) {
    weights_.embed_tokens.DecodeRow(batch[static_cast<size_t>(t)].token, x.data() + t * hidden);
  }
  const std::span<float> normed = scratch.Alloc<float>(static_cast<size_t>(n * hidden));
  const std::span<float> branch = scratch.Alloc<float>(static_cast<size_t>(n * hidden));
  if (options.expert_stats != nullptr) {
    options.expert_stats->counts.resize(static_cast<size_t>(c.num_hidden_layers));
  }
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) {
    const LayerWeights& lw = weights_.layers[static_cast<size_t>(layer)];
    const LayerContext ctx{.exec = exec,
                           .scratch = scratch,
                           .cache = cache,
                           .config = c,
                           .layer = layer,
                           .batch = batch,
                           .sequences = sequences,
                           .spans = spans,
                           .cos = cos.data(),
                           .sin = sin.data(),
                           .rope = rope_,
                           .attention_scale = attention_scale_};
    ForEachRow(exec, n, [&](int64_t t) {
      exec.k.rms_norm(x.data() + t * hidden, lw.input_layernorm.data(), hidden, c.rms_norm_eps,
                      normed.data() + t * hidden);
    });
    if (c.family == ArchFamily::kDeepseek) {
      MlaAttention(ctx, lw.mla, normed.data(), branch.data());
    } else {
      GqaAttention(ctx, lw.gqa, normed.data(), branch.data());
    }
    ForEachRow(exec, n, [&](int64_t t) {
      float* row = x.data() + t * hidden;
      const float* add = branch.data() + t * hidden;
      for (int64_t i = 0; i < hidden; ++i) row[i] += add[i];
      exec.k.rms_norm(row, lw.post_attention_layernorm.data(), hidden, c.rms_norm_eps,
                      normed.data() + t * hidden);
    });
    if (c.family == ArchFamily::kDeepseek && c.IsMoeLayer(layer)) {
      std::vector<int64_t>* counts = nullptr;
      if (options.expert_stats != nullptr) {
        counts = &options.expert_stats->counts[static_cast<size_t>(layer)];
        counts->resize(static_cast<size_t>(c.n_routed_experts));
      }
      MoeFeedForward(ctx, lw.moe, normed.data(), branch.data(), counts);
    } else {
      DenseMlp(ctx, lw.mlp, normed.data(), branch.data());
    }
    ForEachRow(exec, n, [&](int64_t t) {
      float* row = x.data() + t * hidden;
      const float* add = branch.data() + t * hidden;
      for (int64_t i = 0; i < hidden; ++i) row[i] += add[i];
    });
  }
  for (const SequenceSlice& slice : sequences) {
    cache.Commit(slice.seq, static_cast<int64_t>(slice.token_indices.size()));
  }

  // Final norm and lm_head for the tokens that want logits.
  std::vector<float> selected;
  for (int64_t t = 0; t < n; ++t) {
    if (!batch[static_cast<size_t>(t)].want_logits) continue;
    selected.resize(selected.size() + static_cast<size_t>(hidden));
    exec.k.rms_norm(x.data() + t * hidden, weights_.norm.data(), hidden, c.rms_norm_eps,
                    selected.data() + selected.size() - static_cast<size_t>(hidden));
  }
  const int64_t n_out = static_cast<int64_t>(selected.size()) / hidden;
  if (n_out > 0) MatMul(exec, weights_.lm_head, selected.data(), n_out, logits);
}

}  // namespace mlarun
