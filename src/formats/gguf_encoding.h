// GGUF encoding helpers shared by the reader, the values and the writer (internal to
// src/formats): scalar sizes and little-endian encodings (numbers are little-endian in the file
// and on the hosts mlarun runs on, so they are copied as they are) and the tensor size rule.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "formats/gguf.h"

namespace mlarun::gguf_internal {

static_assert(std::endian::native == std::endian::little,
              "GGUF encoding needs a little-endian host");

inline bool IsKnownType(uint32_t id) { return id <= static_cast<uint32_t>(GgufType::kFloat64); }

// Bytes of one scalar of `type` in the file; 0 for strings and arrays.
inline uint64_t ScalarBytes(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

inline bool IsUnsignedType(GgufType type) {
  return type == GgufType::kUint8 || type == GgufType::kUint16 || type == GgufType::kUint32 ||
         type == GgufType::kUint64;
}

inline bool IsSignedType(GgufType type) {
  return type == GgufType::kInt8 || type == GgufType::kInt16 || type == GgufType::kInt32 ||
         type == GgufType::kInt64;
}

// Fewest bytes an element of `type` takes in the file: bounds an element count by the bytes
// left before anything is allocated for it.
inline uint64_t MinEncodedBytes(GgufType type) {
  if (type == GgufType::kString) return 8;     // length
  if (type == GgufType::kArray) return 4 + 8;  // element type, count
  return ScalarBytes(type);
}

// The GgufValue representation (scalar_bits_) of the scalar of `type` stored at `p`.
inline uint64_t DecodeScalar(GgufType type, const uint8_t* p) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kBool:
      return p[0];
    case GgufType::kInt8:
      return static_cast<uint64_t>(int64_t{static_cast<int8_t>(p[0])});
    case GgufType::kUint16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case GgufType::kInt16: {
      int16_t v;
      std::memcpy(&v, p, 2);
      return static_cast<uint64_t>(int64_t{v});
    }
    case GgufType::kUint32: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case GgufType::kInt32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<uint64_t>(int64_t{v});
    }
    case GgufType::kFloat32: {
      float v;
      std::memcpy(&v, p, 4);
      return std::bit_cast<uint64_t>(static_cast<double>(v));
    }
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
    case GgufType::kString:
    case GgufType::kArray:
      break;
  }
  MLARUN_CHECK(false && "DecodeScalar of a non-scalar type");
  return 0;
}

// Appends the file encoding of the scalar of `type` whose representation is `bits`.
inline void AppendScalar(GgufType type, uint64_t bits, std::string& out) {
  const uint64_t n = ScalarBytes(type);
  MLARUN_CHECK(n != 0);
  if (type == GgufType::kFloat32) {
    const float f = static_cast<float>(std::bit_cast<double>(bits));
    bits = std::bit_cast<uint32_t>(f);
  }
  // Integers: the low n bytes of the value (two's complement for signed ones), little-endian.
  for (uint64_t i = 0; i < n; ++i) out.push_back(static_cast<char>(bits >> (8 * i)));
}

inline void AppendU64(uint64_t v, std::string& out) { AppendScalar(GgufType::kUint64, v, out); }

// `s` made safe for a one-line message: control bytes as \xNN, at most `max_bytes` bytes of
// it (then "...").
inline std::string Printable(std::string_view s, size_t max_bytes = 128) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < s.size() && i < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      const char escape[4] = {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
      out.append(escape, 4);
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max_bytes) out += "...";
  return out;
}

constexpr size_t kMaxDims = 4;  // GGML_MAX_DIMS

// "[4096, 32000]".
std::string NeString(const std::vector<int64_t>& ne);

// Checks a tensor's dimension count, dimensions (positive), ggml type (one FindBlockFormat knows,
// with a block size) and row length (a multiple of the block) and returns its byte size; or
// nullopt with `problem` set to what is wrong (for "<file>: tensor '<name>': <problem>").
std::optional<uint64_t> TensorBytes(uint32_t ggml_type, const std::vector<int64_t>& ne,
                                    std::string& problem);

}  // namespace mlarun::gguf_internal
