// Block quantisation helpers (scalar; each block is independent, so results do not depend on
// how a batch is split).
#include "kernels/quant.h"

#include <algorithm>
#include <cmath>

#include "core/dtype.h"

namespace mlarun {

namespace {

// Quantises each block of 32 with scale = round(max|x| / 127): `store_scale(block, scale)` keeps
// the scale in its storage type and returns the value the int8 values are computed with.
template <typename StoreScale>
void QuantizeBlocks(const float* x, int64_t cols, int8_t* q, StoreScale store_scale) {
  const int64_t padded = Q8PaddedCols(cols);
  for (int64_t b = 0; b < padded / kQ8Block; ++b) {
    const int64_t begin = b * kQ8Block;
    const int64_t end = std::min(cols, begin + kQ8Block);
    float max_abs = 0.0f;
    for (int64_t i = begin; i < end; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
    const float scale = store_scale(b, max_abs / 127.0f);
    const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    for (int64_t i = begin; i < begin + kQ8Block; ++i) {
      q[i] = i < end ? static_cast<int8_t>(std::lrint(std::clamp(x[i] * inv, -127.0f, 127.0f))) : 0;
    }
  }
}

}  // namespace

void QuantizeRowQ8(const float* x, int64_t cols, int8_t* q, float* scales) {
  QuantizeBlocks(x, cols, q, [&](int64_t b, float scale) { return scales[b] = scale; });
}

void QuantizeWeightRowQ8(const float* w, int64_t cols, int8_t* q, uint16_t* scales) {
  QuantizeBlocks(w, cols, q, [&](int64_t b, float scale) {
    scales[b] = F32ToF16(scale);
    return F16ToF32(scales[b]);
  });
}

void QuantizeActivationsQ8(const float* x, int64_t n_tokens, int64_t cols, Q8Activations* out) {
  out->n_tokens = n_tokens;
  out->cols = cols;
  out->padded_cols = Q8PaddedCols(cols);
  out->values.resize(static_cast<size_t>(n_tokens * out->padded_cols));
  out->scales.resize(static_cast<size_t>(n_tokens * (out->padded_cols / kQ8Block)));
  for (int64_t t = 0; t < n_tokens; ++t) {
    QuantizeRowQ8(x + t * cols, cols, out->values.data() + t * out->padded_cols,
                  out->scales.data() + t * (out->padded_cols / kQ8Block));
  }
}

}  // namespace mlarun
