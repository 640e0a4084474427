// MatMul splits output rows into work items for the thread pool and runs the ISA's row kernel on
// each; a weight row is read from memory once per batch.
#include "kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/quant.h"

namespace mlarun {

int64_t WeightMatrix::RowStride() const {
  return dtype == DType::kI8 ? Q8PaddedCols(cols) : cols * static_cast<int64_t>(DTypeSize(dtype));
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
      const uint16_t* src = static_cast<const uint16_t*>(data) + r * n;
      for (int64_t c = 0; c < n; ++c) out[c] = BF16ToF32(src[c]);
      return;
    }
    case DType::kF16: {
      const uint16_t* src = static_cast<const uint16_t*>(data) + r * n;
      for (int64_t c = 0; c < n; ++c) out[c] = F16ToF32(src[c]);
      return;
    }
    case DType::kF8E4M3: {
      const uint8_t* src = static_cast<const uint8_t*>(data) + r * n;
      const int64_t n_col_blocks = (n + block_cols - 1) / block_cols;
      const float* scales = block_scale + (r / block_rows) * n_col_blocks;
      for (int64_t c = 0; c < n; ++c) out[c] = F8E4M3ToF32(src[c]) * scales[c / block_cols];
      return;
    }
    case DType::kI8: {
      const int8_t* src = static_cast<const int8_t*>(data) + r * Q8PaddedCols(n);
      const uint16_t* scales = q8_scales + r * (Q8PaddedCols(n) / kQ8Block);
      for (int64_t c = 0; c < n; ++c)
        out[c] = static_cast<float>(src[c]) * F16ToF32(scales[c / kQ8Block]);
      return;
    }
    default:
      return;
  }
}

void MatMulRows(Exec& exec, const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                const float* x, int64_t n_tokens, float* y) {
  const int64_t n_rows = row_end - row_begin;
  // Rows per work item: large enough to amortise scheduling and to reuse activations across
  // rows (prefill), small enough to balance threads on short matrices (decode).
  const int64_t block = n_rows >= 4096 || n_tokens > 8 ? 64 : 16;
  if (w.dtype == DType::kI8) {
    // Activations are quantised once per call (per token and block, independent of the batch).
    // Workers must see the caller's buffer: bind a reference (a thread_local named inside the
    // lambda would be each worker's own, empty instance).
    thread_local Q8Activations caller_buffer;
    Q8Activations& q8 = caller_buffer;
    QuantizeActivationsQ8(x, n_tokens, w.cols, &q8);
    exec.pool.ParallelFor((n_rows + block - 1) / block, [&](int64_t item, int) {
      const int64_t begin = row_begin + item * block;
      const int64_t end = std::min(row_end, begin + block);
      exec.k.matmul_rows_q8(w, begin, end, q8, y + (begin - row_begin), n_rows);
    });
    return;
  }
  if (w.dtype == DType::kBF16 && exec.k.matmul_rows_bf16 != nullptr) {
    thread_local std::vector<uint16_t> caller_buffer;
    std::vector<uint16_t>& x_bf16 = caller_buffer;  // workers read the caller's buffer
    x_bf16.resize(static_cast<size_t>(n_tokens * w.cols));
    for (size_t i = 0; i < x_bf16.size(); ++i) x_bf16[i] = F32ToBF16(x[i]);
    exec.pool.ParallelFor((n_rows + block - 1) / block, [&](int64_t item, int) {
      const int64_t begin = row_begin + item * block;
      const int64_t end = std::min(row_end, begin + block);
      exec.k.matmul_rows_bf16(w, begin, end, x_bf16.data(), n_tokens, y + (begin - row_begin),
                              n_rows);
    });
    return;
  }
  exec.pool.ParallelFor((n_rows + block - 1) / block, [&](int64_t item, int) {
    const int64_t begin = row_begin + item * block;
    const int64_t end = std::min(row_end, begin + block);
    exec.k.matmul_rows(w, begin, end, x, n_tokens, y + (begin - row_begin), n_rows);
  });
}

void MatMul(Exec& exec, const WeightMatrix& w, const float* x, int64_t n_tokens, float* y) {
  MatMulRows(exec, w, 0, w.rows, x, n_tokens, y);
}

}  // namespace mlarun
