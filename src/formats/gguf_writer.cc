// GGUF writing: the header (metadata and tensor infos) is built in memory, then the tensors'
// bytes are streamed one tensor at a time. Layout: gguf.h (specification: docs/gguf.md of the
// ggml repository).
#include <algorithm>
#include <bit>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <system_error>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_encoding.h"

namespace mlarun {

using gguf_internal::AppendScalar;
using gguf_internal::AppendU64;
using gguf_internal::NeString;
using gguf_internal::TensorBytes;

namespace {

constexpr uint32_t kWrittenVersion = 3;

uint64_t AlignUp(uint64_t offset, uint64_t alignment) {
  return (offset + alignment - 1) / alignment * alignment;
}

// Writes `n` zero bytes (padding; n < the alignment, which may be up to 2^31).
void WriteZeros(std::ofstream& out, uint64_t n) {
  static constexpr char kZeros[4096] = {};
  while (n > 0) {
    const uint64_t chunk = std::min<uint64_t>(n, sizeof(kZeros));
    out.write(kZeros, static_cast<std::streamsize>(chunk));
    n -= chunk;
  }
}

void AppendString(std::string_view s, std::string& out) {
  AppendU64(s.size(), out);
  out.append(s);
}

// Removes the temporary file unless released (the write completed and it was renamed).
class RemoveOnFailure {
 public:
  explicit RemoveOnFailure(std::string path) : path_(std::move(path)) {}
  ~RemoveOnFailure() {
    if (!path_.empty()) {
      std::error_code ignored;
      std::filesystem::remove(path_, ignored);
    }
  }
  void Release() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace

void WriteGguf(const std::string& path, const std::vector<GgufKeyValue>& metadata,
               const std::vector<GgufTensorDecl>& tensors,
               const std::function<void(const GgufTensorDecl&, std::vector<uint8_t>&)>& fill) {
  // Header: magic, version, counts, then the metadata in the given order.
  std::string header = "GGUF";
  AppendScalar(GgufType::kUint32, kWrittenVersion, header);
  AppendU64(tensors.size(), header);
  AppendU64(metadata.size(), header);
  uint64_t alignment = GgufFile::kDefaultAlignment;
  std::set<std::string_view> keys;
  for (const GgufKeyValue& kv : metadata) {
    if (!keys.insert(kv.key).second) {
      throw Error(path + ": metadata key '" + kv.key + "' is given twice");
    }
    if (kv.key == "general.alignment") {
      const std::optional<uint64_t> value = kv.value.AsUint();
      if (!value || *value == 0 || !std::has_single_bit(*value) ||
          *value > std::numeric_limits<uint32_t>::max()) {
        throw Error(path + ": metadata 'general.alignment' is " + kv.value.TypeString() + " " +
                    kv.value.ToString() + ", expected a power of two below 2^32");
      }
      alignment = *value;
    }
    AppendString(kv.key, header);
    AppendScalar(GgufType::kUint32, static_cast<uint32_t>(kv.value.type()), header);
    kv.value.AppendEncoding(header);
  }

  // Tensor infos: each tensor's data at the next multiple of the alignment, in the given order.
  std::vector<uint64_t> sizes;
  sizes.reserve(tensors.size());
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const GgufTensorDecl& t : tensors) {
    const std::string where = path + ": tensor '" + t.name + "'";
    if (!names.insert(t.name).second) throw Error(where + ": the name is given twice");
    std::string problem;
    const std::optional<uint64_t> bytes = TensorBytes(t.ggml_type, t.ne, problem);
    if (!bytes) throw Error(where + ": " + problem);
    AppendString(t.name, header);
    AppendScalar(GgufType::kUint32, t.ne.size(), header);
    for (int64_t dim : t.ne) AppendU64(static_cast<uint64_t>(dim), header);
    AppendScalar(GgufType::kUint32, t.ggml_type, header);
    AppendU64(offset, header);
    sizes.push_back(*bytes);
    if (*bytes > std::numeric_limits<uint64_t>::max() - offset - alignment) {
      throw Error(where + ": the tensors' data exceeds 2^64 bytes");
    }
    offset = AlignUp(offset + *bytes, alignment);
  }

  const std::string tmp_path = path + ".tmp";
  RemoveOnFailure remove_tmp(tmp_path);
  std::ofstream out(tmp_path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(tmp_path + ": cannot create");
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  WriteZeros(out, AlignUp(header.size(), alignment) - header.size());  // data section aligned
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const GgufTensorDecl& t = tensors[i];
    bytes.clear();
    fill(t, bytes);
    if (bytes.size() != sizes[i]) {
      throw Error(path + ": tensor '" + t.name + "' was filled with " +
                  std::to_string(bytes.size()) + " bytes, its shape " + NeString(t.ne) + " of " +
                  std::string(FindBlockFormat(t.ggml_type)->name) + " has " +
                  std::to_string(sizes[i]));
    }
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    WriteZeros(out, AlignUp(sizes[i], alignment) - sizes[i]);
    if (!out) throw Error(tmp_path + ": write failed");
  }
  out.close();
  if (!out) throw Error(tmp_path + ": write failed");
  std::error_code error;
  std::filesystem::rename(tmp_path, path, error);
  if (error) throw Error(path + ": cannot rename " + tmp_path + " to it: " + error.message());
  remove_tmp.Release();
}

}  // namespace mlarun
