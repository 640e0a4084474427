// 8-bit block quantisation (in the spirit of GGUF's Q8_0): weights and activations are split
// into blocks of 32 values along the reduction dimension, each block stored as int8 values in
// [-127, 127] with one scale (max|x| / 127): float16 for weights (34 bytes per 32 values, as
// Q8_0), float32 for activations. A block's dot product is computed exactly in int32 and scaled
// once: dot(w, x) ~= sum_b (ws_b * xs_b) * sum_i wq_i xq_i.
#pragma once

#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace mlarun {

constexpr int kQ8Block = 32;

// Activations of a batch quantised per token and block.
struct Q8Activations {
  int64_t n_tokens = 0;
  int64_t cols = 0;
  int64_t padded_cols = 0;     // cols rounded up to a multiple of 64 (vector width), zero-padded
  std::vector<int8_t> values;  // [n_tokens, padded_cols]
  std::vector<float> scales;   // [n_tokens, padded_cols / kQ8Block]
  // [n_tokens, padded_cols / kQ8Block]: -128 x the sum of a block's values, where the VNNI
  // products' integer sums start (see kQ8GroupRows).
  std::vector<int32_t> offsets;

  const int8_t* Row(int64_t t) const { return values.data() + t * padded_cols; }
  const float* Scales(int64_t t) const { return scales.data() + t * (padded_cols / kQ8Block); }
  // Filled only when QuantizeActivationsQ8 is given a split function (KernelTable::split_q8_row,
  // SplitQ8Row: tables whose int8 products have no u8 x s8 dot instruction, AVX2).
  std::vector<uint8_t> magnitudes;     // [n_tokens, padded_cols]: |value|
  std::vector<uint8_t> sign_masks;     // [n_tokens, padded_cols]: 0x80 if value >= 0, else 0x7f
  std::vector<int32_t> negative_sums;  // [n_tokens, padded_cols / kQ8Block]: sum of -value < 0

  const int32_t* Offsets(int64_t t) const { return offsets.data() + t * (padded_cols / kQ8Block); }
  bool HasSplit() const { return negative_sums.size() == offsets.size(); }
  // Throws an Error naming `kernel` unless HasSplit() (baseline code, so the ISA-specific kernels
  // build no std::string of their own: tests/kernels/isa_symbols_test.sh).
  void RequireSplit(const char* kernel) const;
  const uint8_t* Magnitudes(int64_t t) const { return magnitudes.data() + t * padded_cols; }
  const uint8_t* SignMasks(int64_t t) const { return sign_masks.data() + t * padded_cols; }
  const int32_t* NegativeSums(int64_t t) const {
    return negative_sums.data() + t * (padded_cols / kQ8Block);
  }
};

// Quantises one activation row of `cols` values: q [padded cols, zero-padded to a multiple of
// 64], scales and offsets (-128 x the sum of each block's int8 values) [padded cols / kQ8Block].
// The reference for KernelTable::quantize_row_q8 (SIMD versions give bitwise the same).
void QuantizeActivationRowQ8(const float* x, int64_t cols, int8_t* q, float* scales,
                             int32_t* offsets);
// Quantises x [n] with one scale (max |x| / 127) into q [n]; returns the sum of q. The reference
// for KernelTable::quantize_group_i8.
int32_t QuantizeGroupI8(const float* x, int64_t n, int8_t* q, float* scale);
using QuantizeRowFn = void (*)(const float* x, int64_t cols, int8_t* q, float* scales,
                               int32_t* offsets);

// The sign split of a quantised activation row q [padded_cols] (the reference for
// KernelTable::split_q8_row): magnitudes |q|, sign masks (0x80 where q >= 0, 0x7f where q < 0)
// and per block of 32 the sum of |q| over its negative values. With a weight stored as
// u = w + 128 (packed Q8), u ^ 0x80 = w and u ^ 0x7f = -w - 1, so
//   |q| * (u ^ mask) = q w            for q >= 0,
//                    = q w - |q|      for q < 0,
// and a block's sum of |q| (u ^ mask) plus its negative sum is its dot product sum q w: one
// unsigned x signed byte product per value (vpmaddubsw) after one xor, whose pairs stay within
// 2 * 127 * 128 < 2^15 (no saturation), instead of taking |w| and moving w's sign onto q.
void SplitQ8Row(const int8_t* q, int64_t padded_cols, uint8_t* magnitudes, uint8_t* sign_masks,
                int32_t* negative_sums);
using SplitQ8RowFn = void (*)(const int8_t* q, int64_t padded_cols, uint8_t* magnitudes,
                              uint8_t* sign_masks, int32_t* negative_sums);

// Quantises x [n_tokens, cols] into `out` (buffers reused) with `row_fn`, and splits each row
// with `split_fn` if set (else the split fields are left empty); tokens in parallel on `pool` if
// set.
void QuantizeActivationsQ8(const float* x, int64_t n_tokens, int64_t cols, Q8Activations* out,
                           ThreadPool* pool = nullptr,
                           QuantizeRowFn row_fn = QuantizeActivationRowQ8,
                           SplitQ8RowFn split_fn = nullptr);
// Quantises one weight row with float16 scales (values quantised with the rounded scale).
void QuantizeWeightRowQ8(const float* w, int64_t cols, int8_t* q, uint16_t* scales);

// Returns cols rounded up to the padded row length of Q8 storage.
inline int64_t Q8PaddedCols(int64_t cols) { return (cols + 63) / 64 * 64; }

// Packed Q8 (Q8Layout::kPacked16), the layout the matmul kernels read: rows in groups of
// kQ8GroupRows (the last group padded with zero rows), for each group and block of 32 columns
// 8 "quads" of 4 columns, each quad holding 4 bytes of each of the 16 rows:
//   values [groups, blocks, 8 quads, 16 rows, 4] as uint8 w + 128,
//   scales [groups, blocks, 16 rows] float16.
// One 64-byte quad is one AVX-512 vector whose lane i belongs to row i, so a VNNI dot product
// (u8 x s8, 4 products per lane) against a broadcast quad of activations accumulates 16 rows at
// once, with no horizontal reduction; the weights stream sequentially, 16 rows at a time. The
// offset of 128 makes the weights the unsigned operand; sum((w + 128) x) - 128 sum(x) is the
// exact dot product (the activations' -128 sum(x) per block is precomputed: Q8Activations::offsets,
// where a block's integer sums start). Row-interleaved int8 weights
// for VNNI follow the idea of ik_llama.cpp's repacked "_R8" types; this layout is our own.
constexpr int kQ8GroupRows = 16;
constexpr int kQ8QuadsPerBlock = kQ8Block / 4;

inline int64_t Q8Groups(int64_t rows) { return (rows + kQ8GroupRows - 1) / kQ8GroupRows; }
// Offsets of group g's first value byte and first scale in packed storage with n_blocks blocks
// of 32 columns per row; within a group, block b starts b * 512 bytes and b * 16 scales later.
inline int64_t PackedQ8GroupValues(int64_t g, int64_t n_blocks) {
  return g * n_blocks * kQ8GroupRows * kQ8Block;
}
inline int64_t PackedQ8GroupScales(int64_t g, int64_t n_blocks) {
  return g * n_blocks * kQ8GroupRows;
}
// Bytes of the values and number of scales of a packed rows x cols matrix.
inline int64_t PackedQ8ValueBytes(int64_t rows, int64_t cols) {
  return Q8Groups(rows) * kQ8GroupRows * Q8PaddedCols(cols);
}
inline int64_t PackedQ8ScaleCount(int64_t rows, int64_t cols) {
  return Q8Groups(rows) * kQ8GroupRows * (Q8PaddedCols(cols) / kQ8Block);
}
// Fills packed storage with zero weights (value 128, scale 0), so padding rows contribute 0.
void InitPackedQ8(int64_t rows, int64_t cols, uint8_t* values, uint16_t* scales);
// Writes row `r` (q [Q8PaddedCols(cols)], s [blocks]) into packed storage.
void PackQ8Row(int64_t r, int64_t cols, const int8_t* q, const uint16_t* s, uint8_t* values,
               uint16_t* scales);
// Reads row `r` back from packed storage into q and s.
void UnpackQ8Row(int64_t r, int64_t cols, const uint8_t* values, const uint16_t* scales, int8_t* q,
                 uint16_t* s);

}  // namespace mlarun
