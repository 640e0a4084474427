// The GGUF / ggml tensor type table and the scalar references of the types mlarun multiplies as
// stored: dequantisation and the dot product of a row of blocks with Q8 activations. The block
// layouts are the published ggml formats (ggml-common.h of the ggml / llama.cpp repository),
// restated in block_formats.h; the quantisers are in block_quantize.cc.
//
// Symbols (as in block_formats.h):
//   d, dmin     a block's float16 scale and (K-quants) the scale of its sub-block mins
//   q_i         a stored unsigned integer (4, 5, 6 bits) or, Q8_0, signed 8-bit integer
//   o           the type's integer offset: -8 (Q4_0), -16 (Q5_0), -32 (Q6_K), 0 otherwise
//   k_i         q_i + o, the signed integer the block scale multiplies (fits int8 for every type)
//   sc_j, m_j   K-quant sub-block j's 6-bit scale and min (Q6_K: 16 int8 scales sc_j)
//   s_b, m_b    a 32-value block's float scale and offset: w_i = s_b k_i + m_b
//   a_i, xs_b   Q8 activations of 32-value block b and their float scale
//   A_b         sum_i a_i = -offsets[b] / 128 (exact)
//   I_b         sum_i k_i a_i (exact int32; Q6_K weights each 16-value half by its scale)
//
// Every 32-value block is, exactly, w_i = s_b k_i + m_b, so its dot product with the
// activations xs_b a_i is xs_b (s_b I_b + m_b A_b): one int32 dot product and a few float
// operations per block (the exact float order is written down above Dot32 below).
#include "kernels/block_formats.h"

#include <cstring>
#include <string_view>

#include "core/check.h"
#include "core/dtype.h"
#include "kernels/block_quantize.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace mlarun {
namespace block_internal {
namespace {

// ---------------------------------------------------------------------------------------------
// Decoding: a block's integers k_i and its float scale / offset, shared by dequantize and dot_q8.

// One 32-value block: w_i = s k_i + m.
struct Block32 {
  int8_t k[kQK];
  float s;
  float m;
};

// The 4-bit values of a 32-value block: byte i holds value i (low nibble) and i + 16 (high).
inline void Unpack4(const uint8_t* qs, int offset, int8_t* k) {
  for (int i = 0; i < kQK / 2; ++i) {
    k[i] = static_cast<int8_t>((qs[i] & 15) + offset);
    k[i + kQK / 2] = static_cast<int8_t>((qs[i] >> 4) + offset);
  }
}

// The 5-bit values: Unpack4's nibbles plus bit 4 of value i from bit i of the 32-bit
// little-endian qh.
inline void Unpack5(const uint8_t* qh, const uint8_t* qs, int offset, int8_t* k) {
  const uint32_t h = static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
                     static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
  for (int i = 0; i < kQK / 2; ++i) {
    const int lo = (qs[i] & 15) | static_cast<int>((h >> i) & 1) << 4;
    const int hi = (qs[i] >> 4) | static_cast<int>((h >> (i + 16)) & 1) << 4;
    k[i] = static_cast<int8_t>(lo + offset);
    k[i + kQK / 2] = static_cast<int8_t>(hi + offset);
  }
}

void DecodeQ4_0(const uint8_t* p, Block32* b) {  // w = d (q - 8)
  b->s = LoadF16(p);
  b->m = 0.0f;
  Unpack4(p + kQ4_0Qs, -8, b->k);
}
void DecodeQ4_1(const uint8_t* p, Block32* b) {  // w = d q + m
  b->s = LoadF16(p);
  b->m = LoadF16(p + 2);
  Unpack4(p + kQ4_1Qs, 0, b->k);
}
void DecodeQ5_0(const uint8_t* p, Block32* b) {  // w = d (q - 16)
  b->s = LoadF16(p);
  b->m = 0.0f;
  Unpack5(p + kQ5_0Qh, p + kQ5_0Qs, -16, b->k);
}
void DecodeQ5_1(const uint8_t* p, Block32* b) {  // w = d q + m
  b->s = LoadF16(p);
  b->m = LoadF16(p + 2);
  Unpack5(p + kQ5_1Qh, p + kQ5_1Qs, 0, b->k);
}
void DecodeQ8_0(const uint8_t* p, Block32* b) {  // w = d q, q signed
  b->s = LoadF16(p);
  b->m = 0.0f;
  std::memcpy(b->k, p + kQ8_0Qs, kQK);
}

// One Q4_K / Q5_K super-block: sub-block j holds values 32 j ... 32 j + 31 with
// w = s[j] q + m[j], s[j] = d sc_j and m[j] = -(dmin m_j) (each one float32 product).
struct SuperBlockK {
  int8_t q[kQK_K];
  float s[8];
  float m[8];
};

void DecodeScalesK(const uint8_t* p, SuperBlockK* b) {
  const float d = LoadF16(p);
  const float dmin = LoadF16(p + 2);
  for (int j = 0; j < 8; ++j) {
    int sc, m;
    UnpackScaleMinK(p + kKScales, j, &sc, &m);
    b->s[j] = d * static_cast<float>(sc);
    b->m[j] = -(dmin * static_cast<float>(m));
  }
}

// Q4_K: chunk c < 4 of 64 values uses qs[32 c + l]: low nibble value 64 c + l (sub-block 2c),
// high nibble value 64 c + 32 + l (sub-block 2c + 1).
void DecodeQ4_K(const uint8_t* p, SuperBlockK* b) {
  DecodeScalesK(p, b);
  const uint8_t* qs = p + kQ4_KQs;
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      b->q[64 * c + l] = static_cast<int8_t>(qs[32 * c + l] & 15);
      b->q[64 * c + 32 + l] = static_cast<int8_t>(qs[32 * c + l] >> 4);
    }
  }
}

// Q5_K: Q4_K's nibble layout (qs after qh), plus bit 4 of value 32 j + l (sub-block j)
// from bit j of qh[l] (for chunk c: bit 2c for its low half, 2c + 1 for its high half).
void DecodeQ5_K(const uint8_t* p, SuperBlockK* b) {
  DecodeScalesK(p, b);
  const uint8_t* qh = p + kQ5_KQh;
  const uint8_t* qs = p + kQ5_KQs;
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const int lo = (qs[32 * c + l] & 15) | ((qh[l] >> (2 * c)) & 1) << 4;
      const int hi = (qs[32 * c + l] >> 4) | ((qh[l] >> (2 * c + 1)) & 1) << 4;
      b->q[64 * c + l] = static_cast<int8_t>(lo);
      b->q[64 * c + 32 + l] = static_cast<int8_t>(hi);
    }
  }
}

// One Q6_K super-block: k = q - 32 for the 256 values, the 16 int8 sub-block scales (value v
// uses sc[v / 16]) and d: w_v = (d sc[v / 16]) k_v.
struct SuperBlockQ6 {
  int8_t k[kQK_K];
  int8_t sc[16];
  float d;
};

// Half n < 2 holds values 128 n ... 128 n + 127 in ql[64 n ...], qh[32 n ...]: for l < 32 the
// four values 128 n + 32 g + l (g < 4) take their low 4 bits from ql[64 n + 32 (g & 1) + l]
// (low nibble for g < 2, high nibble for g >= 2) and their high 2 bits from bits 2g, 2g + 1 of
// qh[32 n + l].
void DecodeQ6_K(const uint8_t* p, SuperBlockQ6* b) {
  const uint8_t* ql = p;
  const uint8_t* qh = p + kQ6_KQh;
  for (int n = 0; n < 2; ++n) {
    for (int g = 0; g < 4; ++g) {
      for (int l = 0; l < 32; ++l) {
        const int low = (ql[64 * n + 32 * (g & 1) + l] >> (4 * (g >> 1))) & 15;
        const int high = (qh[32 * n + l] >> (2 * g)) & 3;
        b->k[128 * n + 32 * g + l] = static_cast<int8_t>((low | high << 4) - 32);
      }
    }
  }
  std::memcpy(b->sc, p + kQ6_KScales, 16);
  b->d = LoadF16(p + kQ6_KD);
}

// ---------------------------------------------------------------------------------------------
// Dequantisation: out = s k + m per value (for the types without an offset m is 0, which adds
// nothing), in float32 exactly as block_formats.h writes the formulas.

template <void (*Decode)(const uint8_t*, Block32*), int kBytes>
void Dequantize32(const void* blocks, int64_t n, float* out) {
  MLARUN_CHECK(n % kQK == 0);
  const uint8_t* p = static_cast<const uint8_t*>(blocks);
  for (int64_t b = 0; b < n / kQK; ++b, p += kBytes, out += kQK) {
    Block32 blk;
    Decode(p, &blk);
    for (int i = 0; i < kQK; ++i) out[i] = blk.s * static_cast<float>(blk.k[i]) + blk.m;
  }
}

// Q4_K, Q5_K: w = (d sc_j) q - (dmin m_j).
template <void (*Decode)(const uint8_t*, SuperBlockK*), int kBytes>
void DequantizeK(const void* blocks, int64_t n, float* out) {
  MLARUN_CHECK(n % kQK_K == 0);
  const uint8_t* p = static_cast<const uint8_t*>(blocks);
  for (int64_t b = 0; b < n / kQK_K; ++b, p += kBytes, out += kQK_K) {
    SuperBlockK blk;
    Decode(p, &blk);
    for (int v = 0; v < kQK_K; ++v) {
      out[v] = blk.s[v / kQK] * static_cast<float>(blk.q[v]) + blk.m[v / kQK];
    }
  }
}

// Q6_K: w = (d sc) (q - 32).
void DequantizeQ6_K(const void* blocks, int64_t n, float* out) {
  MLARUN_CHECK(n % kQK_K == 0);
  const uint8_t* p = static_cast<const uint8_t*>(blocks);
  for (int64_t b = 0; b < n / kQK_K; ++b, p += kQ6_KBytes, out += kQK_K) {
    SuperBlockQ6 blk;
    DecodeQ6_K(p, &blk);
    for (int v = 0; v < kQK_K; ++v) {
      out[v] = blk.d * static_cast<float>(blk.sc[v / 16]) * static_cast<float>(blk.k[v]);
    }
  }
}

void DequantizeF32(const void* blocks, int64_t n, float* out) {
  std::memcpy(out, blocks, static_cast<size_t>(n) * sizeof(float));
}
void DequantizeF16(const void* blocks, int64_t n, float* out) {
  const uint8_t* p = static_cast<const uint8_t*>(blocks);
  for (int64_t i = 0; i < n; ++i) out[i] = LoadF16(p + 2 * i);
}
void DequantizeBF16(const void* blocks, int64_t n, float* out) {
  const uint8_t* p = static_cast<const uint8_t*>(blocks);
  for (int64_t i = 0; i < n; ++i) out[i] = BF16ToF32(LoadU16(p + 2 * i));
}

// ---------------------------------------------------------------------------------------------
// Dot products with Q8 activations.
//
// The reference float order, the same for every type (SIMD versions are compared against it
// with a tolerance):
//   sum = 0.0f
//   for each 32-value block b of the row, in row order (b = 0, 1, ..., cols / 32 - 1):
//     I_b = exact int32 sum_i k_i a_i      (Q6_K: sc_{2j} sum_{i<16} k_i a_i
//                                                 + sc_{2j+1} sum_{i>=16} k_i a_i, exact int32)
//     A_b = -offsets[b] / 128               (exact int32)
//     t1 = s_b * (float)I_b                 (one float32 rounding each, no FMA: this file is
//     t2 = m_b * (float)A_b                  compiled for the baseline ISA without -mfma)
//     sum = sum + xs_b * (t1 + t2)
//   with, per type (j = b mod 8, the K-quant sub-block; d, dmin, m: float16 values as float):
//     Q4_0, Q5_0, Q8_0: s_b = d,                    m_b = 0 (t2 = 0, adds nothing)
//     Q4_1, Q5_1:       s_b = d,                    m_b = m
//     Q4_K, Q5_K:       s_b = d * (float)sc_j,      m_b = -(dmin * (float)m_j)
//     Q6_K:             s_b = d,                    m_b = 0
// The result is that float sum, returned as is.

inline int32_t DotI8(const int8_t* k, const int8_t* a, int n) {
  int32_t sum = 0;
  for (int i = 0; i < n; ++i) sum += static_cast<int32_t>(k[i]) * static_cast<int32_t>(a[i]);
  return sum;
}

// One block's term xs_b (s_b I_b + m_b A_b) in the order above.
inline float BlockTerm(float xs, float s, int32_t dot, float m, int32_t offset) {
  const int32_t a_sum = offset / -128;  // offset = -128 A_b exactly
  const float t1 = s * static_cast<float>(dot);
  const float t2 = m * static_cast<float>(a_sum);
  return xs * (t1 + t2);
}

template <void (*Decode)(const uint8_t*, Block32*), int kBytes>
float Dot32(const void* row, int64_t cols, const int8_t* q, const float* scales,
            const int32_t* offsets) {
  MLARUN_CHECK(cols % kQK == 0);
  const uint8_t* p = static_cast<const uint8_t*>(row);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / kQK; ++b, p += kBytes) {
    Block32 blk;
    Decode(p, &blk);
    sum += BlockTerm(scales[b], blk.s, DotI8(blk.k, q + b * kQK, kQK), blk.m, offsets[b]);
  }
  return sum;
}

template <void (*Decode)(const uint8_t*, SuperBlockK*), int kBytes>
float DotK(const void* row, int64_t cols, const int8_t* q, const float* scales,
           const int32_t* offsets) {
  MLARUN_CHECK(cols % kQK_K == 0);
  const uint8_t* p = static_cast<const uint8_t*>(row);
  float sum = 0.0f;
  for (int64_t sb = 0; sb < cols / kQK_K; ++sb, p += kBytes) {
    SuperBlockK blk;
    Decode(p, &blk);
    for (int j = 0; j < 8; ++j) {
      const int64_t b = sb * 8 + j;
      const int32_t dot = DotI8(blk.q + j * kQK, q + b * kQK, kQK);
      sum += BlockTerm(scales[b], blk.s[j], dot, blk.m[j], offsets[b]);
    }
  }
  return sum;
}

float DotQ6_K(const void* row, int64_t cols, const int8_t* q, const float* scales,
              const int32_t* offsets) {
  MLARUN_CHECK(cols % kQK_K == 0);
  const uint8_t* p = static_cast<const uint8_t*>(row);
  float sum = 0.0f;
  for (int64_t sb = 0; sb < cols / kQK_K; ++sb, p += kQ6_KBytes) {
    SuperBlockQ6 blk;
    DecodeQ6_K(p, &blk);
    for (int j = 0; j < 8; ++j) {
      const int64_t b = sb * 8 + j;
      const int8_t* k = blk.k + j * kQK;
      const int8_t* a = q + b * kQK;
      // |k| <= 32, |a| <= 128, |sc| <= 128: each half's sum is at most 16 * 32 * 128 = 2^16 in
      // magnitude, times its scale 2^23, the two together 2^24 (exact in int32 and in float).
      const int32_t dot =
          blk.sc[2 * j] * DotI8(k, a, 16) + blk.sc[2 * j + 1] * DotI8(k + 16, a + 16, 16);
      sum += BlockTerm(scales[b], blk.d, dot, 0.0f, offsets[b]);
    }
  }
  return sum;
}

// ---------------------------------------------------------------------------------------------
// The table: every type id of ggml.h's enum ggml_type (ids 4, 5 (Q4_2, Q4_3), 31-33 (Q4_0_4_4,
// Q4_0_4_8, Q4_0_8_8) and 36-38 (IQ4_NL_4_4, ...) were removed from ggml and are absent), with
// the block sizes of ggml-common.h's block structs (QK_K = 256).

// One row per type (kept out of clang-format's one-field-per-line layout).
// clang-format off
constexpr BlockFormat kFormats[] = {
    {.ggml_type = kGgmlF32, .name = "F32", .block_values = 1, .block_bytes = 4,
     .dequantize = DequantizeF32, .quantize = QuantizeF32},
    {.ggml_type = kGgmlF16, .name = "F16", .block_values = 1, .block_bytes = 2,
     .dequantize = DequantizeF16, .quantize = QuantizeF16},
    {.ggml_type = kGgmlQ4_0, .name = "Q4_0", .block_values = 32, .block_bytes = kQ4_0Bytes,
     .dequantize = Dequantize32<DecodeQ4_0, kQ4_0Bytes>, .quantize = QuantizeQ4_0,
     .dot_q8 = Dot32<DecodeQ4_0, kQ4_0Bytes>},
    {.ggml_type = kGgmlQ4_1, .name = "Q4_1", .block_values = 32, .block_bytes = kQ4_1Bytes,
     .dequantize = Dequantize32<DecodeQ4_1, kQ4_1Bytes>, .quantize = QuantizeQ4_1,
     .dot_q8 = Dot32<DecodeQ4_1, kQ4_1Bytes>},
    {.ggml_type = kGgmlQ5_0, .name = "Q5_0", .block_values = 32, .block_bytes = kQ5_0Bytes,
     .dequantize = Dequantize32<DecodeQ5_0, kQ5_0Bytes>, .quantize = QuantizeQ5_0,
     .dot_q8 = Dot32<DecodeQ5_0, kQ5_0Bytes>},
    {.ggml_type = kGgmlQ5_1, .name = "Q5_1", .block_values = 32, .block_bytes = kQ5_1Bytes,
     .dequantize = Dequantize32<DecodeQ5_1, kQ5_1Bytes>, .quantize = QuantizeQ5_1,
     .dot_q8 = Dot32<DecodeQ5_1, kQ5_1Bytes>},
    {.ggml_type = kGgmlQ8_0, .name = "Q8_0", .block_values = 32, .block_bytes = kQ8_0Bytes,
     .dequantize = Dequantize32<DecodeQ8_0, kQ8_0Bytes>, .quantize = QuantizeQ8_0,
     .dot_q8 = Dot32<DecodeQ8_0, kQ8_0Bytes>},
    // Q8_1: f16 d, f16 s (= d sum q), i8 qs[32] (an activation format of ggml).
    {.ggml_type = 9, .name = "Q8_1", .block_values = 32, .block_bytes = 36},
    {.ggml_type = 10, .name = "Q2_K", .block_values = 256, .block_bytes = 84},
    {.ggml_type = 11, .name = "Q3_K", .block_values = 256, .block_bytes = 110},
    {.ggml_type = kGgmlQ4_K, .name = "Q4_K", .block_values = 256, .block_bytes = kQ4_KBytes,
     .dequantize = DequantizeK<DecodeQ4_K, kQ4_KBytes>, .quantize = QuantizeQ4_K,
     .dot_q8 = DotK<DecodeQ4_K, kQ4_KBytes>},
    {.ggml_type = kGgmlQ5_K, .name = "Q5_K", .block_values = 256, .block_bytes = kQ5_KBytes,
     .dequantize = DequantizeK<DecodeQ5_K, kQ5_KBytes>, .quantize = QuantizeQ5_K,
     .dot_q8 = DotK<DecodeQ5_K, kQ5_KBytes>},
    {.ggml_type = kGgmlQ6_K, .name = "Q6_K", .block_values = 256, .block_bytes = kQ6_KBytes,
     .dequantize = DequantizeQ6_K, .quantize = QuantizeQ6_K, .dot_q8 = DotQ6_K},
    // Q8_K: f32 d, i8 qs[256], i16 bsums[16] (ggml's activation format for the K-quants).
    {.ggml_type = 15, .name = "Q8_K", .block_values = 256, .block_bytes = 292},
    {.ggml_type = 16, .name = "IQ2_XXS", .block_values = 256, .block_bytes = 66},
    {.ggml_type = 17, .name = "IQ2_XS", .block_values = 256, .block_bytes = 74},
    {.ggml_type = 18, .name = "IQ3_XXS", .block_values = 256, .block_bytes = 98},
    {.ggml_type = 19, .name = "IQ1_S", .block_values = 256, .block_bytes = 50},
    {.ggml_type = 20, .name = "IQ4_NL", .block_values = 32, .block_bytes = 18},
    {.ggml_type = 21, .name = "IQ3_S", .block_values = 256, .block_bytes = 110},
    {.ggml_type = 22, .name = "IQ2_S", .block_values = 256, .block_bytes = 82},
    {.ggml_type = 23, .name = "IQ4_XS", .block_values = 256, .block_bytes = 136},
    {.ggml_type = 24, .name = "I8", .block_values = 1, .block_bytes = 1},
    {.ggml_type = 25, .name = "I16", .block_values = 1, .block_bytes = 2},
    {.ggml_type = 26, .name = "I32", .block_values = 1, .block_bytes = 4},
    {.ggml_type = 27, .name = "I64", .block_values = 1, .block_bytes = 8},
    {.ggml_type = 28, .name = "F64", .block_values = 1, .block_bytes = 8},
    {.ggml_type = 29, .name = "IQ1_M", .block_values = 256, .block_bytes = 56},
    {.ggml_type = kGgmlBF16, .name = "BF16", .block_values = 1, .block_bytes = 2,
     .dequantize = DequantizeBF16, .quantize = QuantizeBF16},
    {.ggml_type = 34, .name = "TQ1_0", .block_values = 256, .block_bytes = 54},
    {.ggml_type = 35, .name = "TQ2_0", .block_values = 256, .block_bytes = 66},
    // MXFP4 (gpt-oss): u8 e (an E8M0 exponent), u8 qs[16] (E2M1 values, two per byte).
    {.ggml_type = 39, .name = "MXFP4", .block_values = 32, .block_bytes = 17},
};
// clang-format on

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace
}  // namespace block_internal

const BlockFormat* FindBlockFormat(uint32_t ggml_type) {
  for (const BlockFormat& f : block_internal::kFormats) {
    if (f.ggml_type == ggml_type) return &f;
  }
  return nullptr;
}

const BlockFormat* FindBlockFormatByName(std::string_view name) {
  for (const BlockFormat& f : block_internal::kFormats) {
    if (block_internal::EqualsIgnoreCase(f.name, name)) return &f;
  }
  return nullptr;
}

const BlockFormat& GetBlockFormat(uint32_t ggml_type) {
  const BlockFormat* f = FindBlockFormat(ggml_type);
  MLARUN_CHECK(f != nullptr);
  return *f;
}

void MatMulRowsBlocksScalar(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                            const Q8Activations& x, float* y, int64_t ldy) {
  MLARUN_CHECK(w.blocks != nullptr && w.blocks->multipliable());
  MLARUN_CHECK(x.cols == w.cols && w.cols % w.blocks->block_values == 0);
  const int64_t row_bytes = w.blocks->Bytes(w.cols);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const void* row = static_cast<const uint8_t*>(w.data) + r * row_bytes;
    for (int64_t t = 0; t < x.n_tokens; ++t) {
      y[t * ldy + (r - row_begin)] =
          w.blocks->dot_q8(row, w.cols, x.Row(t), x.Scales(t), x.Offsets(t));
    }
  }
}

}  // namespace mlarun
