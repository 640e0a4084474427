// GGUF reading: the validating parser and the typed metadata getters. The layout is described in
// gguf.h (specification: docs/gguf.md of the ggml repository).
#include "formats/gguf.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "core/error.h"
#include "formats/gguf_encoding.h"

namespace mlarun {

using gguf_internal::DecodeScalar;
using gguf_internal::IsKnownType;
using gguf_internal::kMaxDims;
using gguf_internal::MinEncodedBytes;
using gguf_internal::NeString;
using gguf_internal::Printable;
using gguf_internal::ScalarBytes;
using gguf_internal::TensorBytes;

namespace {

constexpr uint8_t kMagic[4] = {0x47, 0x47, 0x55, 0x46};  // "GGUF"
constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;         // magic, version, two counts
// Fewest bytes a metadata KV can take: empty key (8), value type (4), a one-byte value.
constexpr uint64_t kMinKeyValueBytes = 8 + 4 + 1;
// Fewest bytes a tensor info can take: empty name (8), n_dims (4), one dim (8), type (4),
// offset (8).
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;

// Names of the ggml type ids that ggml once defined and has since removed from GGUF files (the
// ggml_type enum of the specification); FindBlockFormat knows every id still defined.
const char* RemovedGgmlTypeName(uint32_t id) {
  switch (id) {
    case 4:
      return "Q4_2";
    case 5:
      return "Q4_3";
    case 31:
      return "Q4_0_4_4";
    case 32:
      return "Q4_0_4_8";
    case 33:
      return "Q4_0_8_8";
    case 36:
      return "IQ4_NL_4_4";
    case 37:
      return "IQ4_NL_4_8";
    case 38:
      return "IQ4_NL_8_8";
    default:
      return nullptr;
  }
}

}  // namespace

namespace gguf_internal {

std::string NeString(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

std::optional<uint64_t> TensorBytes(uint32_t ggml_type, const std::vector<int64_t>& ne,
                                    std::string& problem) {
  if (ne.empty() || ne.size() > kMaxDims) {
    problem = "n_dims is " + std::to_string(ne.size()) + " (GGUF tensors have 1 to " +
              std::to_string(kMaxDims) + " dimensions)";
    return std::nullopt;
  }
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] <= 0) {
      problem = "dimension ne[" + std::to_string(d) + "] is " + std::to_string(ne[d]) +
                (ne[d] < 0 ? " (as int64)" : "") + "; dimensions must be positive";
      return std::nullopt;
    }
  }
  const BlockFormat* format = FindBlockFormat(ggml_type);
  if (format == nullptr) {
    const char* removed = RemovedGgmlTypeName(ggml_type);
    problem = "unknown ggml type id " + std::to_string(ggml_type) +
              (removed ? std::string(" (") + removed + ", which ggml no longer defines)" : "");
    return std::nullopt;
  }
  const std::string type_name(format->name);
  if (format->block_values <= 0 || format->block_bytes <= 0) {
    problem =
        "ggml type " + std::to_string(ggml_type) + " (" + type_name + ") has no known block size";
    return std::nullopt;
  }
  const auto block_values = static_cast<uint64_t>(format->block_values);
  const auto block_bytes = static_cast<uint64_t>(format->block_bytes);
  const auto row_length = static_cast<uint64_t>(ne[0]);
  if (row_length % block_values != 0) {
    problem = "row length ne[0] = " + std::to_string(row_length) + " is not a multiple of the " +
              std::to_string(block_values) + " values of a " + type_name + " block";
    return std::nullopt;
  }
  // The element count must fit int64 (GgufTensor::NumElements), the byte count uint64.
  uint64_t elements = row_length;
  uint64_t bytes = 0;
  bool overflow = __builtin_mul_overflow(row_length / block_values, block_bytes, &bytes);
  for (size_t d = 1; d < ne.size(); ++d) {
    const auto dim = static_cast<uint64_t>(ne[d]);
    overflow = overflow || __builtin_mul_overflow(elements, dim, &elements) ||
               __builtin_mul_overflow(bytes, dim, &bytes);
  }
  if (overflow || elements > uint64_t{std::numeric_limits<int64_t>::max()}) {
    problem = "shape " + NeString(ne) + " of " + type_name +
              " is too large (more than 2^63 - 1 values or 2^64 - 1 bytes)";
    return std::nullopt;
  }
  return bytes;
}

}  // namespace gguf_internal

// ---------------------------------------------------------------------------------------------
// GgufTensor

int64_t GgufTensor::NumElements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::string GgufTensor::ShapeString() const { return NeString(ne); }

// ---------------------------------------------------------------------------------------------
// Parsing: a cursor over the mapped bytes. Every read first checks that the bytes it needs lie
// before the end of the file; counts and lengths are compared with the bytes left before
// anything is allocated or looped over.

class GgufParser {
 public:
  explicit GgufParser(GgufFile& file)
      : file_(file), data_(file.file_->data()), size_(file.file_->size()) {}

  void Parse() {
    ParseHeader();
    ParseMetadata();
    ParseAlignment();
    ParseTensorInfos();
    PlaceTensors();
  }

 private:
  [[noreturn]] void Fail(const std::string& message) const {
    throw Error(file_.path() + ": " + message);
  }
  // Fails with `message` prefixed by what is being read ("metadata 'key'", "tensor 'name'").
  [[noreturn]] void FailHere(const std::string& message) const { Fail(where_ + ": " + message); }

  uint64_t left() const { return size_ - pos_; }

  // Fails unless `bytes` bytes are left; `what` + `suffix` names them (joined only on failure).
  void Need(uint64_t bytes, std::string_view what, std::string_view suffix = {}) const {
    if (bytes > left()) {
      FailHere("truncated: " + std::string(what) + std::string(suffix) + " needs " +
               std::to_string(bytes) + " bytes at offset " + std::to_string(pos_) +
               " but the file ends at " + std::to_string(size_));
    }
  }

  uint32_t ReadU32(std::string_view what) {
    Need(4, what);
    uint32_t v;
    std::memcpy(&v, data_ + pos_, 4);
    pos_ += 4;
    return v;
  }

  uint64_t ReadU64(std::string_view what) {
    Need(8, what);
    uint64_t v;
    std::memcpy(&v, data_ + pos_, 8);
    pos_ += 8;
    return v;
  }

  std::string_view ReadString(std::string_view what) {
    const uint64_t length_offset = pos_;
    Need(8, what, " length");
    uint64_t length;
    std::memcpy(&length, data_ + pos_, 8);
    pos_ += 8;
    if (length > left()) {
      FailHere(std::string(what) + " length " + std::to_string(length) + " at offset " +
               std::to_string(length_offset) + " runs past the end of the file (" +
               std::to_string(size_) + " bytes)");
    }
    const std::string_view s(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return s;
  }

  GgufType ReadType(std::string_view what) {
    const uint64_t offset = pos_;
    const uint32_t id = ReadU32(what);
    if (!IsKnownType(id)) {
      FailHere("unknown " + std::string(what) + " " + std::to_string(id) + " at offset " +
               std::to_string(offset) + " (GGUF defines 0 to 12)");
    }
    return static_cast<GgufType>(id);
  }

  void ParseHeader() {
    where_ = "GGUF header";
    if (size_ >= 4 && std::memcmp(data_, kMagic, 4) != 0) {
      char hex[16];
      std::snprintf(hex, sizeof(hex), "%02x %02x %02x %02x", data_[0], data_[1], data_[2],
                    data_[3]);
      Fail(std::string("not a GGUF file: it starts with bytes ") + hex +
           ", not 47 47 55 46 (\"GGUF\")");
    }
    if (size_ < kHeaderBytes) {
      Fail("truncated GGUF header: the file has " + std::to_string(size_) +
           " bytes, the header needs " + std::to_string(kHeaderBytes));
    }
    pos_ = 4;
    const uint32_t version = ReadU32("version");
    if (version != 2 && version != 3) {
      std::string message =
          "unsupported GGUF version " + std::to_string(version) + " (mlarun reads 2 and 3)";
      const uint32_t swapped = __builtin_bswap32(version);
      if (swapped == 2 || swapped == 3) message += "; is it a big-endian file?";
      Fail(message);
    }
    file_.version_ = version;
    tensor_count_ = ReadU64("tensor count");
    metadata_count_ = ReadU64("metadata count");
    if (metadata_count_ > left() / kMinKeyValueBytes) {
      Fail("metadata count " + std::to_string(metadata_count_) + " at offset 16 is more than the " +
           std::to_string(left()) + " bytes after the header can hold");
    }
  }

  void ParseMetadata() {
    file_.metadata_.reserve(metadata_count_);
    for (uint64_t i = 0; i < metadata_count_; ++i) {
      where_ = "metadata #" + std::to_string(i);
      const uint64_t key_offset = pos_;
      std::string key(ReadString("key"));
      where_ = "metadata '" + Printable(key) + "'";
      if (file_.key_index_.count(key) != 0) {
        FailHere("the key appears twice (entries #" + std::to_string(file_.key_index_.at(key)) +
                 " and #" + std::to_string(i) + ", offset " + std::to_string(key_offset) + ")");
      }
      const GgufType type = ReadType("value type");
      GgufValue value = ReadValue(type, 0);
      file_.key_index_.emplace(key, file_.metadata_.size());
      file_.metadata_.push_back({std::move(key), std::move(value)});
    }
  }

  // Reads a value of `type` nested in `depth` arrays.
  GgufValue ReadValue(GgufType type, int depth) {
    GgufValue v;
    v.type_ = type;
    if (type == GgufType::kString) {
      v.string_ = ReadString("string");
    } else if (type == GgufType::kArray) {
      ReadArray(v, depth + 1);
    } else {
      const uint64_t offset = pos_;
      Need(ScalarBytes(type), GgufTypeName(type), " value");
      v.scalar_bits_ = DecodeScalar(type, data_ + pos_);
      pos_ += ScalarBytes(type);
      if (type == GgufType::kBool && v.scalar_bits_ > 1) {
        FailHere("bool byte " + std::to_string(v.scalar_bits_) + " at offset " +
                 std::to_string(offset) + " is neither 0 nor 1");
      }
    }
    return v;
  }

  // Reads the element type, count and elements of an array that is the `depth`th nested one.
  void ReadArray(GgufValue& v, int depth) {
    if (depth > GgufFile::kMaxArrayDepth) {
      FailHere("arrays nested deeper than " + std::to_string(GgufFile::kMaxArrayDepth) +
               " levels at offset " + std::to_string(pos_));
    }
    v.element_type_ = ReadType("array element type");
    const uint64_t count_offset = pos_;
    v.count_ = ReadU64("array length");
    if (v.count_ > left() / MinEncodedBytes(v.element_type_)) {
      FailHere("array of " + std::to_string(v.count_) + " " + GgufTypeName(v.element_type_) +
               " at offset " + std::to_string(count_offset) + " runs past the end of the file (" +
               std::to_string(size_) + " bytes)");
    }
    if (v.element_type_ == GgufType::kString) {
      v.strings_.reserve(v.count_);
      for (uint64_t i = 0; i < v.count_; ++i) v.strings_.emplace_back(ReadString("string"));
    } else if (v.element_type_ == GgufType::kArray) {
      v.arrays_.reserve(v.count_);
      for (uint64_t i = 0; i < v.count_; ++i) {
        v.arrays_.push_back(ReadValue(GgufType::kArray, depth));
      }
    } else {
      const uint64_t bytes = v.count_ * ScalarBytes(v.element_type_);  // <= left(), see above
      v.packed_.assign(data_ + pos_, data_ + pos_ + bytes);
      if (v.element_type_ == GgufType::kBool) {
        for (uint64_t i = 0; i < bytes; ++i) {
          if (v.packed_[i] > 1) {
            FailHere("bool byte " + std::to_string(v.packed_[i]) + " at offset " +
                     std::to_string(pos_ + i) + " is neither 0 nor 1");
          }
        }
      }
      pos_ += bytes;
    }
  }

  // general.alignment: the data section and every tensor start at a multiple of it.
  void ParseAlignment() {
    const GgufValue* value = file_.Find("general.alignment");
    if (value == nullptr) return;
    const std::optional<uint64_t> alignment = value->AsUint();
    if (!alignment || *alignment == 0 || !std::has_single_bit(*alignment) ||
        *alignment > std::numeric_limits<uint32_t>::max()) {
      Fail("metadata 'general.alignment' is " + value->TypeString() + " " + value->ToString(4) +
           ", expected a power of two below 2^32");
    }
    file_.alignment_ = static_cast<uint32_t>(*alignment);
  }

  void ParseTensorInfos() {
    where_ = "GGUF header";
    if (tensor_count_ > left() / kMinTensorInfoBytes) {
      Fail("tensor count " + std::to_string(tensor_count_) + " at offset 8 is more than the " +
           std::to_string(left()) + " bytes after the metadata can hold");
    }
    file_.tensors_.reserve(tensor_count_);
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      where_ = "tensor #" + std::to_string(i);
      GgufTensor t;
      t.name = ReadString("tensor name");
      where_ = "tensor '" + Printable(t.name) + "'";
      if (file_.tensor_index_.count(t.name) != 0) {
        FailHere("the name appears twice (tensors #" +
                 std::to_string(file_.tensor_index_.at(t.name)) + " and #" + std::to_string(i) +
                 ")");
      }
      const uint32_t n_dims = ReadU32("n_dims");
      if (n_dims == 0 || n_dims > kMaxDims) {
        FailHere("n_dims is " + std::to_string(n_dims) + " (GGUF tensors have 1 to " +
                 std::to_string(kMaxDims) + " dimensions)");
      }
      Need(8 * uint64_t{n_dims}, "the dimension list");
      // A dimension above INT64_MAX reads as negative and is rejected as such below.
      for (uint32_t d = 0; d < n_dims; ++d)
        t.ne.push_back(static_cast<int64_t>(ReadU64("dimension")));
      t.ggml_type = ReadU32("ggml type");
      t.offset = ReadU64("data offset");
      t.format = FindBlockFormat(t.ggml_type);
      std::string problem;
      const std::optional<uint64_t> bytes = TensorBytes(t.ggml_type, t.ne, problem);
      if (!bytes) FailHere(problem);
      t.n_bytes = *bytes;
      file_.tensor_index_.emplace(t.name, file_.tensors_.size());
      file_.tensors_.push_back(std::move(t));
    }
  }

  // Places the data section after the tensor infos and checks every tensor's bytes lie in it,
  // aligned and disjoint.
  void PlaceTensors() {
    const uint64_t alignment = file_.alignment_;
    file_.data_offset_ = (pos_ + alignment - 1) / alignment * alignment;
    const uint64_t data_offset = file_.data_offset_;
    const uint64_t data_bytes = data_offset <= size_ ? size_ - data_offset : 0;
    for (GgufTensor& t : file_.tensors_) {
      where_ = "tensor '" + Printable(t.name) + "'";
      if (t.offset % alignment != 0) {
        FailHere("data offset " + std::to_string(t.offset) +
                 " is not a multiple of the alignment " + std::to_string(alignment));
      }
      if (data_offset > size_ || t.offset > data_bytes || t.n_bytes > data_bytes - t.offset) {
        FailHere("data offset " + std::to_string(t.offset) + " + " + std::to_string(t.n_bytes) +
                 " bytes (from file offset " + std::to_string(data_offset) +
                 ") runs past the end of the file (" + std::to_string(size_) + " bytes)");
      }
      t.data = data_ + data_offset + t.offset;
    }
    std::vector<const GgufTensor*> by_offset;
    by_offset.reserve(file_.tensors_.size());
    for (const GgufTensor& t : file_.tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensor& a = *by_offset[i - 1];
      const GgufTensor& b = *by_offset[i];
      if (a.offset + a.n_bytes > b.offset) {
        Fail("tensors '" + Printable(a.name) + "' (data offset " + std::to_string(a.offset) + ", " +
             std::to_string(a.n_bytes) + " bytes) and '" + Printable(b.name) + "' (data offset " +
             std::to_string(b.offset) + ") overlap");
      }
    }
  }

  GgufFile& file_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  std::string where_;  // what is being read, for messages
  uint64_t tensor_count_ = 0;
  uint64_t metadata_count_ = 0;
};

// ---------------------------------------------------------------------------------------------
// GgufFile

GgufFile GgufFile::Open(const std::string& path, FileLoad load) {
  GgufFile file;
  file.file_ = std::make_unique<MappedFile>(path, load);
  GgufParser(file).Parse();
  return file;
}

std::vector<std::string_view> GgufFile::Keys() const {
  std::vector<std::string_view> keys;
  keys.reserve(metadata_.size());
  for (const GgufKeyValue& kv : metadata_) keys.push_back(kv.key);
  return keys;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  const auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

void GgufFile::ReleasePages(const void* data, size_t bytes) const {
  file_->ReleasePages(static_cast<const uint8_t*>(data), bytes);
}

void GgufFile::ThrowWrongType(std::string_view key, const GgufValue& value,
                              std::string_view expected) const {
  throw Error(path() + ": metadata '" + std::string(key) + "' is " + value.TypeString() + " " +
              value.ToString(4) + ", expected " + std::string(expected));
}

namespace {
// `found` (what a Find* getter returned), or an Error naming the file and the missing key.
template <typename T>
T Required(const GgufFile& file, std::string_view key, T found) {
  if (!found) throw Error(file.path() + ": metadata key '" + std::string(key) + "' is missing");
  return found;
}
}  // namespace

std::optional<uint64_t> GgufFile::FindUint(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (const std::optional<uint64_t> u = v->AsUint()) return u;
  ThrowWrongType(key, *v, "a non-negative integer");
}

std::optional<int64_t> GgufFile::FindInt(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (const std::optional<int64_t> i = v->AsInt()) return i;
  ThrowWrongType(key, *v, "an integer that fits int64");
}

std::optional<double> GgufFile::FindFloat(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (const std::optional<double> f = v->AsFloat()) return f;
  ThrowWrongType(key, *v, "a number");
}

std::optional<bool> GgufFile::FindBool(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (const std::optional<bool> b = v->AsBool()) return b;
  ThrowWrongType(key, *v, "a bool");
}

const std::string* GgufFile::FindString(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return nullptr;
  if (const std::string* s = v->AsString()) return s;
  ThrowWrongType(key, *v, "a string");
}

const std::vector<std::string>* GgufFile::FindStringArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return nullptr;
  if (v->is_array() && v->element_type() == GgufType::kString) return &v->strings();
  ThrowWrongType(key, *v, "an array of strings");
}

std::optional<std::vector<int64_t>> GgufFile::FindIntArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (std::optional<std::vector<int64_t>> values = v->AsIntVector()) return values;
  ThrowWrongType(key, *v, "an array of integers that fit int64");
}

std::optional<std::vector<float>> GgufFile::FindFloatArray(std::string_view key) const {
  const GgufValue* v = Find(key);
  if (v == nullptr) return std::nullopt;
  if (std::optional<std::vector<float>> values = v->AsFloatVector()) return values;
  ThrowWrongType(key, *v, "an array of numbers");
}

uint64_t GgufFile::GetUint(std::string_view key) const {
  return *Required(*this, key, FindUint(key));
}
int64_t GgufFile::GetInt(std::string_view key) const { return *Required(*this, key, FindInt(key)); }
double GgufFile::GetFloat(std::string_view key) const {
  return *Required(*this, key, FindFloat(key));
}
bool GgufFile::GetBool(std::string_view key) const { return *Required(*this, key, FindBool(key)); }
const std::string& GgufFile::GetString(std::string_view key) const {
  return *Required(*this, key, FindString(key));
}
const std::vector<std::string>& GgufFile::GetStringArray(std::string_view key) const {
  return *Required(*this, key, FindStringArray(key));
}
std::vector<int64_t> GgufFile::GetIntArray(std::string_view key) const {
  return *Required(*this, key, FindIntArray(key));
}
std::vector<float> GgufFile::GetFloatArray(std::string_view key) const {
  return *Required(*this, key, FindFloatArray(key));
}

}  // namespace mlarun
