// The tensor types of GGUF / ggml files as one table: per type its GGUF id, name, values and
// bytes per block, and, for the types mlarun multiplies as stored, the scalar reference
// functions (dequantise, quantise, dot product with Q8 activations). The SIMD versions of the
// dot products are in KernelTable::matmul_rows_blocks.
//
// Block layouts (the published ggml formats, ggml-common.h of the ggml / llama.cpp repository;
// f16 = IEEE binary16, little-endian; values listed in the order they multiply the row's columns):
//   Q4_0 (18 B / 32):  f16 d; u8 qs[16].  q_i = qs[i] & 15, q_{i+16} = qs[i] >> 4 (i < 16);
//                      w = d (q - 8)
//   Q4_1 (20 B / 32):  f16 d, m; u8 qs[16] as Q4_0.  w = d q + m
//   Q5_0 (22 B / 32):  f16 d; u8 qh[4]; u8 qs[16].  h = qh as uint32 little-endian;
//                      q_i = (qs[i] & 15) | ((h >> i) & 1) << 4,
//                      q_{i+16} = (qs[i] >> 4) | ((h >> (i + 16)) & 1) << 4;  w = d (q - 16)
//   Q5_1 (24 B / 32):  f16 d, m; u8 qh[4]; u8 qs[16] as Q5_0.  w = d q + m
//   Q8_0 (34 B / 32):  f16 d; i8 qs[32].  w = d q
//   Q4_K (144 B / 256): f16 d, dmin; u8 scales[12]; u8 qs[128].  Eight sub-blocks j of 32 values
//                      with 6-bit scale sc_j and min m_j: for j < 4, sc_j = scales[j] & 63,
//                      m_j = scales[j + 4] & 63; for j >= 4, sc_j = (scales[j + 4] & 15) |
//                      (scales[j - 4] >> 6) << 4, m_j = (scales[j + 4] >> 4) | (scales[j] >> 6)
//                      << 4. Chunk c < 4 of 64 values uses qs[32 c + l], l < 32: its low nibble is
//                      value 64 c + l (sub-block 2c), its high nibble value 64 c + 32 + l
//                      (sub-block 2c + 1).  w = d sc_j q - dmin m_j
//   Q5_K (176 B / 256): f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128].  As Q4_K, plus bit 4
//                      of value 64 c + l from (qh[l] >> 2c) & 1 and of value 64 c + 32 + l from
//                      (qh[l] >> (2c + 1)) & 1.  w = d sc_j q - dmin m_j
//   Q6_K (210 B / 256): u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d.  Two halves n < 2 of 128
//                      values with ql' = ql + 64 n, qh' = qh + 32 n, sc' = scales + 8 n; for
//                      l < 32 and s = l / 16 (value, its 4 low bits | 2 high bits, its scale):
//                        128 n + l:      ql'[l] & 15      | (qh'[l] >> 0) & 3, sc'[s]
//                        128 n + l + 32: ql'[l + 32] & 15 | (qh'[l] >> 2) & 3, sc'[s + 2]
//                        128 n + l + 64: ql'[l] >> 4      | (qh'[l] >> 4) & 3, sc'[s + 4]
//                        128 n + l + 96: ql'[l + 32] >> 4 | (qh'[l] >> 6) & 3, sc'[s + 6]
//                      w = d scale (q - 32): sixteen sub-blocks of 16 values with int8 scales.
//
// Dot products with Q8 activations (quant.h, Q8Activations: blocks of 32 values a_i with a
// float32 scale xs and the block's sum A = sum_i a_i = -offset / 128). Every weight block of 32
// values (a K-quant block is 8 of them) is, exactly, w_i = s (q_i + o) or w_i = s q_i + m with
// small non-negative integers q_i:
//   symbols: s = the block's float scale (d, or d sc_j), m = its float offset (m, or -dmin m_j),
//            o = the integer offset (-8 for Q4_0, -16 for Q5_0, -32 for Q6_K, 0 else).
//   dot(row, x) = sum over blocks b of xs_b * (s_b * I_b + m_b * A_b), I_b = sum_i q_i a_i
//   (Q4_0, Q5_0: I_b = sum_i (q_i + o) a_i; Q8_0: I_b = sum_i q_i a_i with signed q;
//    Q6_K: I_b = sc_lo sum_{i<16} (q_i - 32) a_i + sc_hi sum_{i>=16} (q_i - 32) a_i and s_b = d).
// I_b and A_b are exact int32; the float arithmetic per block and the sum over blocks in row
// order are the scalar reference's (dot_q8); SIMD versions sum in other orders (float32
// rounding only). llama.cpp multiplies the same blocks against its own 8-bit activations
// (Q8_0 with f16 scales for the 32-value types, Q8_K with 256-value blocks for the K-quants),
// so the two engines differ by their activations' rounding.
#pragma once

#include <cstdint>
#include <string_view>

namespace mlarun {

struct WeightMatrix;
struct Q8Activations;

// GGUF tensor type ids (ggml_type) that mlarun reads or writes by name.
enum GgmlTypeId : uint32_t {
  kGgmlF32 = 0,
  kGgmlF16 = 1,
  kGgmlQ4_0 = 2,
  kGgmlQ4_1 = 3,
  kGgmlQ5_0 = 6,
  kGgmlQ5_1 = 7,
  kGgmlQ8_0 = 8,
  kGgmlQ4_K = 12,
  kGgmlQ5_K = 13,
  kGgmlQ6_K = 14,
  kGgmlBF16 = 30,
};

struct BlockFormat {
  uint32_t ggml_type = 0;
  std::string_view name;  // as ggml names it: "Q4_K", "F16", "IQ2_XXS", ...
  int block_values = 0;   // values per block (1 for F32, F16, BF16; 32 or 256 for the others)
  int block_bytes = 0;    // bytes per block
  // Null for the types mlarun cannot multiply (they are listed so that a file holding them can
  // still be parsed and its unsupported tensors named). For F32, F16 and BF16 only dequantize and
  // quantize are set (they load as DType::kF32 / kF16 / kBF16 matrices).
  // out[n] = the n values of the blocks at `blocks` (n a multiple of block_values).
  void (*dequantize)(const void* blocks, int64_t n, float* out) = nullptr;
  // Quantises x[n] (finite; n a multiple of block_values) into blocks: the reference quantiser
  // of `mlarun quantize`.
  void (*quantize)(const float* x, int64_t n, void* blocks) = nullptr;
  // Scalar reference: the dot product of one row of blocks (cols values) with one token's Q8
  // activations q [cols], scales [cols / 32], offsets [cols / 32] (-128 x each block's sum).
  float (*dot_q8)(const void* row, int64_t cols, const int8_t* q, const float* scales,
                  const int32_t* offsets) = nullptr;

  bool multipliable() const { return dot_q8 != nullptr; }
  // Bytes of `values` values (a multiple of block_values).
  int64_t Bytes(int64_t values) const { return values / block_values * block_bytes; }
};

// The format of ggml type `ggml_type`, or nullptr for an id ggml does not define.
const BlockFormat* FindBlockFormat(uint32_t ggml_type);
// The format named `name` (case-insensitive: "q4_k", "Q8_0"), or nullptr.
const BlockFormat* FindBlockFormatByName(std::string_view name);
// FindBlockFormat for an id known to exist (the GgmlTypeId constants).
const BlockFormat& GetBlockFormat(uint32_t ggml_type);

// Scalar reference of KernelTable::matmul_rows_blocks: y[t * ldy + (r - row_begin)] =
// w.blocks->dot_q8(row r, token t) for r in [row_begin, row_end), t < x.n_tokens.
void MatMulRowsBlocksScalar(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                            const Q8Activations& x, float* y, int64_t ldy);

}  // namespace mlarun
