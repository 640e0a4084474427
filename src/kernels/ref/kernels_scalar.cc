// The scalar reference kernels: portable C++, the oracle every SIMD kernel is tested against and
// the path that runs on any CPU (`--isa scalar`).
#include <cmath>
#include <span>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/vec.h"

namespace mlarun::detail {

namespace {

void MatMulRowsScalar(const WeightMatrix& w, int64_t row_begin, int64_t row_end, const float* x,
                      int64_t n_tokens, float* y, int64_t ldy) {
  const int64_t cols = w.cols;
  thread_local std::vector<float> row;
  row.resize(static_cast<size_t>(cols));
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* wr = row.data();
    if (w.dtype == DType::kF32) {
      wr = static_cast<const float*>(w.data) + r * (w.row_stride > 0 ? w.row_stride : cols);
    } else {
      w.DecodeRow(r, row.data());
    }
    for (int64_t t = 0; t < n_tokens; ++t)
      y[t * ldy + (r - row_begin)] = Dot(wr, x + t * cols, cols);
  }
}

// Packed Q8 (quant.h): each row read back with UnpackQ8Row, then per block an exact int32 dot
// product and acc = fma(float(isum), w_scale * x_scale, acc), the operations the SIMD kernels
// perform.
void MatMulRowsQ8Scalar(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                        const Q8Activations& x, float* y, int64_t ldy) {
  const int64_t n_blocks = Q8PaddedCols(w.cols) / kQ8Block;
  thread_local std::vector<int8_t> wq;
  thread_local std::vector<uint16_t> ws;
  wq.resize(static_cast<size_t>(n_blocks * kQ8Block));
  ws.resize(static_cast<size_t>(n_blocks));
  for (int64_t r = row_begin; r < row_end; ++r) {
    w.Q8Row(r, wq.data(), ws.data());
    for (int64_t t = 0; t < x.n_tokens; ++t) {
      const int8_t* xr = x.Row(t);
      const float* xs = x.Scales(t);
      float acc = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        int32_t isum = 0;
        for (int i = 0; i < kQ8Block; ++i)
          isum += int32_t{wq[static_cast<size_t>(b * kQ8Block + i)]} * xr[b * kQ8Block + i];
        acc = std::fma(static_cast<float>(isum), F16ToF32(ws[static_cast<size_t>(b)]) * xs[b], acc);
      }
      y[t * ldy + (r - row_begin)] = acc;
    }
  }
}

void GemmScalar(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                int64_t ldb, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) acc = std::fma(a[i * lda + kk], b[kk * ldb + j], acc);
      c[i * ldc + j] = acc;
    }
  }
}

void ExpScalar(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

float ScaleBiasMaxScalar(float* s, float scale, const float* bias, int64_t n) {
  float max_value = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    s[i] = s[i] * scale + bias[i];
    max_value = std::max(max_value, s[i]);
  }
  return max_value;
}

float ExpShiftSumScalar(float* x, float shift, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

void PvAccumulateScalar(const float* p, int n_heads, int n_rows, const float* v, int64_t v_stride,
                        int dv, float* acc) {
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t j = 0; j < n_rows; ++j)
      Axpy(p[j * n_heads + h], v + j * v_stride, acc + h * dv, dv);
  }
}

float StreamSumScalar(const float* x, int64_t n) {
  float s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int k = 0; k < 4; ++k) s[k] += x[i + k];
  }
  for (; i < n; ++i) s[0] += x[i];
  return s[0] + s[1] + s[2] + s[3];
}

void Bf16ToF32Scalar(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = BF16ToF32(in[i]);
}

void DecodeRowScalar(const WeightMatrix& w, int64_t r, float* out) { w.DecodeRow(r, out); }

void TopKScalar(const float* scores, int n, int k, int* out) {
  TopK(std::span<const float>(scores, static_cast<size_t>(n)), k, out);
}

const KernelTable kScalarTable = {.isa = Isa::kScalar,
                                  .matmul_rows = MatMulRowsScalar,
                                  .matmul_rows_q8 = MatMulRowsQ8Scalar,
                                  .quantize_row_q8 = QuantizeActivationRowQ8,
                                  .quantize_weight_row_q8 = QuantizeWeightRowQ8,
                                  .quantize_group_i8 = QuantizeGroupI8,
                                  .gemm = GemmScalar,
                                  .dot = Dot,
                                  .stream_sum = StreamSumScalar,
                                  .axpy = Axpy,
                                  .scale = Scale,
                                  .exp = ExpScalar,
                                  .silu_mul = SiluMul,
                                  .rms_norm = RmsNorm,
                                  .rope = ApplyRopeHeads,
                                  .softmax = Softmax,
                                  .top_k = TopKScalar,
                                  .decode_row = DecodeRowScalar,
                                  .scale_bias_max = ScaleBiasMaxScalar,
                                  .exp_shift_sum = ExpShiftSumScalar,
                                  .pv_accumulate = PvAccumulateScalar,
                                  .bf16_to_f32 = Bf16ToF32Scalar};

}  // namespace

const KernelTable& ScalarKernelTable() { return kScalarTable; }

}  // namespace mlarun::detail
