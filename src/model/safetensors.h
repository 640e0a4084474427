// Memory-mapped safetensors checkpoints: a single `model.safetensors` or shards listed in
// `model.safetensors.index.json`. Format: u64 little-endian header size N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end]}}, then the data (offsets relative to it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "model/weight_source.h"

namespace mlarun {

class SafetensorsArchive final : public WeightSource {
 public:
  // Opens every shard of the model in `model_dir` (mapped in place, or copied with
  // FileLoad::kCopy); throws Error naming the file at fault.
  static SafetensorsArchive Open(const std::string& model_dir, FileLoad load = FileLoad::kMmap);
  // Opens one file (tests, tools).
  static SafetensorsArchive OpenFile(const std::string& path);

  // Returns the tensor or nullptr.
  const TensorInfo* Find(const std::string& name) const override;
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  // Total bytes of all mapped files.
  size_t MappedBytes() const override;
  // Unmaps the whole pages of a tensor's bytes that has been copied elsewhere (mapped files only;
  // see MappedFile::ReleasePages).
  void ReleasePages(const void* data, size_t bytes) const override;

 private:
  void AddFile(const std::string& path, FileLoad load);

  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorInfo> tensors_;
};

// A tensor to write: data must hold NumElements * DTypeSize bytes.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
};

// Writes tensors to a safetensors file with optional string metadata. The data section starts at
// a multiple of 64 bytes and tensors whose size is a multiple of 64 bytes come first (in the
// given order), so they all start on a cache line; the others follow with larger element types
// first (each aligned to its element size).
void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// A tensor declared before its data exists (for files too large to hold in memory).
struct TensorDecl {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
};
// Streams tensors to `path`: writes the header from `decls`, then calls `fill(decl, bytes)` once
// per tensor in file order (WriteSafetensors' order); `fill` must resize `bytes` to the
// tensor's exact size.
void WriteSafetensorsStreaming(
    const std::string& path, const std::vector<TensorDecl>& decls,
    const std::map<std::string, std::string>& metadata,
    const std::function<void(const TensorDecl&, std::vector<uint8_t>&)>& fill);

}  // namespace mlarun
