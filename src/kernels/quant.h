// 8-bit block quantisation (in the spirit of GGUF's Q8_0): weights and activations are split
// into blocks of 32 values along the reduction dimension, each block stored as int8 values in
// [-127, 127] with one scale (max|x| / 127): float16 for weights (34 bytes per 32 values, as
// Q8_0), float32 for activations. A block's dot product is computed exactly in int32 and scaled
// once: dot(w, x) ~= sum_b (ws_b * xs_b) * sum_i wq_i xq_i.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace mlarun {

constexpr int kQ8Block = 32;

// Activations of a batch quantised per token and block.
struct Q8Activations {
  int64_t n_tokens = 0;
  int64_t cols = 0;
  int64_t padded_cols = 0;     // cols rounded up to a multiple of 64 (vector width), zero-padded
  std::vector<int8_t> values;  // [n_tokens, padded_cols]
  std::vector<float> scales;   // [n_tokens, padded_cols / kQ8Block]

  const int8_t* Row(int64_t t) const { return values.data() + t * padded_cols; }
  const float* Scales(int64_t t) const { return scales.data() + t * (padded_cols / kQ8Block); }
};

// Quantises x [n_tokens, cols] into `out` (buffers reused).
void QuantizeActivationsQ8(const float* x, int64_t n_tokens, int64_t cols, Q8Activations* out);

// Quantises one activation row of `cols` values: q [padded cols, zero-padded to a multiple of
// 64], scales [padded cols / kQ8Block].
void QuantizeRowQ8(const float* x, int64_t cols, int8_t* q, float* scales);
// Quantises one weight row with float16 scales (values quantised with the rounded scale).
void QuantizeWeightRowQ8(const float* w, int64_t cols, int8_t* q, uint16_t* scales);

// Returns cols rounded up to the padded row length of Q8 storage.
inline int64_t Q8PaddedCols(int64_t cols) { return (cols + 63) / 64 * 64; }

}  // namespace mlarun
