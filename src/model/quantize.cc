// Q8 weight quantisation and serialisation. On disk a Q8 matrix `<name>` is either packed
// (layout "packed16", what `mlarun quantize` writes: U8 [groups * 16, padded cols] in the kernels'
// layout, kernels/quant.h, with `<name>_q8_scale` F16 [groups * 16, padded cols / 32]), mapped in
// place at load, or row-major (layout "row_major": I8 [rows, cols] with `<name>_q8_scale` F16
// [rows, ceil(cols / 32)], one scale per block of 32 values of a row), packed at load.
#include "model/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/packed_bf16.h"
#include "kernels/quant.h"
#include "model/finite_check.h"
#include "model/safetensors.h"

namespace mlarun {

namespace {

// Returns `bytes` (64-byte aligned) from weights.q8_pages, mapping a new chunk of at least 64 MiB
// when the last one is full (untouched pages of a chunk cost no memory). Heap memory would be 4 KiB
// pages: `--weights int8` decoded at 75.7 tok/s against 90.4 for the same Q8 weights loaded into
// huge pages, prefill at 852 against 1193 (bench-v2-lite, 2 threads).
uint8_t* AllocateQ8Pages(ModelWeights& weights, size_t bytes) {
  constexpr size_t kChunk = size_t{64} << 20;
  bytes = (bytes + 63) / 64 * 64;
  if (weights.q8_pages.empty() || weights.q8_pages_used + bytes > weights.q8_pages.back().size()) {
    weights.q8_pages.emplace_back(std::max(bytes, kChunk));
    weights.q8_pages_used = 0;
  }
  uint8_t* p = weights.q8_pages.back().data() + weights.q8_pages_used;
  weights.q8_pages_used += bytes;
  weights.q8_bytes += bytes;
  return p;
}

// Allocates packed Q8 storage (Q8Layout::kPacked16, all zero weights) for a rows x cols matrix
// and returns the matrix view.
WeightMatrix AllocatePackedQ8(int64_t rows, int64_t cols, ModelWeights& weights, uint8_t** values,
                              uint16_t** scales) {
  *values = AllocateQ8Pages(weights, static_cast<size_t>(PackedQ8ValueBytes(rows, cols)));
  *scales = reinterpret_cast<uint16_t*>(AllocateQ8Pages(
      weights, static_cast<size_t>(PackedQ8ScaleCount(rows, cols)) * sizeof(uint16_t)));
  InitPackedQ8(rows, cols, *values, *scales);
  return {.dtype = DType::kI8,
          .rows = rows,
          .cols = cols,
          .data = *values,
          .q8_scales = *scales,
          .q8_layout = Q8Layout::kPacked16};
}

// Rows per work item of the per-row loops below (ForRowsInItems).
constexpr int64_t kRowsPerItem = 64;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool KeepsLoadedDtype(const std::string& name) {
  return EndsWith(name, "mlp.gate.weight") || name == "model.embed_tokens.weight";
}

WeightMatrix QuantizeMatrixQ8(ThreadPool* pool, const KernelTable& kernels,
                              const WeightMatrix& source, ModelWeights& weights,
                              const std::string& name) {
  uint8_t* values = nullptr;
  uint16_t* scales = nullptr;
  const WeightMatrix q8 = AllocatePackedQ8(source.rows, source.cols, weights, &values, &scales);
  const int64_t stride = Q8PaddedCols(source.cols);
  // The first row with a value that is not finite (checked on every row: int8 has no NaN or
  // inf, and quantising one would give arbitrary bytes).
  FirstNonFiniteRow bad(source.rows);
  ForRowsInItems(pool, source.rows, kRowsPerItem, [&](int64_t r) {
    thread_local std::vector<float> row;
    thread_local std::vector<int8_t> q;
    thread_local std::vector<uint16_t> s;
    row.resize(static_cast<size_t>(source.cols));
    q.resize(static_cast<size_t>(stride));
    s.resize(static_cast<size_t>(stride / kQ8Block));
    kernels.decode_row(source, r, row.data());
    if (!bad.Check(r, DType::kF32, row.data(), source.cols)) return;
    kernels.quantize_weight_row_q8(row.data(), source.cols, q.data(), s.data());
    PackQ8Row(r, source.cols, q.data(), s.data(), values, scales);
  });
  if (bad.found()) {
    const int64_t r = bad.row();
    std::vector<float> row(static_cast<size_t>(source.cols));
    source.DecodeRow(r, row.data());
    const int64_t c = FirstNonFiniteValue(DType::kF32, row.data(), source.cols);
    throw Error("tensor '" + name + "' holds " +
                (std::isnan(row[static_cast<size_t>(c)]) ? "NaN" : "inf") + " at [" +
                std::to_string(r) + ", " + std::to_string(c) +
                "]: it cannot be quantised to int8 (--weights int8)");
  }
  return q8;
}

void QuantizeWeightsQ8(ThreadPool& pool, const KernelTable& kernels, const ModelConfig& config,
                       ModelWeights& weights,
                       const std::function<void(const void*, size_t)>& replaced) {
  std::vector<std::pair<std::string, WeightMatrix*>> targets;
  ForEachTensor(config, weights, [&](const TensorSlot& slot) {
    if (slot.matrix != nullptr && !KeepsLoadedDtype(slot.name) &&
        slot.matrix->dtype != DType::kI8) {
      targets.emplace_back(slot.name, slot.matrix);
    }
  });
  if (config.tie_word_embeddings) {
    targets.emplace_back("lm_head (tied to model.embed_tokens.weight)", &weights.lm_head);
  }
  for (auto& [name, m] : targets) {
    const WeightMatrix former = *m;
    *m = QuantizeMatrixQ8(&pool, kernels, former, weights, name);
    // A tied lm_head's bytes are the embedding table's, still in use.
    if (replaced && former.data != weights.embed_tokens.data && former.row_stride == 0) {
      replaced(former.data, static_cast<size_t>(former.rows * RowBytes(former)));
    }
  }
}

void BindQ8Tensor(const WeightSource& archive, const TensorInfo& t, const std::string& model_dir,
                  WeightMatrix& m, ModelWeights& weights) {
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
    // Rows already have the padded stride: a view of the mapped file (PackQ8Weights packs it).
    m = {.dtype = DType::kI8,
         .rows = rows,
         .cols = cols,
         .data = t.data,
         .q8_scales = reinterpret_cast<const uint16_t*>(s->data)};
    return;
  }
  // Unpadded rows: packed straight from the file, one padded row at a time.
  const int64_t stride = Q8PaddedCols(cols);
  uint8_t* values = nullptr;
  uint16_t* scales = nullptr;
  m = AllocatePackedQ8(rows, cols, weights, &values, &scales);
  std::vector<int8_t> q(static_cast<size_t>(stride), 0);
  std::vector<uint16_t> row_scales(static_cast<size_t>(stride / kQ8Block), 0);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(q.data(), t.data + r * cols, static_cast<size_t>(cols));
    std::memcpy(row_scales.data(), s->data + r * file_blocks * 2,
                static_cast<size_t>(file_blocks) * 2);
    PackQ8Row(r, cols, q.data(), row_scales.data(), values, scales);
  }
}

void BindPackedQ8Tensor(const WeightSource& archive, const TensorInfo& t,
                        const std::vector<int64_t>& shape, const std::string& model_dir,
                        WeightMatrix& m) {
  const std::string where = t.file + ": tensor '" + t.name + "'";
  const int64_t rows = shape[0];
  const int64_t cols = shape[1];
  const int64_t padded_rows = Q8Groups(rows) * kQ8GroupRows;
  const std::vector<int64_t> value_shape = {padded_rows, Q8PaddedCols(cols)};
  if (t.shape != value_shape) {
    TensorInfo expected;
    expected.shape = value_shape;
    throw Error(where + " (packed Q8 of [" + std::to_string(rows) + ", " + std::to_string(cols) +
                "]) has shape " + t.ShapeString() + ", expected " + expected.ShapeString());
  }
  const std::string scale_name = t.name + "_q8_scale";
  const TensorInfo* s = archive.Find(scale_name);
  if (s == nullptr) throw Error(model_dir + ": tensor '" + scale_name + "' is missing");
  const std::vector<int64_t> scale_shape = {padded_rows, Q8PaddedCols(cols) / kQ8Block};
  if (s->dtype != DType::kF16 || s->shape != scale_shape) {
    throw Error(s->file + ": tensor '" + scale_name + "' must be F16 of shape [" +
                std::to_string(scale_shape[0]) + ", " + std::to_string(scale_shape[1]) + "], got " +
                std::string(DTypeName(s->dtype)) + " " + s->ShapeString());
  }
  if (reinterpret_cast<uintptr_t>(s->data) % 2 != 0)
    throw Error(s->file + ": tensor '" + scale_name + "' is not 2-byte aligned");
  m = {.dtype = DType::kI8,
       .rows = rows,
       .cols = cols,
       .data = t.data,
       .q8_scales = reinterpret_cast<const uint16_t*>(s->data),
       .q8_layout = Q8Layout::kPacked16};
}

WeightMatrix PackQ8Matrix(ThreadPool* pool, const WeightMatrix& row_major, ModelWeights& weights) {
  uint8_t* values = nullptr;
  uint16_t* scales = nullptr;
  const WeightMatrix packed =
      AllocatePackedQ8(row_major.rows, row_major.cols, weights, &values, &scales);
  const int64_t stride = Q8PaddedCols(row_major.cols);
  ForRowsInItems(pool, row_major.rows, kRowsPerItem, [&](int64_t r) {
    PackQ8Row(r, row_major.cols, static_cast<const int8_t*>(row_major.data) + r * stride,
              row_major.q8_scales + r * (stride / kQ8Block), values, scales);
  });
  return packed;
}

void PackQ8Weights(ThreadPool& pool, const ModelConfig& config, ModelWeights& weights) {
  auto pack = [&](WeightMatrix& m) {
    if (m.dtype == DType::kI8 && m.q8_layout == Q8Layout::kRowMajor)
      m = PackQ8Matrix(&pool, m, weights);
  };
  ForEachTensor(config, weights, [&](const TensorSlot& slot) {
    if (slot.matrix != nullptr) pack(*slot.matrix);
  });
  pack(weights.lm_head);  // also when tied (then a separate copy, see QuantizeWeightsQ8)
  for (LayerWeights& layer : weights.layers) {
    for (WeightMatrix& m : layer.mla.w_uk_t) pack(m);
  }
}

namespace {

// A matrix the matmul kernels stream, with the name errors give it.
struct Streamed {
  WeightMatrix* matrix;
  std::string name;
};

// The matrices the matmul kernels stream (not the embedding table, not the router; lm_head also
// when tied; the absorbed path's W_uk^T) for which `take` is true, each once.
std::vector<Streamed> StreamedMatrices(const ModelConfig& config, ModelWeights& weights,
                                       const std::function<bool(const WeightMatrix&)>& take) {
  std::vector<Streamed> targets;
  auto consider = [&](WeightMatrix& m, const std::string& name) {
    if (m.rows > 0 && take(m) && std::none_of(targets.begin(), targets.end(), [&](const auto& t) {
          return t.matrix == &m;
        })) {
      targets.push_back({&m, name});
    }
  };
  ForEachTensor(config, weights, [&](const TensorSlot& slot) {
    if (slot.matrix != nullptr && !KeepsLoadedDtype(slot.name)) consider(*slot.matrix, slot.name);
  });
  consider(weights.lm_head, "lm_head.weight");  // also when tied: a copy beside the embedding
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    for (WeightMatrix& m : weights.layers[l].mla.w_uk_t)
      consider(m, "W_uk^T of model.layers." + std::to_string(l) + ".self_attn.kv_b_proj.weight");
    consider(weights.layers[l].mla.w_uv, "blk." + std::to_string(l) + ".attn_v_b.weight");
  }
  return targets;
}

// Gives each of `targets` a new home of `bytes_of(m)` bytes in one zero-filled huge-page buffer
// (64-byte aligned offsets), kept in weights.owned_pages: fill(m, dst, bad) writes it, noting in
// `bad` the rows it reads that hold NaN or inf (an Error naming the matrix then, before m moves),
// then m.data is dst and `replaced` (optional) hears of the former bytes (not of a tied
// embedding's, which stay in use).
void RehomeMatrices(const std::vector<Streamed>& targets, ModelWeights& weights,
                    const std::function<size_t(const WeightMatrix&)>& bytes_of,
                    const std::function<void(WeightMatrix&, uint8_t*, FirstNonFiniteRow&)>& fill,
                    const std::function<void(const void*, size_t)>& replaced) {
  if (targets.empty()) return;
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const Streamed& t : targets) {
    offsets.push_back(total);
    total += (bytes_of(*t.matrix) + 63) / 64 * 64;
  }
  // Owned by the weights before any matrix points into it (also when an error stops the loop).
  weights.owned_pages.emplace_back(total);
  uint8_t* const base = weights.owned_pages.back().data();
  for (size_t i = 0; i < targets.size(); ++i) {
    WeightMatrix& m = *targets[i].matrix;
    const void* former = m.data;
    const size_t former_bytes = static_cast<size_t>(m.rows * RowBytes(m));
    FirstNonFiniteRow bad(m.rows);
    fill(m, base + offsets[i], bad);
    if (bad.found()) throw NonFiniteWeightError(targets[i].name, m, bad.row());
    if (replaced && former != weights.embed_tokens.data) replaced(former, former_bytes);
    m.data = base + offsets[i];
  }
}

// Rows [row_begin, row_end) of the row-major bf16 or f16 (`dtype`) matrix `src` [rows, cols]
// packed into `dst` (PackBf16Rows / PackF16Rows) by the table's kernel where it has one (bitwise
// the same); returns the largest magnitude read.
uint16_t Pack16BitRowsWith(const KernelTable& kernels, DType dtype, const uint16_t* src,
                           int64_t cols, int64_t row_begin, int64_t row_end, uint8_t* dst) {
  if (dtype == DType::kBF16) {
    auto* words = reinterpret_cast<uint32_t*>(dst);
    return kernels.pack_bf16_rows != nullptr
               ? kernels.pack_bf16_rows(src, cols, row_begin, row_end, words)
               : PackBf16Rows(src, cols, row_begin, row_end, words);
  }
  auto* halves = reinterpret_cast<uint16_t*>(dst);
  return kernels.pack_f16_rows != nullptr
             ? kernels.pack_f16_rows(src, cols, row_begin, row_end, halves)
             : PackF16Rows(src, cols, row_begin, row_end, halves);
}

}  // namespace

void Pack16BitWeights(ThreadPool& pool, const KernelTable& kernels, const ModelConfig& config,
                      ModelWeights& weights,
                      const std::function<void(const void*, size_t)>& replaced) {
  // FP8 only for tables with the packed FP8 kernel (the others decode packed rows one by one).
  const bool pack_f8 = kernels.matmul_rows_f8_packed != nullptr;
  const std::vector<Streamed> targets =
      StreamedMatrices(config, weights, [&](const WeightMatrix& m) {
        const bool f8 = pack_f8 && m.dtype == DType::kF8E4M3 &&
                        m.block_rows % kBf16GroupRows == 0 && m.block_cols % 2 == 0;
        return (m.dtype == DType::kBF16 || m.dtype == DType::kF16 || f8) &&
               m.layout16 == Layout16::kRowMajor && m.cols % 2 == 0;
      });
  RehomeMatrices(
      targets, weights,
      [](const WeightMatrix& m) {
        return m.dtype == DType::kF8E4M3 ? PackedF8Bytes(m.rows, m.cols)
                                         : PackedBf16Bytes(m.rows, m.cols);
      },
      [&](WeightMatrix& m, uint8_t* dst, FirstNonFiniteRow& bad) {
        // The buffer is zero-filled: the padding rows of last groups stay 0.
        pool.ParallelFor(PackedBf16Groups(m.rows), [&](int64_t g, int) {
          const int64_t begin = g * kBf16GroupRows;
          const int64_t end = std::min(m.rows, begin + kBf16GroupRows);
          bool nonfinite = false;
          if (m.dtype == DType::kF8E4M3) {
            const auto* src = static_cast<const uint8_t*>(m.data);
            nonfinite = kernels.pack_f8_rows != nullptr
                            ? kernels.pack_f8_rows(src, m.cols, begin, end, dst)
                            : PackF8Rows(src, m.cols, begin, end, dst);
          } else {
            nonfinite = Pack16BitRowsWith(kernels, m.dtype, static_cast<const uint16_t*>(m.data),
                                          m.cols, begin, end, dst) >= NonFinite16Threshold(m.dtype);
          }
          if (nonfinite) {  // an inf or NaN: find its row
            const size_t row_bytes = static_cast<size_t>(m.cols) * DTypeSize(m.dtype);
            for (int64_t r = begin; r < end; ++r) {
              bad.Check(r, m.dtype, static_cast<const uint8_t*>(m.data) + r * row_bytes, m.cols);
            }
          }
        });
      },
      replaced);
  for (const Streamed& t : targets) t.matrix->layout16 = Layout16::kPacked16;
}

bool RoundRowToBf16(const KernelTable& kernels, const WeightMatrix& m, int64_t r, float* row,
                    uint16_t* out, FirstNonFiniteRow& bad) {
  kernels.decode_row(m, r, row);
  if (!bad.Check(r, DType::kF32, row, m.cols)) return false;
  RoundToBf16With(kernels, row, m.cols, out);
  return true;
}

void ConvertWeightsBf16(ThreadPool& pool, const KernelTable& kernels, const ModelConfig& config,
                        ModelWeights& weights, bool packed,
                        const std::function<void(const void*, size_t)>& replaced) {
  const std::vector<Streamed> targets =
      StreamedMatrices(config, weights, [](const WeightMatrix& m) {
        return m.dtype == DType::kF32 || m.dtype == DType::kF16 || m.dtype == DType::kF8E4M3;
      });
  auto packs = [&](const WeightMatrix& m) { return packed && m.cols % 2 == 0; };
  RehomeMatrices(
      targets, weights,
      [&](const WeightMatrix& m) {
        return packs(m) ? PackedBf16Bytes(m.rows, m.cols)
                        : static_cast<size_t>(m.rows * m.cols) * sizeof(uint16_t);
      },
      [&](WeightMatrix& m, uint8_t* dst, FirstNonFiniteRow& bad) {
        // A 16-row group at a time: rounded row-major into `rounded`, then packed from there
        // (rows past m.rows stay 0: the buffer is zero-filled), or rounded in place.
        const bool pack = packs(m);
        auto* out = reinterpret_cast<uint16_t*>(dst);
        pool.ParallelFor(PackedBf16Groups(m.rows), [&](int64_t g, int) {
          thread_local std::vector<float> row;
          thread_local std::vector<uint16_t> rounded;
          row.resize(static_cast<size_t>(m.cols));
          rounded.resize(static_cast<size_t>(kBf16GroupRows * m.cols));
          const int64_t begin = g * kBf16GroupRows;
          const int64_t end = std::min(m.rows, begin + kBf16GroupRows);
          for (int64_t r = begin; r < end; ++r) {
            uint16_t* to = pack ? rounded.data() + (r - begin) * m.cols : out + r * m.cols;
            if (!RoundRowToBf16(kernels, m, r, row.data(), to, bad)) return;
          }
          if (pack) {
            Pack16BitRowsWith(kernels, DType::kBF16, rounded.data(), m.cols, 0, end - begin,
                              dst + PackedBf16GroupWords(g, m.cols) * sizeof(uint32_t));
          }
        });
      },
      replaced);
  for (const Streamed& t : targets) {
    WeightMatrix& m = *t.matrix;
    m = {.dtype = DType::kBF16,
         .rows = m.rows,
         .cols = m.cols,
         .data = m.data,
         .layout16 = packs(m) ? Layout16::kPacked16 : Layout16::kRowMajor};
  }
}

void CopyStreamedWeights(ThreadPool& pool, const ModelConfig& config, ModelWeights& weights,
                         const std::function<void(const void*, size_t)>& replaced) {
  const std::vector<Streamed> targets =
      StreamedMatrices(config, weights, [](const WeightMatrix& m) {
        return (m.dtype == DType::kF32 && m.row_stride == 0) || m.dtype == DType::kBlocks ||
               ((m.dtype == DType::kF8E4M3 || m.dtype == DType::kBF16 || m.dtype == DType::kF16) &&
                m.layout16 == Layout16::kRowMajor);
      });
  RehomeMatrices(
      targets, weights,
      [](const WeightMatrix& m) { return static_cast<size_t>(m.rows * RowBytes(m)); },
      [&](WeightMatrix& m, uint8_t* dst, FirstNonFiniteRow& bad) {
        const size_t row_bytes = static_cast<size_t>(RowBytes(m));
        const auto* src = static_cast<const uint8_t*>(m.data);
        WeightMatrix copy = m;
        copy.data = dst;
        ForRowsInItems(&pool, m.rows, kRowsPerItem, [&](int64_t r) {
          const size_t at = static_cast<size_t>(r) * row_bytes;
          std::memcpy(dst + at, src + at, row_bytes);
          if (m.dtype == DType::kBlocks) {
            bad.CheckDecoded(r, copy);
          } else {
            bad.Check(r, m.dtype, dst + at, m.cols);
          }
        });
      },
      replaced);
}

}  // namespace mlarun
