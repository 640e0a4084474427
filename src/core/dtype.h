// Element types of weights, activations and caches, and exact scalar conversions between them.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace mlarun {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,  // OCP e4m3fn: no infinities, 0x7f/0xff are NaN; DeepSeek-V3 weights
  kI8,
  kI32,
  kI64,
  kU8,
  // GGUF block-quantised values (kernels/block_formats.h): WeightMatrix::blocks names the format;
  // DTypeSize is 1 (bytes are counted per block by the format).
  kBlocks,
};

// Returns the size of one element in bytes.
size_t DTypeSize(DType dtype);
// Returns the safetensors spelling ("F32", "BF16", "F8_E4M3", ...).
std::string_view DTypeName(DType dtype);
// Parses a safetensors dtype name; returns false for names mlarun does not support.
bool ParseDTypeName(std::string_view name, DType* dtype);
// Parses a user option value: f32, f16, bf16, fp8, int8 (case-sensitive).
bool ParseDTypeOption(std::string_view name, DType* dtype);

inline float BitsToF32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
inline uint32_t F32ToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

inline float BF16ToF32(uint16_t h) { return BitsToF32(static_cast<uint32_t>(h) << 16); }

// Two bf16 values in one 32-bit word, `low` in the low half: the "pair" that one lane of
// vdpbf16ps multiplies (kernel_table.h gemm_bf16_pairs, kernels/packed_bf16.h).
inline uint32_t BF16Pair(uint16_t low, uint16_t high) {
  return static_cast<uint32_t>(low) | (static_cast<uint32_t>(high) << 16);
}

// Rounds to nearest even; NaN stays NaN.
inline uint16_t F32ToBF16(float f) {
  uint32_t bits = F32ToBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// IEEE 754 binary16 conversions (round to nearest even).
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);

// FP8 E4M3 (e4m3fn): bias 7, subnormals m/8 * 2^-6, max 448.
float F8E4M3ToF32(uint8_t v);
// Rounds to nearest even and saturates to +-448.
uint8_t F32ToF8E4M3(float f);

}  // namespace mlarun
