// Dense layers: y = W x for weights in any supported storage dtype and float32 activations.
#pragma once

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "kernels/block_formats.h"
#include "kernels/kernel_table.h"

namespace mlarun {

// How kI8 (Q8) values and scales are laid out.
enum class Q8Layout {
  // As in files: values [rows, Q8PaddedCols(cols)] int8, scales [rows, blocks] float16.
  kRowMajor,
  // As the matmul kernels read them (quant.h, "packed Q8"): 16 rows interleaved per group.
  kPacked16,
};

// How 16-bit float values (kBF16, kF16) and FP8 bytes (kF8E4M3) are laid out.
enum class Layout16 {
  kRowMajor,  // as in files: [rows, cols]
  // packed_bf16.h: groups of 16 rows, by pairs of columns (cols even); kBF16 and kF8E4M3
  // interleave each pair's two values per row, kF16 stores the pair's two columns one after the
  // other. Read by the SIMD tables' outer-product kernels (FP8: the AVX512-BF16 kernel only);
  // other kernels decode it row by row. Packed FP8 holds no NaN byte: the loads that pack it
  // refuse them, so its kernel does not look for them.
  kPacked16,
};

// A read-only weight matrix as stored in the checkpoint (row-major, PyTorch Linear layout).
struct WeightMatrix {
  // kF32, kF16, kBF16, kF8E4M3, kI8 (Q8 blocks, see quant.h), kBlocks (GGUF blocks, `blocks`)
  DType dtype = DType::kF32;
  int64_t rows = 0;            // out_features
  int64_t cols = 0;            // in_features
  const void* data = nullptr;  // [rows, cols]; kI8: see q8_layout
  // FP8: dequantisation multipliers `weight_scale_inv`
  // [ceil(rows / block_rows), ceil(cols / block_cols)].
  const float* block_scale = nullptr;
  int block_rows = 0;
  int block_cols = 0;
  // kI8: float16 block scales (see q8_layout).
  const uint16_t* q8_scales = nullptr;
  // kI8: the layout of data and q8_scales; the matmul kernels need kPacked16.
  Q8Layout q8_layout = Q8Layout::kRowMajor;
  // kBF16, kF16, kF8E4M3: the layout of data.
  Layout16 layout16 = Layout16::kRowMajor;
  // kF32 only: elements between row starts (0: cols), for views into wider rows.
  int64_t row_stride = 0;
  // kBlocks: the format of data [rows, cols / blocks->block_values blocks], rows one after the
  // other (as in GGUF files).
  const BlockFormat* blocks = nullptr;

  bool empty() const { return data == nullptr; }
  // Returns row `r` converted to float32 in `out` [cols].
  void DecodeRow(int64_t r, float* out) const;
  // kI8, either layout: row `r` as int8 values q [Q8PaddedCols(cols)] and float16 scales
  // s [Q8PaddedCols(cols) / kQ8Block].
  void Q8Row(int64_t r, int8_t* q, uint16_t* s) const;
};

// Bytes of one row of a row-major `w` (kF32, kF16, kBF16, kF8E4M3 values without their scales;
// kBlocks: the row's blocks).
int64_t RowBytes(const WeightMatrix& w);

// Bytes of `w` that a product over its rows [row_begin, row_end) reads: the values, plus the FP8
// block scales of the row blocks it touches; Q8 (kI8): the values padded to Q8PaddedCols and a
// float16 scale per block of 32, 34 bytes per 32 weights as in GGUF's Q8_0; kBlocks: the rows'
// blocks as stored. `mlarun bench`'s
// bytes per decoded token add these up.
int64_t WeightBytes(const WeightMatrix& w, int64_t row_begin, int64_t row_end);

// Computes y = x W^T. x: [n_tokens, w.cols]; y: [n_tokens, w.rows]. Each output element is one
// thread's fixed-order dot product, so the result depends neither on the thread count nor on the
// other tokens of the batch.
void MatMul(Exec& exec, const WeightMatrix& w, const float* x, int64_t n_tokens, float* y);

// Same for a subset of output rows [row_begin, row_end) of `w`; y: [n_tokens, row_end-row_begin].
void MatMulRows(Exec& exec, const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                const float* x, int64_t n_tokens, float* y);

// One product of a batch: rows [row_begin, row_end) of `*w` against x [n_tokens, w->cols],
// written to y [n_tokens, row_end - row_begin].
struct MatMulJob {
  const WeightMatrix* w = nullptr;
  int64_t row_begin = 0;
  int64_t row_end = 0;
  const float* x = nullptr;
  int64_t n_tokens = 0;
  float* y = nullptr;
};

// Runs all `jobs` in one parallel region: one hand-off to the worker threads for, say, all the
// experts of a MoE layer or all the heads of W_uk, instead of one per matrix (a decode step has
// hundreds of small products). Each output element is computed exactly as by MatMulRows. Jobs
// that share an input pointer share its conversion (bf16 rounding or Q8 quantisation).
void MatMulBatch(Exec& exec, std::span<const MatMulJob> jobs);

}  // namespace mlarun
