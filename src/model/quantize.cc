// Q8 weight quantisation and serialisation. On disk a Q8 matrix `<name>` is I8 [rows, cols] with
// `<name>_q8_scale` F32 [rows, ceil(cols / 32)] (one scale per block of 32 values of a row).
#include "model/quantize.h"

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"
#include "kernels/quant.h"
#include "model/safetensors.h"

namespace mlarun {

namespace {

// Allocates padded Q8 storage for a rows x cols matrix and returns the matrix view.
WeightMatrix AllocateQ8(int64_t rows, int64_t cols, ModelWeights& weights, int8_t** values,
                        uint16_t** scales) {
  const int64_t stride = Q8PaddedCols(cols);
  auto value_buffer = std::make_unique<uint8_t[]>(static_cast<size_t>(rows * stride));
  auto scale_buffer = std::make_unique<uint8_t[]>(static_cast<size_t>(rows * (stride / kQ8Block)) *
                                                  sizeof(uint16_t));
  *values = reinterpret_cast<int8_t*>(value_buffer.get());
  *scales = reinterpret_cast<uint16_t*>(scale_buffer.get());
  weights.owned.push_back(std::move(value_buffer));
  weights.owned.push_back(std::move(scale_buffer));
  return {.dtype = DType::kI8, .rows = rows, .cols = cols, .data = *values, .q8_scales = *scales};
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool KeepsLoadedDtype(const std::string& name) {
  return EndsWith(name, "mlp.gate.weight") || name == "model.embed_tokens.weight";
}

WeightMatrix QuantizeMatrixQ8(ThreadPool* pool, const WeightMatrix& source, ModelWeights& weights) {
  int8_t* values = nullptr;
  uint16_t* scales = nullptr;
  const WeightMatrix q8 = AllocateQ8(source.rows, source.cols, weights, &values, &scales);
  const int64_t stride = Q8PaddedCols(source.cols);
  auto quantize_rows = [&](int64_t item, int) {
    std::vector<float> row(static_cast<size_t>(source.cols));
    for (int64_t r = item * 64; r < std::min(source.rows, (item + 1) * 64); ++r) {
      source.DecodeRow(r, row.data());
      QuantizeWeightRowQ8(row.data(), source.cols, values + r * stride,
                          scales + r * (stride / kQ8Block));
    }
  };
  const int64_t items = (source.rows + 63) / 64;
  if (pool != nullptr) {
    pool->ParallelFor(items, quantize_rows);
  } else {
    for (int64_t i = 0; i < items; ++i) quantize_rows(i, 0);
  }
  return q8;
}

void QuantizeWeightsQ8(ThreadPool& pool, const ModelConfig& config, ModelWeights& weights) {
  std::vector<WeightMatrix*> targets;
  ForEachTensor(config, weights, [&](const TensorSlot& slot) {
    if (slot.matrix != nullptr && !KeepsLoadedDtype(slot.name) &&
        slot.matrix->dtype != DType::kI8) {
      targets.push_back(slot.matrix);
    }
  });
  if (config.tie_word_embeddings) targets.push_back(&weights.lm_head);  // a separate Q8 copy
  for (WeightMatrix* m : targets) *m = QuantizeMatrixQ8(&pool, *m, weights);
}

void BindQ8Tensor(const SafetensorsArchive& archive, const TensorInfo& t,
                  const std::string& model_dir, WeightMatrix& m, ModelWeights& weights) {
  const std::string scale_name = t.name + "_q8_scale";
  const TensorInfo* s = archive.Find(scale_name);
  if (s == nullptr) throw Error(model_dir + ": tensor '" + scale_name + "' is missing");
  const int64_t rows = t.shape[0];
  const int64_t cols = t.shape[1];
  const int64_t file_blocks = (cols + kQ8Block - 1) / kQ8Block;
  if (s->dtype != DType::kF16 || s->shape != std::vector<int64_t>{rows, file_blocks}) {
    throw Error(s->file + ": tensor '" + scale_name + "' must be F16 of shape [" +
                std::to_string(rows) + ", " + std::to_string(file_blocks) + "], got " +
                std::string(DTypeName(s->dtype)) + " " + s->ShapeString());
  }
  if (cols == Q8PaddedCols(cols) && reinterpret_cast<uintptr_t>(s->data) % 2 == 0) {
    // Rows already have the kernels' stride: use the mapped file in place (no copy).
    m = {.dtype = DType::kI8,
         .rows = rows,
         .cols = cols,
         .data = t.data,
         .q8_scales = reinterpret_cast<const uint16_t*>(s->data)};
    return;
  }
  int8_t* values = nullptr;
  uint16_t* scales = nullptr;
  m = AllocateQ8(rows, cols, weights, &values, &scales);
  const int64_t stride = Q8PaddedCols(cols);
  const int64_t padded_blocks = stride / kQ8Block;
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(values + r * stride, t.data + r * cols, static_cast<size_t>(cols));
    std::memset(values + r * stride + cols, 0, static_cast<size_t>(stride - cols));
    std::memcpy(scales + r * padded_blocks, s->data + r * file_blocks * 2,
                static_cast<size_t>(file_blocks) * 2);
    for (int64_t b = file_blocks; b < padded_blocks; ++b) scales[r * padded_blocks + b] = 0;
  }
}

void WriteQ8Model(const ModelConfig& config, const ModelWeights& loaded, const std::string& src_dir,
                  const std::string& out_dir) {
  // ForEachTensor takes a mutable struct (it sizes the per-layer vectors); on loaded weights the
  // sizes are already right and nothing is modified.
  ModelWeights& weights = const_cast<ModelWeights&>(loaded);
  namespace fs = std::filesystem;
  fs::create_directories(out_dir);
  nlohmann::json cfg = nlohmann::json::parse(ReadFileToString(src_dir + "/config.json"));
  cfg["quantization_config"] = {{"quant_method", "mlarun_q8"}, {"block_size", kQ8Block}};
  WriteStringToFile(out_dir + "/config.json", cfg.dump(2) + "\n");
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    if (fs::exists(src_dir + "/" + file)) {
      fs::copy_file(src_dir + "/" + file, out_dir + "/" + file,
                    fs::copy_options::overwrite_existing);
    }
  }
  std::vector<TensorToWrite> tensors;
  ForEachTensor(config, weights, [&](const TensorSlot& slot) {
    if (slot.vector != nullptr) {
      TensorToWrite t{slot.name, DType::kF32, slot.shape, {}};
      t.data.resize(slot.vector->values.size() * sizeof(float));
      std::memcpy(t.data.data(), slot.vector->values.data(), t.data.size());
      tensors.push_back(std::move(t));
      return;
    }
    const WeightMatrix& m = *slot.matrix;
    if (m.dtype == DType::kI8) {
      const int64_t stride = Q8PaddedCols(m.cols);
      const int64_t blocks = (m.cols + kQ8Block - 1) / kQ8Block;
      TensorToWrite q{slot.name, DType::kI8, {m.rows, m.cols}, {}};
      TensorToWrite s{slot.name + "_q8_scale", DType::kF16, {m.rows, blocks}, {}};
      q.data.resize(static_cast<size_t>(m.rows * m.cols));
      s.data.resize(static_cast<size_t>(m.rows * blocks) * 2);
      for (int64_t r = 0; r < m.rows; ++r) {
        std::memcpy(q.data.data() + r * m.cols, static_cast<const int8_t*>(m.data) + r * stride,
                    static_cast<size_t>(m.cols));
        std::memcpy(s.data.data() + r * blocks * 2, m.q8_scales + r * (stride / kQ8Block),
                    static_cast<size_t>(blocks) * 2);
      }
      tensors.push_back(std::move(q));
      tensors.push_back(std::move(s));
      return;
    }
    if (m.dtype == DType::kF8E4M3)
      throw Error("quantize: " + slot.name + " is FP8 and was not re-quantised");
    const size_t bytes = static_cast<size_t>(m.rows * m.cols) * DTypeSize(m.dtype);
    TensorToWrite t{slot.name, m.dtype, slot.shape, {}};
    t.data.assign(static_cast<const uint8_t*>(m.data), static_cast<const uint8_t*>(m.data) + bytes);
    tensors.push_back(std::move(t));
  });
  WriteSafetensors(out_dir + "/model.safetensors", tensors,
                   {{"format", "pt"}, {"quantized_by", "mlarun"}});
  fs::remove(out_dir + "/model.safetensors.index.json");
}

}  // namespace mlarun
