// Scalar dtype conversions. Formats: IEEE 754-2008 binary16; bfloat16 (upper half of binary32);
// OCP 8-bit floating point spec (2023) E4M3 "fn" variant as used by DeepSeek-V3's FP8 release.
#include "core/dtype.h"

#include <array>
#include <cmath>

namespace mlarun {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kF8E4M3:
    case DType::kI8:
    case DType::kU8:
    case DType::kBlocks:
      return 1;
    case DType::kI64:
      return 8;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
    case DType::kF8E4M3:
      return "F8_E4M3";
    case DType::kI8:
      return "I8";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
    case DType::kU8:
      return "U8";
    case DType::kBlocks:
      return "blocks";
  }
  return "?";
}

bool ParseDTypeName(std::string_view name, DType* dtype) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kI8, DType::kI32,
                  DType::kI64, DType::kU8}) {
    if (DTypeName(d) == name) {
      *dtype = d;
      return true;
    }
  }
  return false;
}

bool ParseDTypeOption(std::string_view name, DType* dtype) {
  if (name == "f32") {
    *dtype = DType::kF32;
  } else if (name == "f16") {
    *dtype = DType::kF16;
  } else if (name == "bf16") {
    *dtype = DType::kBF16;
  } else if (name == "fp8") {
    *dtype = DType::kF8E4M3;
  } else if (name == "int8") {
    *dtype = DType::kI8;
  } else {
    return false;
  }
  return true;
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: m * 2^-24.
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return BitsToF32(sign | 0x7f800000u | (mantissa << 13));
  return BitsToF32(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t F32ToF16(float f) {
  const uint32_t bits = F32ToBits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const float magnitude = std::fabs(f);
  if (std::isnan(f)) return static_cast<uint16_t>(sign | 0x7e00u);
  if (magnitude >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (magnitude < 6.103515625e-05f) {
    // Subnormal range: quantum 2^-24; nearbyint rounds half to even.
    const float q = std::nearbyint(magnitude * 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(q));
  }
  uint32_t m = bits & 0x7fffffffu;
  m += 0xfffu + ((m >> 13) & 1u);  // round to nearest even at bit 13
  const uint32_t exponent = (m >> 23) - 112;
  return static_cast<uint16_t>(sign | (exponent << 10) | ((m >> 13) & 0x3ffu));
}

namespace {

float DecodeF8E4M3(uint8_t v) {
  const bool negative = (v & 0x80u) != 0;
  const int exponent = (v >> 3) & 0xf;
  const int mantissa = v & 0x7;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7) {
    magnitude = std::nanf("");
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // m/8 * 2^-6
  } else {
    magnitude = std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
  }
  return negative ? -magnitude : magnitude;
}

}  // namespace

// All 256 values decoded once: the ldexp calls cost ~7 ns a value (FP8 rows decoded at load for
// --weights int8 or the absorbed path's W_uk^T, and by the scalar kernel table).
float F8E4M3ToF32(uint8_t v) {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[static_cast<size_t>(i)] = DecodeF8E4M3(static_cast<uint8_t>(i));
    return t;
  }();
  return table[v];
}

uint8_t F32ToF8E4M3(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80u : 0x00u;
  if (std::isnan(f)) return static_cast<uint8_t>(sign | 0x7fu);
  float magnitude = std::fabs(f);
  if (magnitude >= 448.0f) return static_cast<uint8_t>(sign | 0x7eu);
  // Find the quantum of the binade that holds `magnitude` (subnormal quantum 2^-9).
  int exponent = 0;
  std::frexp(magnitude, &exponent);  // magnitude = frac * 2^exponent, frac in [0.5, 1)
  const int unbiased = exponent - 1;
  const int quantum_exp = (unbiased < -6 ? -6 : unbiased) - 3;
  const float q = std::nearbyint(std::ldexp(magnitude, -quantum_exp));
  const float rounded = std::ldexp(q, quantum_exp);
  if (rounded >= 448.0f) return static_cast<uint8_t>(sign | 0x7eu);
  // Re-encode the rounded value (it may have moved up a binade).
  if (rounded < std::ldexp(1.0f, -6)) {
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(std::ldexp(rounded, 9)));
  }
  std::frexp(rounded, &exponent);
  const int e = exponent - 1;
  const int m = static_cast<int>(std::ldexp(rounded, -e) * 8.0f) - 8;
  return static_cast<uint8_t>(sign | ((e + 7) << 3) | m);
}

}  // namespace mlarun
