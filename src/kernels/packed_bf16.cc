// Packing and unpacking of bf16 weights in groups of 16 rows of column pairs (packed_bf16.h).
#include "kernels/packed_bf16.h"

#include "core/dtype.h"

namespace mlarun {

void PackBf16Rows(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                  uint32_t* dst) {
  const int64_t pairs = cols / 2;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint16_t* row = src + r * cols;
    uint32_t* group = dst + PackedBf16GroupWords(r / kBf16GroupRows, cols);
    const int64_t lane = r % kBf16GroupRows;
    for (int64_t kk = 0; kk < pairs; ++kk) {
      group[kk * kBf16GroupRows + lane] = BF16Pair(row[2 * kk], row[2 * kk + 1]);
    }
  }
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

}  // namespace mlarun
