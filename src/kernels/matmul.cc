// MatMul splits output rows into work items for the thread pool and runs the ISA's row kernel on
// each; a weight row is read from memory once per batch.
#include "kernels/matmul.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/packed_bf16.h"
#include "kernels/quant.h"

namespace mlarun {

int64_t RowBytes(const WeightMatrix& w) {
  if (w.dtype == DType::kBlocks) return w.blocks->Bytes(w.cols);
  return w.cols * static_cast<int64_t>(DTypeSize(w.dtype));
}

int64_t WeightBytes(const WeightMatrix& w, int64_t row_begin, int64_t row_end) {
  if (w.empty() || row_end <= row_begin) return 0;
  if (w.dtype == DType::kBlocks) return (row_end - row_begin) * RowBytes(w);
  if (w.dtype == DType::kI8) {
    const int64_t padded = Q8PaddedCols(w.cols);
    return (row_end - row_begin) * (padded + padded / kQ8Block * int64_t{sizeof(uint16_t)});
  }
  int64_t bytes = (row_end - row_begin) * w.cols * static_cast<int64_t>(DTypeSize(w.dtype));
  if (w.block_scale != nullptr) {
    const int64_t block_rows = (row_end - 1) / w.block_rows - row_begin / w.block_rows + 1;
    bytes += block_rows * ((w.cols + w.block_cols - 1) / w.block_cols) *
             static_cast<int64_t>(sizeof(float));
  }
  return bytes;
}

void WeightMatrix::Q8Row(int64_t r, int8_t* q, uint16_t* s) const {
  const int64_t stride = Q8PaddedCols(cols);
  const int64_t n_blocks = stride / kQ8Block;
  if (q8_layout == Q8Layout::kPacked16) {
    UnpackQ8Row(r, cols, static_cast<const uint8_t*>(data), q8_scales, q, s);
    return;
  }
  const int8_t* src = static_cast<const int8_t*>(data) + r * stride;
  std::copy(src, src + stride, q);
  std::copy(q8_scales + r * n_blocks, q8_scales + (r + 1) * n_blocks, s);
}

void WeightMatrix::DecodeRow(int64_t r, float* out) const {
  const int64_t n = cols;
  switch (dtype) {
    case DType::kF32: {
      const float* src = static_cast<const float*>(data) + r * n;
      std::copy(src, src + n, out);
      return;
    }
    case DType::kBF16: {
      if (layout16 == Layout16::kPacked16) {
        thread_local std::vector<uint16_t> row;
        row.resize(static_cast<size_t>(n));
        UnpackBf16Row(static_cast<const uint32_t*>(data), n, r, row.data());
        for (int64_t c = 0; c < n; ++c) out[c] = BF16ToF32(row[static_cast<size_t>(c)]);
        return;
      }
      const uint16_t* src = static_cast<const uint16_t*>(data) + r * n;
      for (int64_t c = 0; c < n; ++c) out[c] = BF16ToF32(src[c]);
      return;
    }
    case DType::kF16: {
      if (layout16 == Layout16::kPacked16) {
        for (int64_t c = 0; c < n; ++c)
          out[c] = F16ToF32(PackedF16At(static_cast<const uint16_t*>(data), n, r, c));
        return;
      }
      const uint16_t* src = static_cast<const uint16_t*>(data) + r * n;
      for (int64_t c = 0; c < n; ++c) out[c] = F16ToF32(src[c]);
      return;
    }
    case DType::kF8E4M3: {
      const auto* bytes = static_cast<const uint8_t*>(data);
      const int64_t n_col_blocks = (n + block_cols - 1) / block_cols;
      const float* scales = block_scale + (r / block_rows) * n_col_blocks;
      const bool packed = layout16 == Layout16::kPacked16;
      for (int64_t c = 0; c < n; ++c) {
        const uint8_t byte = packed ? bytes[PackedF8Index(n, r, c)] : bytes[r * n + c];
        out[c] = F8E4M3ToF32(byte) * scales[c / block_cols];
      }
      return;
    }
    case DType::kBlocks:
      blocks->dequantize(static_cast<const uint8_t*>(data) + r * RowBytes(*this), n, out);
      return;
    case DType::kI8: {
      std::vector<int8_t> q(static_cast<size_t>(Q8PaddedCols(n)));
      std::vector<uint16_t> scales(static_cast<size_t>(Q8PaddedCols(n) / kQ8Block));
      Q8Row(r, q.data(), scales.data());
      for (int64_t c = 0; c < n; ++c) {
        out[c] = static_cast<float>(q[static_cast<size_t>(c)]) *
                 F16ToF32(scales[static_cast<size_t>(c / kQ8Block)]);
      }
      return;
    }
    default:
      return;
  }
}

namespace {

// How a job's kernel reads its activations: as given, rounded to bf16 (row-major, or in the
// activation tiles of packed_bf16.h), quantised to Q8, or float32 in pair form
// (KernelTable::matmul_rows_pair_x).
enum class InputForm { kF32, kBf16, kBf16Tiles, kQ8, kF32Pairs };

InputForm FormOf(const KernelTable& k, const WeightMatrix& w, int64_t n_tokens) {
  if (w.dtype == DType::kI8 || w.dtype == DType::kBlocks) return InputForm::kQ8;
  if (w.dtype == DType::kBF16 && w.layout16 == Layout16::kPacked16 &&
      k.matmul_rows_bf16_tiles != nullptr && n_tokens >= k.bf16_tiles_min_tokens) {
    return InputForm::kBf16Tiles;
  }
  if (w.dtype == DType::kBF16 && k.matmul_rows_bf16 != nullptr) return InputForm::kBf16;
  if (w.dtype == DType::kF8E4M3 && w.layout16 == Layout16::kPacked16 &&
      k.matmul_rows_f8_packed != nullptr) {
    return InputForm::kBf16;
  }
  if (w.dtype == DType::kBF16 && w.layout16 == Layout16::kRowMajor &&
      k.matmul_rows_pair_x != nullptr) {
    return InputForm::kF32Pairs;
  }
  return InputForm::kF32;
}

// One distinct input of a batch in the form its kernels read (buffers reused across calls).
struct PreparedInput {
  const float* x = nullptr;
  int64_t n_tokens = 0;
  int64_t cols = 0;
  InputForm form = InputForm::kF32;
  std::vector<uint16_t> bf16;   // kBf16, kBf16Tiles: x rounded to bf16, [n_tokens, cols]
  std::vector<uint16_t> tiles;  // kBf16Tiles: bf16 in activation tiles
  Q8Activations q8;             // kQ8: x quantised per token and block
  std::vector<float> pairs;     // kF32Pairs: each token's x in pair form, [n_tokens, cols]
};

// Rows per work item, at least: 64 (4 packed Q8 groups; 128 KB of int8 or 256 KB of bf16 weights
// at 2,048 columns), large enough for each thread to stream long runs of weights and to reuse
// activations across rows (prefill); a 1,408-row expert is still 22 items for the threads to share.
// 16-row items for decode were measured slower (a simulated MoE step: 21 vs 26-30 GB/s).
constexpr int64_t kRowsPerItem = 64;
constexpr int64_t kMaxRowsPerItem = 1024;

// Rows [row_begin, row_end) of jobs[job]: what one thread claims at a time.
struct WorkItem {
  size_t job = 0;
  int64_t row_begin = 0;
  int64_t row_end = 0;
};

// Splits the jobs' rows into items in job order with guided sizes: each item is the rows left in
// the whole batch divided by twice the thread count, rounded down to a multiple of kRowsPerItem
// and clamped to [kRowsPerItem, kMaxRowsPerItem] (and cut at the end of its job). Early items are
// long, which suits the hardware prefetchers (1,024-row items, 2 MB of int8 at 2,048 columns: the
// Q8 GEMV read 53 instead of 48.5 GB/s with 64-row ones); the last ones are short, so the threads
// finish a product together instead of one waiting up to a long item's time for the other (the
// guided schedule of OpenMP). Where items fall does not change any output: each row is computed
// the same way in any range.
void GuidedItems(std::span<const MatMulJob> jobs, int n_threads, std::vector<WorkItem>* items) {
  items->clear();
  int64_t remaining = 0;
  for (const MatMulJob& job : jobs) remaining += job.row_end - job.row_begin;
  for (size_t j = 0; j < jobs.size(); ++j) {
    for (int64_t begin = jobs[j].row_begin; begin < jobs[j].row_end;) {
      const int64_t size =
          std::clamp<int64_t>(remaining / (2 * int64_t{n_threads}) / kRowsPerItem * kRowsPerItem,
                              kRowsPerItem, kMaxRowsPerItem);
      const int64_t end = std::min(jobs[j].row_end, begin + size);
      items->push_back({.job = j, .row_begin = begin, .row_end = end});
      remaining -= end - begin;
      begin = end;
    }
  }
}

// out = x rounded to bf16, in parallel for prefill-sized inputs.
void RoundToBf16(Exec& exec, const float* x, int64_t n, uint16_t* out) {
  constexpr int64_t kPerItem = int64_t{64} * 1024;
  auto round = [&](int64_t item, int) {
    const int64_t begin = item * kPerItem;
    const int64_t end = std::min(n, (item + 1) * kPerItem);
    RoundToBf16With(exec.k, x + begin, end - begin, out + begin);
  };
  exec.pool.ParallelFor((n + kPerItem - 1) / kPerItem, round);  // inline for a single item
}

// tiles = the activation tiles of bf16 [n_tokens, cols], blocks of 16 tokens in parallel.
void ActivationTiles(Exec& exec, const uint16_t* bf16, int64_t n_tokens, int64_t cols,
                     uint16_t* tiles) {
  const int64_t per_item = kBf16GroupRows * std::max<int64_t>(1, 4096 / std::max<int64_t>(cols, 1));
  exec.pool.ParallelFor((n_tokens + per_item - 1) / per_item, [&](int64_t item, int) {
    const int64_t t_begin = item * per_item;
    TileBf16Activations(bf16, n_tokens, cols, t_begin, std::min(n_tokens, t_begin + per_item),
                        tiles);
  });
}

// out = x [n_tokens, cols] with each token's row in pair form, tokens in parallel for prefill.
void PairForm(Exec& exec, const float* x, int64_t n_tokens, int64_t cols, float* out) {
  const int64_t per_item = std::max<int64_t>(1, int64_t{64} * 1024 / std::max<int64_t>(cols, 1));
  exec.pool.ParallelFor((n_tokens + per_item - 1) / per_item, [&](int64_t item, int) {
    for (int64_t t = item * per_item; t < std::min(n_tokens, (item + 1) * per_item); ++t)
      exec.k.bf16_pair_form(x + t * cols, cols, out + t * cols);
  });
}

// Adds a MatMulBatch call to its shape's entry in meter->shapes (a new one for a new shape).
void AddToShape(ExecMeter* meter, std::span<const MatMulJob> jobs, int64_t bytes, double seconds) {
  const MatMulJob& first = jobs.front();
  const ExecMeter::ProductShape key{.jobs = static_cast<int64_t>(jobs.size()),
                                    .rows = first.row_end - first.row_begin,
                                    .cols = first.w->cols,
                                    .tokens = first.n_tokens,
                                    .weight_bytes = bytes};
  auto same = [&](const ExecMeter::ProductShape& s) {
    return s.jobs == key.jobs && s.rows == key.rows && s.cols == key.cols &&
           s.tokens == key.tokens && s.weight_bytes == key.weight_bytes;
  };
  auto it = std::find_if(meter->shapes.begin(), meter->shapes.end(), same);
  if (it == meter->shapes.end()) it = meter->shapes.insert(meter->shapes.end(), key);
  ++it->calls;
  it->seconds += seconds;
}

}  // namespace

void MatMulBatch(Exec& exec, std::span<const MatMulJob> jobs) {
  // The meter's time includes preparing the inputs (bf16 rounding, Q8 quantisation).
  const auto start = exec.meter != nullptr ? std::chrono::steady_clock::now()
                                           : std::chrono::steady_clock::time_point{};
  // The caller's buffers, read by the workers through these references (a thread_local named
  // inside the worker lambda would be each worker's own, empty instance).
  thread_local std::vector<PreparedInput> inputs_buffer;
  thread_local std::vector<size_t> input_of_buffer;
  thread_local std::vector<WorkItem> items_buffer;
  std::vector<PreparedInput>& inputs = inputs_buffer;
  std::vector<size_t>& input_of = input_of_buffer;
  std::vector<WorkItem>& items = items_buffer;
  input_of.assign(jobs.size(), 0);
  size_t n_inputs = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const MatMulJob& job = jobs[j];
    if (job.w->dtype == DType::kBlocks && !job.w->blocks->multipliable()) {
      throw Error("MatMul: weights of type " + std::string(job.w->blocks->name) +
                  " cannot be multiplied");
    }
    if (job.w->dtype == DType::kI8 && job.w->q8_layout != Q8Layout::kPacked16) {
      throw Error("MatMul: a Q8 weight matrix [" + std::to_string(job.w->rows) + ", " +
                  std::to_string(job.w->cols) + "] is not packed (Q8Layout::kPacked16)");
    }
    const InputForm form = FormOf(exec.k, *job.w, job.n_tokens);
    size_t i = 0;
    while (i < n_inputs && !(inputs[i].x == job.x && inputs[i].n_tokens == job.n_tokens &&
                             inputs[i].cols == job.w->cols && inputs[i].form == form)) {
      ++i;
    }
    if (i == n_inputs) {
      if (inputs.size() <= n_inputs) inputs.resize(n_inputs + 1);
      PreparedInput& in = inputs[n_inputs++];
      in.x = job.x;
      in.n_tokens = job.n_tokens;
      in.cols = job.w->cols;
      in.form = form;
      if (form == InputForm::kQ8) {
        QuantizeActivationsQ8(job.x, job.n_tokens, job.w->cols, &in.q8, &exec.pool,
                              exec.k.quantize_row_q8, exec.k.split_q8_row);
      } else if (form == InputForm::kBf16 || form == InputForm::kBf16Tiles) {
        in.bf16.resize(static_cast<size_t>(job.n_tokens * job.w->cols));
        RoundToBf16(exec, job.x, static_cast<int64_t>(in.bf16.size()), in.bf16.data());
        if (form == InputForm::kBf16Tiles) {
          in.tiles.resize(
              static_cast<size_t>(Bf16ActivationTileElements(job.n_tokens, job.w->cols)));
          ActivationTiles(exec, in.bf16.data(), job.n_tokens, job.w->cols, in.tiles.data());
        }
      } else if (form == InputForm::kF32Pairs) {
        in.pairs.resize(static_cast<size_t>(job.n_tokens * job.w->cols));
        PairForm(exec, job.x, job.n_tokens, job.w->cols, in.pairs.data());
      }
    }
    input_of[j] = i;
  }
  GuidedItems(jobs, exec.pool.size(), &items);
  exec.pool.ParallelFor(static_cast<int64_t>(items.size()), [&](int64_t item, int) {
    const WorkItem& it = items[static_cast<size_t>(item)];
    const MatMulJob& job = jobs[it.job];
    const PreparedInput& in = inputs[input_of[it.job]];
    const int64_t n_rows = job.row_end - job.row_begin;
    const int64_t begin = it.row_begin;
    const int64_t end = it.row_end;
    float* y = job.y + (begin - job.row_begin);
    switch (in.form) {
      case InputForm::kQ8:
        if (job.w->dtype == DType::kBlocks) {
          (exec.k.matmul_rows_blocks != nullptr
               ? exec.k.matmul_rows_blocks
               : MatMulRowsBlocksScalar)(*job.w, begin, end, in.q8, y, n_rows);
        } else {
          exec.k.matmul_rows_q8(*job.w, begin, end, in.q8, y, n_rows);
        }
        break;
      case InputForm::kBf16:
        if (job.w->dtype == DType::kF8E4M3) {
          exec.k.matmul_rows_f8_packed(*job.w, begin, end, in.bf16.data(), job.n_tokens, y, n_rows);
        } else {
          exec.k.matmul_rows_bf16(*job.w, begin, end, in.bf16.data(), job.n_tokens, y, n_rows);
        }
        break;
      case InputForm::kBf16Tiles:
        exec.k.matmul_rows_bf16_tiles(*job.w, begin, end, in.tiles.data(), job.n_tokens, y, n_rows);
        break;
      case InputForm::kF32:
        if (job.w->dtype == DType::kF8E4M3 && exec.k.matmul_rows_f8_bf16 != nullptr) {
          exec.k.matmul_rows_f8_bf16(*job.w, begin, end, job.x, job.n_tokens, y, n_rows);
        } else {
          exec.k.matmul_rows(*job.w, begin, end, job.x, job.n_tokens, y, n_rows);
        }
        break;
      case InputForm::kF32Pairs:
        exec.k.matmul_rows_pair_x(*job.w, begin, end, in.pairs.data(), job.n_tokens, y, n_rows);
        break;
    }
  });
  if (exec.meter != nullptr) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    int64_t bytes = 0;
    for (const MatMulJob& job : jobs) bytes += WeightBytes(*job.w, job.row_begin, job.row_end);
    exec.meter->product_seconds += seconds;
    exec.meter->product_weight_bytes += bytes;
    ++exec.meter->product_batches;
    if (exec.meter->by_shape && !jobs.empty()) AddToShape(exec.meter, jobs, bytes, seconds);
  }
}

void MatMulRows(Exec& exec, const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                const float* x, int64_t n_tokens, float* y) {
  const MatMulJob job{
      .w = &w, .row_begin = row_begin, .row_end = row_end, .x = x, .n_tokens = n_tokens, .y = y};
  MatMulBatch(exec, std::span<const MatMulJob>(&job, 1));
}

void MatMul(Exec& exec, const WeightMatrix& w, const float* x, int64_t n_tokens, float* y) {
  MatMulRows(exec, w, 0, w.rows, x, n_tokens, y);
}

}  // namespace mlarun
