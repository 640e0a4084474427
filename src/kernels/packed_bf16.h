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
// (they are never written here). Returns the largest magnitude (value & 0x7fff) it read: 0x7f80
// or more when a value is inf or NaN (the load-time finiteness check, at no extra pass).
uint16_t PackBf16Rows(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                      uint32_t* dst);
// PackBf16Rows for column pairs [kk_begin, cols / 2) only (the rest of rows whose first pairs a
// vector kernel packed, KernelTable::pack_bf16_rows); the largest magnitude among them.
uint16_t PackBf16PairsFrom(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                           int64_t kk_begin, uint32_t* dst);
// Writes row `r` of a packed matrix with `cols` columns to `out` [cols].
void UnpackBf16Row(const uint32_t* packed, int64_t cols, int64_t r, uint16_t* out);

// Float32 rows rounded to bf16 and transposed into pair words:
//   out[c * ld_out + r] = BF16Pair(F32ToBF16(x[r * ldx + 2c]), F32ToBF16(x[r * ldx + 2c + 1]))
// for r < n_rows, c < n_pairs (the keys of the prefill's bf16 attention tiles, as
// KernelTable::gemm_bf16_pairs reads its b operand).
void Bf16PairColumns(const float* x, int64_t ldx, int64_t n_rows, int64_t n_pairs, uint32_t* out,
                     int64_t ld_out);
// Two float32 rows rounded to bf16 and interleaved into pair words (the values of the prefill's
// bf16 attention tiles): out[c] = BF16Pair(F32ToBF16(a[c]), F32ToBF16(b[c])) for c < n, with
// 0 as every high half where b is null.
void Bf16PairRows(const float* a, const float* b, int64_t n, uint32_t* out);
// Bf16PairColumns for the words a vector kernel that covered rows [0, row_begin) x pairs
// [0, pair_begin) left (KernelTable::bf16_pair_columns): rows [row_begin, n_rows) for every pair,
// and pairs [pair_begin, n_pairs) of rows [0, row_begin).
void Bf16PairColumnsFrom(const float* x, int64_t ldx, int64_t n_rows, int64_t n_pairs,
                         int64_t row_begin, int64_t pair_begin, uint32_t* out, int64_t ld_out);

// float16 weights packed in the same geometry (16-row groups, 64 bytes per group and column pair,
// PackedBf16Bytes), but each pair stored as its two columns one after the other: half
// (kk, j, i) of group g, at PackedBf16GroupWords(g, cols) * 2 + (2 kk + j) * 16 + i, is
// W[16 g + i, 2 kk + j]. Eight or sixteen consecutive halves are then one column of 8 or 16 rows,
// which F16C widens to float32 with one instruction (vcvtph2ps), as the outer-product kernels
// need them.
inline int64_t PackedF16Index(int64_t cols, int64_t r, int64_t c) {
  return PackedBf16GroupWords(r / kBf16GroupRows, cols) * 2 + c * kBf16GroupRows +
         r % kBf16GroupRows;
}
inline uint16_t PackedF16At(const uint16_t* packed, int64_t cols, int64_t r, int64_t c) {
  return packed[PackedF16Index(cols, r, c)];
}
// Packs rows [row_begin, row_end) of the row-major f16 matrix `src` [rows, cols] (cols even) into
// `dst` (PackedBf16Bytes(rows, cols)); padding rows as for PackBf16Rows. Returns the largest
// magnitude read, as PackBf16Rows (0x7c00 or more: inf or NaN).
uint16_t PackF16Rows(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                     uint16_t* dst);
// PackF16Rows for columns [c_begin, cols) only (the rest of rows whose first columns a vector
// kernel packed, KernelTable::pack_f16_rows); the largest magnitude among them.
uint16_t PackF16ColsFrom(const uint16_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                         int64_t c_begin, uint16_t* dst);

// FP8 E4M3 weights (block-scaled, as in the checkpoint) packed in the same geometry with one byte
// per value: byte (kk, i, j) of group g, at PackedF8GroupBytes(g, cols) + 32 kk + 2 i + j, is
// W[16 g + i, 2 kk + j]. A group's 32 bytes at pair kk, each widened to a 16-bit word, are then
// the 16 pair words of the bf16 layout (lane i = row i, low half column 2 kk), which the
// AVX512-BF16 kernel (KernelTable::matmul_rows_f8_packed) multiplies by vdpbf16ps. Block scales
// stay [row blocks, column blocks]; only matrices with an even number of columns, block_rows a
// multiple of 16 (a group inside one row block) and even block_cols (a pair inside one column
// block) are packed (Pack16BitWeights).
inline int64_t PackedF8GroupBytes(int64_t g, int64_t cols) { return g * kBf16GroupRows * cols; }
inline size_t PackedF8Bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(PackedF8GroupBytes(PackedBf16Groups(rows), cols));
}
inline int64_t PackedF8Index(int64_t cols, int64_t r, int64_t c) {
  return PackedF8GroupBytes(r / kBf16GroupRows, cols) + (c / 2) * 2 * kBf16GroupRows +
         (r % kBf16GroupRows) * 2 + c % 2;
}
// Packs rows [row_begin, row_end) of the row-major FP8 matrix `src` [rows, cols] (cols even) into
// `dst` (PackedF8Bytes(rows, cols)); padding rows as for PackBf16Rows (0 bytes are +0). Returns
// whether a byte it read is NaN (0x7f or 0xff; E4M3 has no inf), the load-time finiteness check.
bool PackF8Rows(const uint8_t* src, int64_t cols, int64_t row_begin, int64_t row_end, uint8_t* dst);
// PackF8Rows for column pairs [kk_begin, cols / 2) only (the rest of rows whose first pairs a
// vector kernel packed, KernelTable::pack_f8_rows); whether a byte among them is NaN.
bool PackF8PairsFrom(const uint8_t* src, int64_t cols, int64_t row_begin, int64_t row_end,
                     int64_t kk_begin, uint8_t* dst);

// bf16 activations x [n_tokens, cols] as the AMX kernels read them ("activation tiles"): tokens
// in blocks of 16 (the last block holds the n_tokens % 16 left, if any), each block stored as
// [steps][block tokens][32] with steps = ceil(cols / 32), the last step's missing columns zero.
// A tile of 16 tokens by 32 columns is then one contiguous 1 KB run (rows 64 bytes apart; rows
// cols * 2 bytes apart would share L1 sets at cols = 2,048, and measured ~40% slower).
constexpr int64_t kBf16TileCols = 32;

inline int64_t Bf16TileSteps(int64_t cols) { return (cols + kBf16TileCols - 1) / kBf16TileCols; }
// Returns the elements of n_tokens tokens' activation tiles.
inline int64_t Bf16ActivationTileElements(int64_t n_tokens, int64_t cols) {
  return n_tokens * Bf16TileSteps(cols) * kBf16TileCols;
}
// Returns the first element of the block holding token t (t % 16 == 0).
inline int64_t Bf16TileBlockStart(int64_t t, int64_t cols) {
  return t * Bf16TileSteps(cols) * kBf16TileCols;
}
// Returns the index of x[t, c] in the activation tiles of n_tokens tokens.
inline int64_t Bf16TileIndex(int64_t t, int64_t c, int64_t n_tokens, int64_t cols) {
  const int64_t block = t - t % kBf16GroupRows;
  const int64_t block_tokens =
      n_tokens - block < kBf16GroupRows ? n_tokens - block : kBf16GroupRows;
  return Bf16TileBlockStart(block, cols) + (c / kBf16TileCols) * block_tokens * kBf16TileCols +
         (t - block) * kBf16TileCols + c % kBf16TileCols;
}
// Writes the blocks of tokens [t_begin, t_end) (t_begin a multiple of 16) of the activation
// tiles of x [n_tokens, cols] to `tiles` (Bf16ActivationTileElements(n_tokens, cols)).
void TileBf16Activations(const uint16_t* x, int64_t n_tokens, int64_t cols, int64_t t_begin,
                         int64_t t_end, uint16_t* tiles);

}  // namespace mlarun
