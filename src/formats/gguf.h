// GGUF containers (the file format of ggml / llama.cpp): a validating reader over a memory-mapped
// file and a streaming writer.
//
// Format (GGUF versions 2 and 3; specification: docs/gguf.md of the ggml repository). Every
// number is little-endian; a "string" is a uint64 byte length followed by that many bytes of
// UTF-8 (no terminating NUL).
//   header:        "GGUF" (bytes 47 47 55 46), uint32 version, uint64 tensor_count,
//                  uint64 metadata_kv_count
//   metadata KVs:  string key, uint32 value type (GgufType), the value. Scalars are stored as
//                  their C type (bool as one byte, 0 or 1); an ARRAY is uint32 element type,
//                  uint64 element count, then the elements back to back (arrays may nest).
//   tensor infos:  string name, uint32 n_dims (1..4), uint64 ne[n_dims] (innermost first: ne[0]
//                  is the row length), uint32 ggml type, uint64 offset (relative to the data
//                  section, a multiple of the alignment)
//   padding:       zero bytes up to the next multiple of the alignment: metadata key
//                  `general.alignment` (uint32, a power of two; 32 when absent)
//   data section:  the tensors' bytes, each padded to the alignment. A tensor of type T holds
//                  ne[0] / block_values(T) blocks of block_bytes(T) bytes per row, times
//                  ne[1] ne[2] ne[3] rows.
// Version 1 (2023, 32-bit counts and lengths) is not read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "kernels/block_formats.h"

namespace mlarun {

// Metadata value types (gguf_metadata_value_type), with their ids in the file.
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// "uint8", "float32", "string", "array", ... ; "type N" for an id outside the enum.
std::string GgufTypeName(GgufType type);

// One metadata value of any type. Arrays keep their elements compactly: numbers and bools as
// their packed little-endian bytes, strings as a vector of strings, nested arrays as GgufValues.
class GgufValue {
 public:
  GgufValue() = default;  // uint8 0

  // Scalars. Unsigned / Signed take any integer type of the matching signedness and abort
  // (MLARUN_CHECK) if the value does not fit it.
  static GgufValue Unsigned(GgufType type, uint64_t value);
  static GgufValue Signed(GgufType type, int64_t value);
  static GgufValue Uint32(uint32_t value) { return Unsigned(GgufType::kUint32, value); }
  static GgufValue Uint64(uint64_t value) { return Unsigned(GgufType::kUint64, value); }
  static GgufValue Int32(int32_t value) { return Signed(GgufType::kInt32, value); }
  static GgufValue Int64(int64_t value) { return Signed(GgufType::kInt64, value); }
  static GgufValue Float32(float value);
  static GgufValue Float64(double value);
  static GgufValue Bool(bool value);
  static GgufValue String(std::string value);

  // Arrays. `Array` takes elements that all have type `element_type` (aborts otherwise); nested
  // arrays may differ in their own element types and lengths.
  static GgufValue Array(GgufType element_type, std::vector<GgufValue> elements);
  static GgufValue StringArray(std::vector<std::string> strings);
  static GgufValue Int32Array(std::span<const int32_t> values);
  static GgufValue Int64Array(std::span<const int64_t> values);
  static GgufValue Uint32Array(std::span<const uint32_t> values);
  static GgufValue Uint64Array(std::span<const uint64_t> values);
  static GgufValue Float32Array(std::span<const float> values);
  static GgufValue Float64Array(std::span<const double> values);

  GgufType type() const { return type_; }
  bool is_integer() const;  // uint8 .. int64 (not bool)
  bool is_float() const { return type_ == GgufType::kFloat32 || type_ == GgufType::kFloat64; }
  bool is_array() const { return type_ == GgufType::kArray; }

  // Scalar conversions; nullopt / nullptr where the value is of another type or does not fit.
  std::optional<uint64_t> AsUint() const;  // an integer >= 0
  std::optional<int64_t> AsInt() const;    // an integer that fits int64
  std::optional<double> AsFloat() const;   // float32, float64 or an integer
  std::optional<bool> AsBool() const;      // bool only
  const std::string* AsString() const;     // string only

  // Arrays (element_type() and size() are meaningful for arrays only; size() is 0 otherwise).
  GgufType element_type() const { return element_type_; }
  uint64_t size() const { return count_; }
  // Element i < size() as a value of its own (a copy; for nested arrays prefer arrays()).
  GgufValue Element(uint64_t i) const;
  // The elements of an array of strings / of arrays (empty for other values).
  const std::vector<std::string>& strings() const { return strings_; }
  const std::vector<GgufValue>& arrays() const { return arrays_; }
  // Every element converted as AsInt / AsFloat; nullopt unless this is an array whose elements
  // all convert. Float conversion rounds float64 and large integers to float.
  std::optional<std::vector<int64_t>> AsIntVector() const;
  std::optional<std::vector<float>> AsFloatVector() const;

  // "uint32", "array[string]", "array[array[int32]]".
  std::string TypeString() const;
  // For display: 7, -1.5, true, "llama", [1, 2, 3], ["a", "b", ... (150000 strings)].
  std::string ToString(size_t max_elements = 8) const;

  // Appends the value's encoding (without its type id) to `out`.
  void AppendEncoding(std::string& out) const;

  friend bool operator==(const GgufValue&, const GgufValue&) = default;

 private:
  friend class GgufParser;
  // An array of `count` numbers or bools of `element_type` encoded at `bytes`.
  static GgufValue Packed(GgufType element_type, uint64_t count, const void* bytes);

  GgufType type_ = GgufType::kUint8;
  // Scalars: unsigned integers and bool as their value, signed integers as their int64 two's
  // complement, floats as the bits of the value widened to double.
  uint64_t scalar_bits_ = 0;
  std::string string_;  // kString

  // kArray
  GgufType element_type_ = GgufType::kUint8;
  uint64_t count_ = 0;
  std::vector<uint8_t> packed_;       // numbers and bools: count_ elements, as in the file
  std::vector<std::string> strings_;  // strings
  std::vector<GgufValue> arrays_;     // nested arrays
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensor {
  std::string name;
  uint32_t ggml_type = 0;
  const BlockFormat* format = nullptr;  // never null in a GgufFile
  std::vector<int64_t> ne;              // innermost first: ne[0] is the row length
  uint64_t offset = 0;                  // relative to the data section
  const uint8_t* data = nullptr;
  size_t n_bytes = 0;

  int64_t NumElements() const;
  // "[4096, 32000]": ne as GGUF tools print it, innermost first.
  std::string ShapeString() const;
};

// A parsed, validated GGUF file. Every read is checked against the file size; a malformed file
// throws Error with one line naming the file and the key or tensor at fault (and the offset
// where that helps). Move-only; tensor data points into the mapping, which moves with it.
class GgufFile {
 public:
  static constexpr uint32_t kDefaultAlignment = 32;
  // Deepest array nesting read (an array of arrays of scalars is depth 2).
  static constexpr int kMaxArrayDepth = 8;

  static GgufFile Open(const std::string& path, FileLoad load = FileLoad::kMmap);

  const std::string& path() const { return file_->path(); }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // file offset of the data section

  // Metadata in file order.
  const std::vector<GgufKeyValue>& metadata() const { return metadata_; }
  std::vector<std::string_view> Keys() const;
  const GgufValue* Find(std::string_view key) const;

  // Typed getters: throw Error naming the file and key if the key is missing or its value has
  // another type or does not fit. GetUint takes any integer type with a value >= 0, GetInt any
  // integer that fits int64, GetFloat float32, float64 or integers; GetIntArray / GetFloatArray
  // arrays of such elements.
  uint64_t GetUint(std::string_view key) const;
  int64_t GetInt(std::string_view key) const;
  double GetFloat(std::string_view key) const;
  bool GetBool(std::string_view key) const;
  const std::string& GetString(std::string_view key) const;
  const std::vector<std::string>& GetStringArray(std::string_view key) const;
  std::vector<int64_t> GetIntArray(std::string_view key) const;
  std::vector<float> GetFloatArray(std::string_view key) const;

  // The same for keys that may be absent: nullopt / nullptr when absent; a present value of the
  // wrong type still throws.
  std::optional<uint64_t> FindUint(std::string_view key) const;
  std::optional<int64_t> FindInt(std::string_view key) const;
  std::optional<double> FindFloat(std::string_view key) const;
  std::optional<bool> FindBool(std::string_view key) const;
  const std::string* FindString(std::string_view key) const;
  const std::vector<std::string>* FindStringArray(std::string_view key) const;
  std::optional<std::vector<int64_t>> FindIntArray(std::string_view key) const;
  std::optional<std::vector<float>> FindFloatArray(std::string_view key) const;

  // Tensors in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* FindTensor(std::string_view name) const;

  size_t MappedBytes() const { return file_->size(); }
  // Unmaps the whole pages of tensor bytes that were copied elsewhere (MappedFile::ReleasePages).
  void ReleasePages(const void* data, size_t bytes) const;

 private:
  friend class GgufParser;
  GgufFile() = default;
  // Throws the wrong-type error for `key`, whose value is `value`, expected `expected`.
  [[noreturn]] void ThrowWrongType(std::string_view key, const GgufValue& value,
                                   std::string_view expected) const;

  std::unique_ptr<MappedFile> file_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufKeyValue> metadata_;
  std::map<std::string, size_t, std::less<>> key_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// A tensor to write, declared before its bytes exist.
struct GgufTensorDecl {
  std::string name;
  uint32_t ggml_type = kGgmlF32;
  std::vector<int64_t> ne;  // innermost first, 1 to 4 dimensions
};

// Writes a GGUF version 3 file: the header with `metadata` (in the given order) and the tensor
// infos of `tensors` (data in the given order, each at a multiple of the alignment), then calls
// `fill(decl, bytes)` once per tensor in that order; `fill` must resize `bytes` to the tensor's
// exact size. The alignment is `general.alignment` when `metadata` has it (an unsigned integer,
// a power of two; written as given), else 32. Writes `path`.tmp and renames it to `path` at the
// end, so a failed write (an Error, also from `fill`) leaves no partial file. Throws Error naming
// the file and key or tensor for duplicate keys or names and invalid shapes or types.
void WriteGguf(const std::string& path, const std::vector<GgufKeyValue>& metadata,
               const std::vector<GgufTensorDecl>& tensors,
               const std::function<void(const GgufTensorDecl&, std::vector<uint8_t>&)>& fill);

}  // namespace mlarun
