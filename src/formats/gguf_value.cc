// GgufValue: metadata values of every GGUF type, their conversions and their encoding.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <utility>

#include "core/check.h"
#include "formats/gguf.h"
#include "formats/gguf_encoding.h"

namespace mlarun {

using gguf_internal::AppendScalar;
using gguf_internal::AppendU64;
using gguf_internal::DecodeScalar;
using gguf_internal::IsKnownType;
using gguf_internal::IsSignedType;
using gguf_internal::IsUnsignedType;
using gguf_internal::Printable;
using gguf_internal::ScalarBytes;

namespace {

std::string Quoted(std::string_view s, size_t max_bytes) {
  std::string out = "\"";
  out += Printable(s, max_bytes);
  out += '"';
  return out;
}

}  // namespace

std::string GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
      return "uint8";
    case GgufType::kInt8:
      return "int8";
    case GgufType::kUint16:
      return "uint16";
    case GgufType::kInt16:
      return "int16";
    case GgufType::kUint32:
      return "uint32";
    case GgufType::kInt32:
      return "int32";
    case GgufType::kFloat32:
      return "float32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kUint64:
      return "uint64";
    case GgufType::kInt64:
      return "int64";
    case GgufType::kFloat64:
      return "float64";
  }
  return "type " + std::to_string(static_cast<uint32_t>(type));
}

// ---------------------------------------------------------------------------------------------
// GgufValue

GgufValue GgufValue::Unsigned(GgufType type, uint64_t value) {
  MLARUN_CHECK(IsUnsignedType(type));
  const uint64_t bits = 8 * ScalarBytes(type);
  MLARUN_CHECK(bits == 64 || value < (uint64_t{1} << bits));
  GgufValue v;
  v.type_ = type;
  v.scalar_bits_ = value;
  return v;
}

GgufValue GgufValue::Signed(GgufType type, int64_t value) {
  MLARUN_CHECK(IsSignedType(type));
  const uint64_t bits = 8 * ScalarBytes(type);
  MLARUN_CHECK(bits == 64 ||
               (value >= -(int64_t{1} << (bits - 1)) && value < (int64_t{1} << (bits - 1))));
  GgufValue v;
  v.type_ = type;
  v.scalar_bits_ = static_cast<uint64_t>(value);
  return v;
}

GgufValue GgufValue::Float32(float value) {
  GgufValue v;
  v.type_ = GgufType::kFloat32;
  v.scalar_bits_ = std::bit_cast<uint64_t>(static_cast<double>(value));
  return v;
}

GgufValue GgufValue::Float64(double value) {
  GgufValue v;
  v.type_ = GgufType::kFloat64;
  v.scalar_bits_ = std::bit_cast<uint64_t>(value);
  return v;
}

GgufValue GgufValue::Bool(bool value) {
  GgufValue v;
  v.type_ = GgufType::kBool;
  v.scalar_bits_ = value ? 1 : 0;
  return v;
}

GgufValue GgufValue::String(std::string value) {
  GgufValue v;
  v.type_ = GgufType::kString;
  v.string_ = std::move(value);
  return v;
}

GgufValue GgufValue::Array(GgufType element_type, std::vector<GgufValue> elements) {
  MLARUN_CHECK(IsKnownType(static_cast<uint32_t>(element_type)));
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = element_type;
  v.count_ = elements.size();
  for (const GgufValue& e : elements) MLARUN_CHECK(e.type_ == element_type);
  if (element_type == GgufType::kArray) {
    v.arrays_ = std::move(elements);
  } else if (element_type == GgufType::kString) {
    v.strings_.reserve(elements.size());
    for (GgufValue& e : elements) v.strings_.push_back(std::move(e.string_));
  } else {
    std::string packed;
    for (const GgufValue& e : elements) AppendScalar(element_type, e.scalar_bits_, packed);
    v.packed_.assign(packed.begin(), packed.end());
  }
  return v;
}

GgufValue GgufValue::StringArray(std::vector<std::string> strings) {
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = GgufType::kString;
  v.count_ = strings.size();
  v.strings_ = std::move(strings);
  return v;
}

GgufValue GgufValue::Packed(GgufType element_type, uint64_t count, const void* bytes) {
  GgufValue v;
  v.type_ = GgufType::kArray;
  v.element_type_ = element_type;
  v.count_ = count;
  const auto* begin = static_cast<const uint8_t*>(bytes);
  v.packed_.assign(begin, begin + count * ScalarBytes(element_type));
  return v;
}

// The host representation of these numbers is their file encoding (little-endian host).
GgufValue GgufValue::Int32Array(std::span<const int32_t> values) {
  return Packed(GgufType::kInt32, values.size(), values.data());
}
GgufValue GgufValue::Int64Array(std::span<const int64_t> values) {
  return Packed(GgufType::kInt64, values.size(), values.data());
}
GgufValue GgufValue::Uint32Array(std::span<const uint32_t> values) {
  return Packed(GgufType::kUint32, values.size(), values.data());
}
GgufValue GgufValue::Uint64Array(std::span<const uint64_t> values) {
  return Packed(GgufType::kUint64, values.size(), values.data());
}
GgufValue GgufValue::Float32Array(std::span<const float> values) {
  return Packed(GgufType::kFloat32, values.size(), values.data());
}
GgufValue GgufValue::Float64Array(std::span<const double> values) {
  return Packed(GgufType::kFloat64, values.size(), values.data());
}

bool GgufValue::is_integer() const { return IsUnsignedType(type_) || IsSignedType(type_); }

std::optional<uint64_t> GgufValue::AsUint() const {
  if (IsUnsignedType(type_)) return scalar_bits_;
  if (IsSignedType(type_) && static_cast<int64_t>(scalar_bits_) >= 0) return scalar_bits_;
  return std::nullopt;
}

std::optional<int64_t> GgufValue::AsInt() const {
  if (IsSignedType(type_)) return static_cast<int64_t>(scalar_bits_);
  if (IsUnsignedType(type_) && scalar_bits_ <= uint64_t{std::numeric_limits<int64_t>::max()}) {
    return static_cast<int64_t>(scalar_bits_);
  }
  return std::nullopt;
}

std::optional<double> GgufValue::AsFloat() const {
  if (is_float()) return std::bit_cast<double>(scalar_bits_);
  if (IsSignedType(type_)) return static_cast<double>(static_cast<int64_t>(scalar_bits_));
  if (IsUnsignedType(type_)) return static_cast<double>(scalar_bits_);
  return std::nullopt;
}

std::optional<bool> GgufValue::AsBool() const {
  if (type_ == GgufType::kBool) return scalar_bits_ != 0;
  return std::nullopt;
}

const std::string* GgufValue::AsString() const {
  return type_ == GgufType::kString ? &string_ : nullptr;
}

GgufValue GgufValue::Element(uint64_t i) const {
  MLARUN_CHECK(type_ == GgufType::kArray && i < count_);
  if (element_type_ == GgufType::kArray) return arrays_[i];
  if (element_type_ == GgufType::kString) return String(strings_[i]);
  GgufValue v;
  v.type_ = element_type_;
  v.scalar_bits_ = DecodeScalar(element_type_, packed_.data() + i * ScalarBytes(element_type_));
  return v;
}

std::optional<std::vector<int64_t>> GgufValue::AsIntVector() const {
  if (type_ != GgufType::kArray || !(IsUnsignedType(element_type_) || IsSignedType(element_type_)))
    return std::nullopt;
  std::vector<int64_t> out(count_);
  for (uint64_t i = 0; i < count_; ++i) {
    const std::optional<int64_t> v = Element(i).AsInt();
    if (!v) return std::nullopt;  // a uint64 above INT64_MAX
    out[i] = *v;
  }
  return out;
}

std::optional<std::vector<float>> GgufValue::AsFloatVector() const {
  if (type_ != GgufType::kArray ||
      !(element_type_ == GgufType::kFloat32 || element_type_ == GgufType::kFloat64 ||
        IsUnsignedType(element_type_) || IsSignedType(element_type_))) {
    return std::nullopt;
  }
  std::vector<float> out(count_);
  for (uint64_t i = 0; i < count_; ++i) out[i] = static_cast<float>(*Element(i).AsFloat());
  return out;
}

std::string GgufValue::TypeString() const {
  if (type_ != GgufType::kArray) return GgufTypeName(type_);
  // Nested arrays may differ in their element types; the first one stands for all.
  const std::string element = element_type_ == GgufType::kArray && !arrays_.empty()
                                  ? arrays_.front().TypeString()
                                  : GgufTypeName(element_type_);
  return "array[" + element + "]";
}

std::string GgufValue::ToString(size_t max_elements) const {
  char buffer[64];
  switch (type_) {
    case GgufType::kString:
      return Quoted(string_, 64);
    case GgufType::kBool:
      return scalar_bits_ ? "true" : "false";
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      std::snprintf(buffer, sizeof(buffer), type_ == GgufType::kFloat32 ? "%.9g" : "%.17g",
                    std::bit_cast<double>(scalar_bits_));
      return buffer;
    case GgufType::kArray: {
      std::string s = "[";
      const uint64_t shown = std::min<uint64_t>(count_, max_elements);
      for (uint64_t i = 0; i < shown; ++i) {
        if (i) s += ", ";
        s += element_type_ == GgufType::kArray ? arrays_[i].ToString(max_elements)
                                               : Element(i).ToString(max_elements);
      }
      if (shown < count_) {
        s += ", ... (" + std::to_string(count_) + " " + GgufTypeName(element_type_) + "s)";
      }
      return s + "]";
    }
    default:
      if (IsSignedType(type_)) return std::to_string(static_cast<int64_t>(scalar_bits_));
      return std::to_string(scalar_bits_);
  }
}

void GgufValue::AppendEncoding(std::string& out) const {
  switch (type_) {
    case GgufType::kString:
      AppendU64(string_.size(), out);
      out += string_;
      return;
    case GgufType::kArray:
      AppendScalar(GgufType::kUint32, static_cast<uint32_t>(element_type_), out);
      AppendU64(count_, out);
      if (element_type_ == GgufType::kString) {
        for (const std::string& s : strings_) {
          AppendU64(s.size(), out);
          out += s;
        }
      } else if (element_type_ == GgufType::kArray) {
        for (const GgufValue& a : arrays_) a.AppendEncoding(out);
      } else {
        out.append(packed_.begin(), packed_.end());
      }
      return;
    default:
      AppendScalar(type_, scalar_bits_, out);
  }
}

}  // namespace mlarun
