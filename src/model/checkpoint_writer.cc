// `mlarun quantize`'s writer: each tensor's bytes are made when the safetensors writer reaches
// it (a Q8 matrix's values and scales from one quantisation held until both are written).
#include "model/checkpoint_writer.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "model/finite_check.h"
#include "model/quantize.h"
#include "model/safetensors.h"

namespace mlarun {

namespace {

// Copies src_dir's config.json to out_dir (its quantization_config replaced by `quantization`,
// or removed if that is null) and the tokenizer files.
void CopyConfigAndTokenizer(const std::string& src_dir, const std::string& out_dir,
                            const nlohmann::json& quantization) {
  namespace fs = std::filesystem;
  nlohmann::json cfg = nlohmann::json::parse(ReadFileToString(src_dir + "/config.json"));
  if (quantization.is_null()) {
    cfg.erase("quantization_config");
  } else {
    cfg["quantization_config"] = quantization;
  }
  WriteStringToFile(out_dir + "/config.json", cfg.dump(2) + "\n");
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
    if (fs::exists(src_dir + "/" + file)) {
      fs::copy_file(src_dir + "/" + file, out_dir + "/" + file,
                    fs::copy_options::overwrite_existing);
    }
  }
}

// A tensor of the written checkpoint: its declaration, how to make its bytes and the matrix it
// is made from (if any: its file pages are released once the tensor is written).
struct TensorSource {
  TensorDecl decl;
  std::function<void(std::vector<uint8_t>&)> fill;
  const WeightMatrix* matrix = nullptr;
};

void CopyBytes(const void* from, size_t bytes, std::vector<uint8_t>& out) {
  const auto* begin = static_cast<const uint8_t*>(from);
  out.assign(begin, begin + bytes);
}

size_t MatrixBytes(const WeightMatrix& m) {
  return static_cast<size_t>(m.rows * m.cols) * DTypeSize(m.dtype);
}

// A matrix kept as stored (row-major): its bytes, FP8 ones decoded to float32 (exact).
TensorSource StoredMatrix(const KernelTable& kernels, const TensorSlot& slot,
                          const WeightMatrix& m) {
  if (m.dtype == DType::kI8 || m.layout16 != Layout16::kRowMajor || m.row_stride != 0) {
    throw Error("tensor '" + slot.name + "' is not a row-major matrix");  // LoadWeights makes none
  }
  const bool widen = m.dtype == DType::kF8E4M3;
  const DType dtype = widen ? DType::kF32 : m.dtype;
  return {{slot.name, dtype, slot.shape},
          [&kernels, &m, widen](std::vector<uint8_t>& out) {
            if (!widen) return CopyBytes(m.data, MatrixBytes(m), out);
            out.resize(static_cast<size_t>(m.rows * m.cols) * sizeof(float));
            for (int64_t r = 0; r < m.rows; ++r)
              kernels.decode_row(m, r, reinterpret_cast<float*>(out.data()) + r * m.cols);
          },
          &m};
}

// `m` rounded to bf16 as ConvertWeightsBf16 rounds it at load (RoundRowToBf16).
TensorSource Bf16Matrix(ThreadPool& pool, const KernelTable& kernels, const TensorSlot& slot,
                        const WeightMatrix& m) {
  return {{slot.name, DType::kBF16, slot.shape},
          [&pool, &kernels, &m, name = slot.name](std::vector<uint8_t>& out) {
            out.resize(static_cast<size_t>(m.rows * m.cols) * sizeof(uint16_t));
            auto* to = reinterpret_cast<uint16_t*>(out.data());
            FirstNonFiniteRow bad(m.rows);
            ForRowsInItems(&pool, m.rows, 64, [&](int64_t r) {
              thread_local std::vector<float> row;
              row.resize(static_cast<size_t>(m.cols));
              RoundRowToBf16(kernels, m, r, row.data(), to + r * m.cols, bad);
            });
            if (bad.found()) throw NonFiniteWeightError(name, m, bad.row());
          },
          &m};
}

// The two tensors of one Q8 matrix (values and scales, in the file's layout), made by whichever
// is written first; each is handed over (moved) when written.
struct PendingQ8 {
  bool made = false;
  std::vector<uint8_t> values;
  std::vector<uint8_t> scales;
};

// Writes `q`'s values and scales in `layout` into `p`.
void Q8Tensors(const WeightMatrix& q, Q8Layout layout, PendingQ8& p) {
  if (layout == Q8Layout::kPacked16) {
    CopyBytes(q.data, PackedQ8ValueBytes(q.rows, q.cols), p.values);
    CopyBytes(q.q8_scales, PackedQ8ScaleCount(q.rows, q.cols) * 2, p.scales);
    return;
  }
  // Row-major: I8 [rows, cols] and F16 scales [rows, blocks], unpacked row by row.
  const int64_t stride = Q8PaddedCols(q.cols);
  const size_t blocks = static_cast<size_t>((q.cols + kQ8Block - 1) / kQ8Block);
  p.values.resize(static_cast<size_t>(q.rows * q.cols));
  p.scales.resize(static_cast<size_t>(q.rows) * blocks * 2);
  std::vector<int8_t> row(static_cast<size_t>(stride));
  std::vector<uint16_t> row_scales(static_cast<size_t>(stride / kQ8Block));
  for (int64_t r = 0; r < q.rows; ++r) {
    q.Q8Row(r, row.data(), row_scales.data());
    std::memcpy(p.values.data() + r * q.cols, row.data(), static_cast<size_t>(q.cols));
    std::memcpy(p.scales.data() + static_cast<size_t>(r) * blocks * 2, row_scales.data(),
                blocks * 2);
  }
}

// `m` in Q8 as `--weights int8` loads it (quantised, or an I8 input packed), as two tensors:
// values and `<name>_q8_scale`, in `layout`. Declared values first, so that with the writer's
// order (whole cache lines in declaration order) only one matrix is held at a time.
void Q8Matrix(ThreadPool& pool, const KernelTable& kernels, Q8Layout layout, const TensorSlot& slot,
              const WeightMatrix& m, std::vector<TensorSource>& sources) {
  auto pending = std::make_shared<PendingQ8>();
  auto make = [&pool, &kernels, &m, layout, pending, name = slot.name] {
    if (pending->made) return;
    ModelWeights scratch;  // owns the quantised or packed pages until this returns
    WeightMatrix q8 = m;
    if (m.dtype != DType::kI8) {
      q8 = QuantizeMatrixQ8(&pool, kernels, m, scratch, name);
    } else if (m.q8_layout != Q8Layout::kPacked16) {
      q8 = PackQ8Matrix(&pool, m, scratch);
    }
    Q8Tensors(q8, layout, *pending);
    pending->made = true;
  };
  const bool packed = layout == Q8Layout::kPacked16;
  const int64_t rows = packed ? Q8Groups(m.rows) * kQ8GroupRows : m.rows;
  const int64_t stride = Q8PaddedCols(m.cols);
  const int64_t blocks = packed ? stride / kQ8Block : (m.cols + kQ8Block - 1) / kQ8Block;
  sources.push_back(
      {{slot.name, packed ? DType::kU8 : DType::kI8, {rows, packed ? stride : m.cols}},
       [make, pending](auto& out) {
         make();
         out = std::move(pending->values);
       },
       &m});
  sources.push_back({{slot.name + "_q8_scale", DType::kF16, {rows, blocks}},
                     [make, pending](auto& out) {
                       make();
                       out = std::move(pending->scales);
                     },
                     &m});
}

}  // namespace

void WriteConvertedCheckpoint(const std::string& src_dir, const std::string& out_dir,
                              const CheckpointWriteOptions& options) {
  namespace fs = std::filesystem;
  const ModelConfig config = LoadModelConfig(src_dir);
  const bool bf16 = options.weights == WeightFormat::kBf16;
  if (bf16 && config.q8_weights) {
    throw Error(src_dir +
                ": --weights bf16: the checkpoint holds Q8 weights (written by mlarun quantize); "
                "convert the checkpoint it was made from");
  }
  if (!bf16 && options.weights != WeightFormat::kInt8)
    throw Error("quantize: the written weights are int8 or bf16");
  const SafetensorsArchive archive = SafetensorsArchive::Open(src_dir, FileLoad::kMmap);
  ModelWeights weights;
  LoadWeights(config, archive, src_dir, weights);
  std::unique_ptr<ThreadPool> own_pool;
  ThreadPool& pool =
      options.pool != nullptr ? *options.pool : *(own_pool = std::make_unique<ThreadPool>(0));
  const KernelTable& kernels =
      options.kernels != nullptr ? *options.kernels : GetKernelTable(Isa::kScalar);
  auto converted = [&](const TensorSlot& slot) {
    if (slot.matrix == nullptr || KeepsLoadedDtype(slot.name)) return false;
    const DType dtype = slot.matrix->dtype;
    return !bf16 || dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kF8E4M3;
  };
  // Errors about the weights (a NaN or inf, found as a matrix is converted) name the checkpoint.
  auto in_src_dir = [&](auto&& work) {
    try {
      work();
    } catch (const Error& e) {
      throw Error(src_dir + ": " + e.what());
    }
  };
  // What is written as stored is checked first (converted matrices as they are converted).
  in_src_dir([&] {
    CheckWeightsFinite(pool, config, weights,
                       [&](const TensorSlot& slot) { return !converted(slot); });
  });
  std::vector<TensorSource> sources;
  const std::string tmp = out_dir + "/model.safetensors.partial";
  try {
    ForEachTensor(config, weights, [&](const TensorSlot& slot) {
      if (slot.vector != nullptr) {
        const std::vector<float>* values = &slot.vector->values;
        sources.push_back({{slot.name, DType::kF32, slot.shape}, [values](auto& out) {
                             CopyBytes(values->data(), values->size() * sizeof(float), out);
                           }});
      } else if (!converted(slot)) {
        sources.push_back(StoredMatrix(kernels, slot, *slot.matrix));
      } else if (bf16) {
        sources.push_back(Bf16Matrix(pool, kernels, slot, *slot.matrix));
      } else {
        Q8Matrix(pool, kernels, options.layout, slot, *slot.matrix, sources);
      }
    });
    std::vector<TensorDecl> decls;
    std::map<std::string, const TensorSource*> by_name;
    for (const TensorSource& t : sources) {
      decls.push_back(t.decl);
      by_name[t.decl.name] = &t;
    }
    fs::create_directories(out_dir);
    WriteSafetensorsStreaming(tmp, decls, {{"format", "pt"}, {"quantized_by", "mlarun"}},
                              [&](const TensorDecl& d, std::vector<uint8_t>& out) {
                                const TensorSource& t = *by_name.at(d.name);
                                in_src_dir([&] { t.fill(out); });
                                if (t.matrix != nullptr)
                                  archive.ReleasePages(t.matrix->data, MatrixBytes(*t.matrix));
                              });
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  fs::rename(tmp, out_dir + "/model.safetensors");
  fs::remove(out_dir + "/model.safetensors.index.json");
  const nlohmann::json quantization =
      bf16 ? nlohmann::json(nullptr)
           : nlohmann::json{
                 {"quant_method", "mlarun_q8"},
                 {"block_size", kQ8Block},
                 {"layout", options.layout == Q8Layout::kPacked16 ? "packed16" : "row_major"}};
  CopyConfigAndTokenizer(src_dir, out_dir, quantization);
}

}  // namespace mlarun
