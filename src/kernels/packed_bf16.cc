// Packing and unpacking of bf16 and f16 weights in groups of 16 rows of column pairs
// (packed_bf16.h).
#include "kernels/packed_bf16.h"

#include <algorithm>

#include "core/dtype.h"

namespace mlarun {

uint16_t PackBf16Rows(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                      uint32_t* dst) {
  return PackBf16PairsFrom(src, cols, row_begin, row_end, 0, dst);
}

uint16_t PackBf16PairsFrom(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                           int64_t kk_begin, uint32_t* dst) {
  const int64_t pairs = cols / 2;
  uint16_t largest = 0;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint16_t* row = src + r * cols;
    uint32_t* group = dst + PackedBf16GroupWords(r / kBf16GroupRows, cols);
    const int64_t lane = r % kBf16GroupRows;
    for (int64_t kk = kk_begin; kk < pairs; ++kk) {
      const uint16_t lo = row[2 * kk];
      const uint16_t hi = row[2 * kk + 1];
      largest = std::max(
          {largest, static_cast<uint16_t>(lo & 0x7fff), static_cast<uint16_t>(hi & 0x7fff)});
      group[kk * kBf16GroupRows + lane] = BF16Pair(lo, hi);
    }
  }
  return largest;
}

uint16_t PackF16Rows(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                     uint16_t* dst) {
  return PackF16ColsFrom(src, cols, row_begin, row_end, 0, dst);
}

uint16_t PackF16ColsFrom(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                         int64_t c_begin, uint16_t* dst) {
  uint16_t largest = 0;
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t c = c_begin; c < cols; ++c) {
      const uint16_t h = src[r * cols + c];
      largest = std::max(largest, static_cast<uint16_t>(h & 0x7fff));
      dst[PackedF16Index(cols, r, c)] = h;
    }
  }
  return largest;
}

void UnpackBf16Row(const uint32_t* packed, int64_t cols, int64_t r, uint16_t* out) {
  const uint32_t* group = packed + PackedBf16GroupWords(r / kBf16GroupRows, cols);
  const int64_t lane = r % kBf16GroupRows;
  for (int64_t kk = 0; kk < cols / 2; ++kk) {
    const uint32_t word = group[kk * kBf16GroupRows + lane];
    out[2 * kk] = static_cast<uint16_t>(word & 0xffffu);
    out[2 * kk + 1] = static_cast<uint16_t>(word >> 16);
  }
}

void TileBf16Activations(const uint16_t* x, int64_t n_tokens, int64_t cols, int64_t t_begin,
                         int64_t t_end, uint16_t* tiles) {
  const int64_t steps = Bf16TileSteps(cols);
  for (int64_t b = t_begin; b < t_end; b += kBf16GroupRows) {
    const int64_t block_tokens = std::min(kBf16GroupRows, n_tokens - b);
    uint16_t* block = tiles + Bf16TileBlockStart(b, cols);
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t c0 = s * kBf16TileCols;
      const int64_t n = std::min(kBf16TileCols, cols - c0);
      for (int64_t t = 0; t < block_tokens; ++t) {
        uint16_t* dst = block + (s * block_tokens + t) * kBf16TileCols;
        const uint16_t* src = x + (b + t) * cols + c0;
        std::copy(src, src + n, dst);
        std::fill(dst + n, dst + kBf16TileCols, uint16_t{0});
      }
    }
  }
}

}  // namespace mlarun
