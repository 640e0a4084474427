// The tensor list of every supported architecture and its binding to a safetensors archive.
#include "model/weights.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/quantize.h"
#include "model/safetensors.h"

namespace mlarun {

namespace {

void VisitMlp(const std::string& prefix, int64_t hidden, int64_t intermediate, MlpWeights& mlp,
              const std::function<void(const TensorSlot&)>& fn) {
  fn({.name = prefix + "gate_proj.weight",
      .shape = {intermediate, hidden},
      .matrix = &mlp.gate_proj,
      .quantizable = true});
  fn({.name = prefix + "up_proj.weight",
      .shape = {intermediate, hidden},
      .matrix = &mlp.up_proj,
      .quantizable = true});
  fn({.name = prefix + "down_proj.weight",
      .shape = {hidden, intermediate},
      .matrix = &mlp.down_proj,
      .quantizable = true});
}

void VisitMla(const ModelConfig& c, const std::string& p, MlaWeights& w,
              const std::function<void(const TensorSlot&)>& fn) {
  const int64_t hidden = c.hidden_size;
  const int64_t q_out = static_cast<int64_t>(c.num_attention_heads) * c.QkHeadDim();
  if (c.q_lora_rank > 0) {
    fn({.name = p + "q_a_proj.weight",
        .shape = {c.q_lora_rank, hidden},
        .matrix = &w.q_a_proj,
        .quantizable = true});
    fn({.name = p + "q_a_layernorm.weight", .shape = {c.q_lora_rank}, .vector = &w.q_a_layernorm});
    fn({.name = p + "q_b_proj.weight",
        .shape = {q_out, c.q_lora_rank},
        .matrix = &w.q_b_proj,
        .quantizable = true});
  } else {
    fn({.name = p + "q_proj.weight",
        .shape = {q_out, hidden},
        .matrix = &w.q_proj,
        .quantizable = true});
  }
  fn({.name = p + "kv_a_proj_with_mqa.weight",
      .shape = {c.kv_lora_rank + c.qk_rope_head_dim, hidden},
      .matrix = &w.kv_a_proj_with_mqa,
      .quantizable = true});
  fn({.name = p + "kv_a_layernorm.weight", .shape = {c.kv_lora_rank}, .vector = &w.kv_a_layernorm});
  fn({.name = p + "kv_b_proj.weight",
      .shape = {static_cast<int64_t>(c.num_attention_heads) * (c.qk_nope_head_dim + c.v_head_dim),
                c.kv_lora_rank},
      .matrix = &w.kv_b_proj,
      .quantizable = true});
  fn({.name = p + "o_proj.weight",
      .shape = {hidden, static_cast<int64_t>(c.num_attention_heads) * c.v_head_dim},
      .matrix = &w.o_proj,
      .quantizable = true});
}

void VisitGqa(const ModelConfig& c, const std::string& p, GqaWeights& w,
              const std::function<void(const TensorSlot&)>& fn) {
  const int64_t hidden = c.hidden_size;
  const int64_t q_out = static_cast<int64_t>(c.num_attention_heads) * c.head_dim;
  const int64_t kv_out = static_cast<int64_t>(c.num_key_value_heads) * c.head_dim;
  fn({.name = p + "q_proj.weight",
      .shape = {q_out, hidden},
      .matrix = &w.q_proj,
      .quantizable = true});
  fn({.name = p + "k_proj.weight",
      .shape = {kv_out, hidden},
      .matrix = &w.k_proj,
      .quantizable = true});
  fn({.name = p + "v_proj.weight",
      .shape = {kv_out, hidden},
      .matrix = &w.v_proj,
      .quantizable = true});
  fn({.name = p + "o_proj.weight",
      .shape = {hidden, q_out},
      .matrix = &w.o_proj,
      .quantizable = true});
  if (c.attention_bias) {
    fn({.name = p + "q_proj.bias", .shape = {q_out}, .vector = &w.q_bias});
    fn({.name = p + "k_proj.bias", .shape = {kv_out}, .vector = &w.k_bias});
    fn({.name = p + "v_proj.bias", .shape = {kv_out}, .vector = &w.v_bias});
  }
}

void ConvertToF32(const TensorInfo& t, float* out) {
  const int64_t n = t.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DType::kF32: {
        float v;
        std::memcpy(&v, t.data + 4 * i, 4);
        out[i] = v;
        break;
      }
      case DType::kBF16:
      case DType::kF16: {
        uint16_t v;
        std::memcpy(&v, t.data + 2 * i, 2);
        out[i] = t.dtype == DType::kBF16 ? BF16ToF32(v) : F16ToF32(v);
        break;
      }
      default:
        out[i] = 0.0f;
    }
  }
}

// A GGUF block-quantised tensor: matrices multiplied as stored, vectors dequantised.
void BindBlocksTensor(const TensorInfo& t, const TensorSlot& slot, const std::string& where) {
  if (slot.vector != nullptr) {
    if (t.blocks->dequantize == nullptr)
      throw Error(where + " has type " + std::string(t.blocks->name) +
                  ", which mlarun cannot read");
    slot.vector->values.resize(static_cast<size_t>(t.NumElements()));
    t.blocks->dequantize(t.data, t.NumElements(), slot.vector->values.data());
    return;
  }
  if (!t.blocks->multipliable()) {
    throw Error(where + " has type " + std::string(t.blocks->name) +
                ", which mlarun cannot multiply (supported: F32, F16, BF16, Q8_0, Q6_K, Q5_K, "
                "Q4_K, Q5_0, Q5_1, Q4_0, Q4_1)");
  }
  *slot.matrix = {.dtype = DType::kBlocks,
                  .rows = slot.shape[0],
                  .cols = slot.shape[1],
                  .data = t.data,
                  .blocks = t.blocks};
}

}  // namespace

void ForEachTensor(const ModelConfig& c, ModelWeights& w,
                   const std::function<void(const TensorSlot&)>& fn) {
  const int64_t hidden = c.hidden_size;
  fn({.name = "model.embed_tokens.weight",
      .shape = {c.vocab_size, hidden},
      .matrix = &w.embed_tokens});
  w.layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    LayerWeights& layer = w.layers[static_cast<size_t>(i)];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    fn({.name = p + "input_layernorm.weight", .shape = {hidden}, .vector = &layer.input_layernorm});
    if (c.family == ArchFamily::kDeepseek) {
      VisitMla(c, p + "self_attn.", layer.mla, fn);
    } else {
      VisitGqa(c, p + "self_attn.", layer.gqa, fn);
    }
    fn({.name = p + "post_attention_layernorm.weight",
        .shape = {hidden},
        .vector = &layer.post_attention_layernorm});
    if (c.family == ArchFamily::kDeepseek && c.IsMoeLayer(i)) {
      fn({.name = p + "mlp.gate.weight",
          .shape = {c.n_routed_experts, hidden},
          .matrix = &layer.moe.gate});
      if (c.topk_method == TopkMethod::kNoauxTc) {
        fn({.name = p + "mlp.gate.e_score_correction_bias",
            .shape = {c.n_routed_experts},
            .vector = &layer.moe.e_score_correction_bias});
      }
      layer.moe.experts.resize(static_cast<size_t>(c.n_routed_experts));
      for (int e = 0; e < c.n_routed_experts; ++e) {
        VisitMlp(p + "mlp.experts." + std::to_string(e) + ".", hidden, c.moe_intermediate_size,
                 layer.moe.experts[static_cast<size_t>(e)], fn);
      }
      if (c.n_shared_experts > 0) {
        VisitMlp(p + "mlp.shared_experts.", hidden,
                 static_cast<int64_t>(c.moe_intermediate_size) * c.n_shared_experts,
                 layer.moe.shared, fn);
      }
    } else {
      VisitMlp(p + "mlp.", hidden, c.intermediate_size, layer.mlp, fn);
    }
  }
  fn({.name = "model.norm.weight", .shape = {hidden}, .vector = &w.norm});
  if (!c.tie_word_embeddings) {
    fn({.name = "lm_head.weight",
        .shape = {c.vocab_size, hidden},
        .matrix = &w.lm_head,
        .quantizable = false});
  }
}

void LoadWeights(const ModelConfig& config, const WeightSource& archive,
                 const std::string& model_dir, ModelWeights& weights,
                 const std::function<void(int64_t, int64_t)>& on_progress) {
  int64_t total = 0;
  int64_t done = 0;
  if (on_progress) {
    ModelWeights scratch;
    ForEachTensor(config, scratch, [&](const TensorSlot&) { ++total; });
  }
  ForEachTensor(config, weights, [&](const TensorSlot& slot) {
    if (on_progress) on_progress(++done, total);
    const TensorInfo* t = archive.Find(slot.name);
    if (t == nullptr) throw Error(model_dir + ": tensor '" + slot.name + "' is missing");
    // GGUF tensors keep their own names: the message gives both.
    const std::string where = t->file + ": tensor '" + t->name + "'" +
                              (t->name != slot.name ? " (" + slot.name + ")" : "");
    if (t->dtype == DType::kU8 && slot.matrix != nullptr) {
      if (!config.q8_packed) {
        throw Error(where +
                    " is U8 but config.json's quantization_config has no layout \"packed16\"");
      }
      BindPackedQ8Tensor(archive, *t, slot.shape, model_dir, *slot.matrix);
      return;
    }
    if (t->shape != slot.shape) {
      TensorInfo expected;
      expected.shape = slot.shape;
      throw Error(where + " has shape " + t->ShapeString() + ", expected " +
                  expected.ShapeString());
    }
    if (t->dtype == DType::kBlocks) {
      BindBlocksTensor(*t, slot, where);
      return;
    }
    if (t->dtype == DType::kI8 && slot.matrix != nullptr) {
      if (!config.q8_weights) {
        throw Error(
            where +
            " is I8 but config.json has no quantization_config with quant_method mlarun_q8");
      }
      BindQ8Tensor(archive, *t, model_dir, *slot.matrix, weights);
      return;
    }
    const bool is_float = t->dtype == DType::kF32 || t->dtype == DType::kBF16 ||
                          t->dtype == DType::kF16 || t->dtype == DType::kF8E4M3;
    if (!is_float)
      throw Error(where + " has unsupported dtype " + std::string(DTypeName(t->dtype)));
    if (slot.vector != nullptr) {
      if (t->dtype == DType::kF8E4M3)
        throw Error(where + ": F8_E4M3 is only supported for matrices");
      slot.vector->values.resize(static_cast<size_t>(t->NumElements()));
      ConvertToF32(*t, slot.vector->values.data());
      return;
    }
    WeightMatrix& m = *slot.matrix;
    m.dtype = t->dtype;
    m.rows = slot.shape[0];
    m.cols = slot.shape[1];
    m.data = t->data;
    if (reinterpret_cast<uintptr_t>(t->data) % DTypeSize(t->dtype) != 0) {
      auto copy = std::make_unique<uint8_t[]>(t->n_bytes);
      std::memcpy(copy.get(), t->data, t->n_bytes);
      m.data = copy.get();
      weights.owned.push_back(std::move(copy));
    }
    if (t->dtype == DType::kF8E4M3) {
      if (config.fp8_block_rows == 0) {
        throw Error(where + " is F8_E4M3 but config.json has no quantization_config");
      }
      const std::string scale_name = slot.name + "_scale_inv";
      const TensorInfo* s = archive.Find(scale_name);
      if (s == nullptr) throw Error(model_dir + ": tensor '" + scale_name + "' is missing");
      const int64_t br = config.fp8_block_rows;
      const int64_t bc = config.fp8_block_cols;
      const std::vector<int64_t> expected = {(m.rows + br - 1) / br, (m.cols + bc - 1) / bc};
      if (s->shape != expected || s->dtype != DType::kF32) {
        throw Error(s->file + ": tensor '" + scale_name + "' must be F32 of shape [" +
                    std::to_string(expected[0]) + ", " + std::to_string(expected[1]) + "], got " +
                    std::string(DTypeName(s->dtype)) + " " + s->ShapeString());
      }
      auto scales = std::make_unique<uint8_t[]>(s->n_bytes);
      std::memcpy(scales.get(), s->data, s->n_bytes);
      m.block_scale = reinterpret_cast<const float*>(scales.get());
      // The SIMD kernels multiply value / 256 by scale * 256 (exact up to this bound).
      for (int64_t i = 0; i < expected[0] * expected[1]; ++i) {
        const float scale = m.block_scale[i];
        if (!(std::fabs(scale) <= 0x1p100f)) {
          throw Error(s->file + ": tensor '" + scale_name + "' holds " + std::to_string(scale) +
                      " at [" + std::to_string(i / expected[1]) + ", " +
                      std::to_string(i % expected[1]) +
                      "]; FP8 block scales must be finite and at most 2^100 in magnitude");
        }
      }
      weights.owned.push_back(std::move(scales));
      m.block_rows = static_cast<int>(br);
      m.block_cols = static_cast<int>(bc);
    }
  });
  if (config.tie_word_embeddings) weights.lm_head = weights.embed_tokens;
}

}  // namespace mlarun
