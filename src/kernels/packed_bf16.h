// bf16 weights packed for outer-product kernels ("packed16 pairs", the bf16 analogue of packed Q8
// in quant.h): rows in groups of 16 (the last group zero-padded), each group stored as
// [cols / 2][16] 32-bit words, word (kk, i) of group g holding W[16g + i, 2kk] in its low half and
// W[16g + i, 2kk + 1] in its high half. One 64-byte load is then a pair of columns for 16 rows,
// which `vdpbf16ps` multiplies by a broadcast pair of activations: every output is one chain of
// pair products in column order, whatever the batch or the row range, and a group's weights are
// one contiguous stream. Only matrices with an even number of columns are packed.
//
// Symbols: rows, cols of W [rows, cols]; g = row / 16 (group), i = row % 16 (lane), kk = col / 2.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mlarun {

constexpr int64_t kBf16GroupRows = 16;

inline int64_t PackedBf16Groups(int64_t rows) {
  return (rows + kBf16GroupRows - 1) / kBf16GroupRows;
}
// Returns the bytes of a packed [rows, cols] matrix (cols even).
inline size_t PackedBf16Bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(PackedBf16Groups(rows) * kBf16GroupRows * cols) * sizeof(uint16_t);
}
// Returns the first word of group `g` of a packed matrix with `cols` columns.
inline int64_t PackedBf16GroupWords(int64_t g, int64_t cols) {
  return g * kBf16GroupRows * (cols / 2);
}

// Packs rows [row_begin, row_end) of the row-major bf16 matrix `src` [rows, cols] into `dst`
// (PackedBf16Bytes(rows, cols)); rows past `rows` of the last group must be zeroed by the caller
// (they are never written here).
void PackBf16Rows(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                  uint32_t* dst);
// Writes row `r` of a packed matrix with `cols` columns to `out` [cols].
void UnpackBf16Row(const uint32_t* packed, int64_t cols, int64_t r, uint16_t* out);

}  // namespace mlarun
