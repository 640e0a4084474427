// Block quantisation helpers (scalar; each block is independent, so results do not depend on
// how a batch is split).
#include "kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace mlarun {

namespace {

// Rounds v in [-127, 127] to the nearest integer, ties to even (as std::lrint in the default
// rounding mode): adding 1.5 * 2^23 leaves no fraction bits in the float sum. Inline, unlike
// lrint's library call, which dominated quantising activations.
inline int8_t RoundToInt8(float v) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  return static_cast<int8_t>(static_cast<int>((v + kMagic) - kMagic));
}

// Quantises x [n] with one scale, max|x| / 127, into q [n_out] (0 past n): `store_scale(scale)`
// keeps the scale in its storage type and returns the value the int8 values are computed with.
template <typename StoreScale>
void QuantizeBlock(const float* x, int64_t n, int64_t n_out, int8_t* q, StoreScale store_scale) {
  float max_abs = 0.0f;
  for (int64_t i = 0; i < n; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
  const float scale = store_scale(max_abs / 127.0f);
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  for (int64_t i = 0; i < n_out; ++i) {
    q[i] = i < n ? RoundToInt8(std::clamp(x[i] * inv, -127.0f, 127.0f)) : 0;
  }
}

// Quantises each block of 32 with its own scale (QuantizeBlock); `store_scale(block, scale)`.
template <typename StoreScale>
void QuantizeBlocks(const float* x, int64_t cols, int8_t* q, StoreScale store_scale) {
  for (int64_t b = 0; b < Q8PaddedCols(cols) / kQ8Block; ++b) {
    const int64_t begin = b * kQ8Block;
    QuantizeBlock(x + begin, std::clamp<int64_t>(cols - begin, 0, kQ8Block), kQ8Block, q + begin,
                  [&](float scale) { return store_scale(b, scale); });
  }
}

}  // namespace

void QuantizeActivationRowQ8(const float* x, int64_t cols, int8_t* q, float* scales,
                             int32_t* offsets) {
  QuantizeBlocks(x, cols, q, [&](int64_t b, float scale) { return scales[b] = scale; });
  for (int64_t b = 0; b < Q8PaddedCols(cols) / kQ8Block; ++b) {
    int32_t sum = 0;
    for (int i = 0; i < kQ8Block; ++i) sum += q[b * kQ8Block + i];
    offsets[b] = -128 * sum;
  }
}

int32_t QuantizeGroupI8(const float* x, int64_t n, int8_t* q, float* scale) {
  QuantizeBlock(x, n, n, q, [&](float s) { return *scale = s; });
  int32_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += q[i];
  return sum;
}

void QuantizeWeightRowQ8(const float* w, int64_t cols, int8_t* q, uint16_t* scales) {
  QuantizeBlocks(w, cols, q, [&](int64_t b, float scale) {
    scales[b] = F32ToF16(scale);
    return F16ToF32(scales[b]);
  });
}

void SplitQ8Row(const int8_t* q, int64_t padded_cols, uint8_t* magnitudes, uint8_t* sign_masks,
                int32_t* negative_sums) {
  for (int64_t b = 0; b < padded_cols / kQ8Block; ++b) {
    int32_t negative_sum = 0;
    for (int64_t i = b * kQ8Block; i < (b + 1) * kQ8Block; ++i) {
      // q holds signed values: sign extension is meant.
      const int32_t v = q[i];  // NOLINT(bugprone-signed-char-misuse)
      magnitudes[i] = static_cast<uint8_t>(v < 0 ? -v : v);
      sign_masks[i] = v < 0 ? 0x7f : 0x80;
      if (v < 0) negative_sum -= v;
    }
    negative_sums[b] = negative_sum;
  }
}

void Q8Activations::RequireSplit(const char* kernel) const {
  if (!HasSplit()) {
    throw Error(std::string(kernel) +
                ": the activations lack the sign split this kernel table reads (quantise them "
                "with KernelTable::split_q8_row)");
  }
}

void QuantizeActivationsQ8(const float* x, int64_t n_tokens, int64_t cols, Q8Activations* out,
                           ThreadPool* pool, QuantizeRowFn row_fn, SplitQ8RowFn split_fn) {
  out->n_tokens = n_tokens;
  out->cols = cols;
  out->padded_cols = Q8PaddedCols(cols);
  out->values.resize(static_cast<size_t>(n_tokens * out->padded_cols));
  const int64_t n_blocks = out->padded_cols / kQ8Block;
  out->scales.resize(static_cast<size_t>(n_tokens * n_blocks));
  out->offsets.resize(static_cast<size_t>(n_tokens * n_blocks));
  const size_t split_values = split_fn != nullptr ? out->values.size() : 0;
  out->magnitudes.resize(split_values);
  out->sign_masks.resize(split_values);
  out->negative_sums.resize(split_fn != nullptr ? out->offsets.size() : 0);
  auto quantize_token = [&](int64_t t) {
    int8_t* q = out->values.data() + t * out->padded_cols;
    row_fn(x + t * cols, cols, q, out->scales.data() + t * n_blocks,
           out->offsets.data() + t * n_blocks);
    if (split_fn != nullptr) {
      split_fn(q, out->padded_cols, out->magnitudes.data() + t * out->padded_cols,
               out->sign_masks.data() + t * out->padded_cols,
               out->negative_sums.data() + t * n_blocks);
    }
  };
  // Prefill batches in parallel (8 tokens per item); decode batches are too small to hand off.
  constexpr int64_t kTokensPerItem = 8;
  if (pool != nullptr && n_tokens >= 2 * kTokensPerItem) {
    pool->ParallelFor((n_tokens + kTokensPerItem - 1) / kTokensPerItem, [&](int64_t item, int) {
      const int64_t end = std::min(n_tokens, (item + 1) * kTokensPerItem);
      for (int64_t t = item * kTokensPerItem; t < end; ++t) quantize_token(t);
    });
    return;
  }
  for (int64_t t = 0; t < n_tokens; ++t) quantize_token(t);
}

namespace {

// Offsets of row r's first value and scale of block 0 in packed storage.
struct PackedRowPos {
  int64_t value;  // + b * 16 * kQ8Block + quad * 64 + byte
  int64_t scale;  // + b * 16
};

PackedRowPos PackedPos(int64_t r, int64_t cols) {
  const int64_t n_blocks = Q8PaddedCols(cols) / kQ8Block;
  const int64_t g = r / kQ8GroupRows;
  const int64_t lane = r % kQ8GroupRows;
  return {.value = PackedQ8GroupValues(g, n_blocks) + lane * 4,
          .scale = PackedQ8GroupScales(g, n_blocks) + lane};
}

}  // namespace

void InitPackedQ8(int64_t rows, int64_t cols, uint8_t* values, uint16_t* scales) {
  std::fill(values, values + PackedQ8ValueBytes(rows, cols), uint8_t{128});
  std::fill(scales, scales + PackedQ8ScaleCount(rows, cols), uint16_t{0});
}

void PackQ8Row(int64_t r, int64_t cols, const int8_t* q, const uint16_t* s, uint8_t* values,
               uint16_t* scales) {
  const PackedRowPos pos = PackedPos(r, cols);
  const int64_t n_blocks = Q8PaddedCols(cols) / kQ8Block;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = values + pos.value + b * kQ8GroupRows * kQ8Block;
    // Each quad's 4 bytes as one word; q + 128 as a byte is q's bits with the top bit flipped.
    for (int64_t quad = 0; quad < kQ8QuadsPerBlock; ++quad) {
      uint32_t word = 0;
      std::memcpy(&word, q + b * kQ8Block + quad * 4, sizeof(word));
      word ^= 0x80808080u;
      std::memcpy(block + quad * kQ8GroupRows * 4, &word, sizeof(word));
    }
    scales[pos.scale + b * kQ8GroupRows] = s[b];
  }
}

void UnpackQ8Row(int64_t r, int64_t cols, const uint8_t* values, const uint16_t* scales, int8_t* q,
                 uint16_t* s) {
  const PackedRowPos pos = PackedPos(r, cols);
  const int64_t n_blocks = Q8PaddedCols(cols) / kQ8Block;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = values + pos.value + b * kQ8GroupRows * kQ8Block;
    for (int i = 0; i < kQ8Block; ++i) {
      q[b * kQ8Block + i] =
          static_cast<int8_t>(int{block[(i / 4) * kQ8GroupRows * 4 + i % 4]} - 128);
    }
    s[b] = scales[pos.scale + b * kQ8GroupRows];
  }
}

}  // namespace mlarun
