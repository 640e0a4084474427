// Portable matmul: rows are decoded to float32 once per thread and reused for every token, so a
// weight row is read from memory once per batch (the batched-GEMV access pattern of decode).
#include "kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "kernels/vec.h"

namespace mlarun {

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
    default:
      return;
  }
}

void MatMulRows(ThreadPool& pool, const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                const float* x, int64_t n_tokens, float* y) {
  const int64_t n_rows = row_end - row_begin;
  const int64_t cols = w.cols;
  const int64_t block = 16;  // rows per work item
  pool.ParallelFor((n_rows + block - 1) / block, [&](int64_t item, int) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(cols));
    const int64_t begin = item * block;
    const int64_t end = std::min(n_rows, begin + block);
    for (int64_t r = begin; r < end; ++r) {
      const float* wr = row.data();
      if (w.dtype == DType::kF32) {
        wr = static_cast<const float*>(w.data) + (row_begin + r) * cols;
      } else {
        w.DecodeRow(row_begin + r, row.data());
      }
      for (int64_t t = 0; t < n_tokens; ++t) y[t * n_rows + r] = Dot(wr, x + t * cols, cols);
    }
  });
}

void MatMul(ThreadPool& pool, const WeightMatrix& w, const float* x, int64_t n_tokens, float* y) {
  MatMulRows(pool, w, 0, w.rows, x, n_tokens, y);
}

}  // namespace mlarun
