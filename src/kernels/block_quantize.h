// Internal to block_formats.cc and block_quantize.cc (not part of the kernels' interface): the
// byte offsets of the GGUF block layouts both files read or write (block_formats.h describes the
// layouts), little-endian 16-bit loads and stores, and the reference quantisers that fill
// BlockFormat::quantize.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace mlarun::block_internal {

constexpr int kQK = 32;  // values of a 32-value block (Q4_0 ... Q8_0), and of a K-quant sub-block
constexpr int kQK_K = 256;  // values of a K-quant super-block

// Byte offsets inside one block (ggml-common.h's block_* structs, which have no padding).
constexpr int kQ4_0Bytes = 18, kQ4_0Qs = 2;                  // d, qs[16]
constexpr int kQ4_1Bytes = 20, kQ4_1Qs = 4;                  // d, m, qs[16]
constexpr int kQ5_0Bytes = 22, kQ5_0Qh = 2, kQ5_0Qs = 6;     // d, qh[4], qs[16]
constexpr int kQ5_1Bytes = 24, kQ5_1Qh = 4, kQ5_1Qs = 8;     // d, m, qh[4], qs[16]
constexpr int kQ8_0Bytes = 34, kQ8_0Qs = 2;                  // d, qs[32]
constexpr int kKScales = 4;                                  // Q4_K / Q5_K: after d, dmin
constexpr int kQ4_KBytes = 144, kQ4_KQs = 16;                // d, dmin, scales[12], qs[128]
constexpr int kQ5_KBytes = 176, kQ5_KQh = 16, kQ5_KQs = 48;  // ... scales[12], qh[32], qs[128]
constexpr int kQ6_KBytes = 210, kQ6_KQh = 128, kQ6_KScales = 192, kQ6_KD = 208;  // ql, qh, sc, d

inline uint16_t LoadU16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (static_cast<uint16_t>(p[1]) << 8));
}
inline void StoreU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xff);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline float LoadF16(const uint8_t* p) { return F16ToF32(LoadU16(p)); }

// The 6-bit scale sc and min m of K-quant sub-block j < 8 from the 12 packed bytes s
// (block_formats.h, Q4_K): j < 4 in the low 6 bits of s[j] and s[j + 4]; j >= 4 split into a
// low nibble in s[j + 4] and two high bits in the top bits of s[j - 4] (scale) and s[j] (min).
inline void UnpackScaleMinK(const uint8_t* s, int j, int* sc, int* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Reference quantisers (block_quantize.cc): x [n] (finite, n a multiple of the block's values)
// into n / block_values blocks.
void QuantizeF32(const float* x, int64_t n, void* blocks);
void QuantizeF16(const float* x, int64_t n, void* blocks);
void QuantizeBF16(const float* x, int64_t n, void* blocks);
void QuantizeQ4_0(const float* x, int64_t n, void* blocks);
void QuantizeQ4_1(const float* x, int64_t n, void* blocks);
void QuantizeQ5_0(const float* x, int64_t n, void* blocks);
void QuantizeQ5_1(const float* x, int64_t n, void* blocks);
void QuantizeQ8_0(const float* x, int64_t n, void* blocks);
void QuantizeQ4_K(const float* x, int64_t n, void* blocks);
void QuantizeQ5_K(const float* x, int64_t n, void* blocks);
void QuantizeQ6_K(const float* x, int64_t n, void* blocks);

}  // namespace mlarun::block_internal
