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

void Bf16PairRows(const float* a, const float* b, int64_t n, uint32_t* out) {
  for (int64_t c = 0; c < n; ++c)
    out[c] = BF16Pair(F32ToBF16(a[c]), b != nullptr ? F32ToBF16(b[c]) : uint16_t{0});
}

void Bf16PairColumns(const float* x, int64_t ldx, int64_t n_rows, int64_t n_pairs, uint32_t* out,
                     int64_t ld_out) {
  Bf16PairColumnsFrom(x, ldx, n_rows, n_pairs, 0, 0, out, ld_out);
}

void Bf16PairColumnsFrom(const float* x, int64_t ldx, int64_t n_rows, int64_t n_pairs,
                         int64_t row_begin, int64_t pair_begin, uint32_t* out, int64_t ld_out) {
  // Rows [row_begin, n_rows) for every pair, then pairs [pair_begin, n_pairs) of the rows before.
  auto one = [&](int64_t r, int64_t c) {
    const float* row = x + r * ldx;
    out[c * ld_out + r] = BF16Pair(F32ToBF16(row[2 * c]), F32ToBF16(row[2 * c + 1]));
  };
  for (int64_t r = row_begin; r < n_rows; ++r) {
    for (int64_t c = 0; c < n_pairs; ++c) one(r, c);
  }
  for (int64_t r = 0; r < row_begin; ++r) {
    for (int64_t c = pair_begin; c < n_pairs; ++c) one(r, c);
  }
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

bool PackF8Rows(const uint8_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                uint8_t* dst) {
  return PackF8PairsFrom(src, cols, row_begin, row_end, 0, dst);
}

bool PackF8PairsFrom(const uint8_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                     int64_t kk_begin, uint8_t* dst) {
  uint8_t nan = 0;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = src + r * cols;
    uint8_t* out = dst + PackedF8Index(cols, r, 0);
    for (int64_t kk = kk_begin; kk < cols / 2; ++kk) {
      const uint8_t even = row[2 * kk];
      const uint8_t odd = row[2 * kk + 1];
      out[kk * 2 * kBf16GroupRows] = even;
      out[kk * 2 * kBf16GroupRows + 1] = odd;
      // 0x7f after clearing the sign: the NaN bytes (the bits of 0x7f are set only there)
      nan |=
          static_cast<uint8_t>((even & 0x7f) == 0x7f) | static_cast<uint8_t>((odd & 0x7f) == 0x7f);
    }
  }
  return nan != 0;
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
