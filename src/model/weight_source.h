// Where a model's tensors come from, by their Hugging Face names: a safetensors checkpoint
// (safetensors.h) or a GGUF file (gguf_weights.h), both memory-mapped. The loader (weights.h)
// binds tensors through this interface only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/block_formats.h"

namespace mlarun {

struct TensorInfo {
  std::string name;
  std::string file;  // path of the file holding it (for messages)
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // outermost first
  const uint8_t* data = nullptr;
  size_t n_bytes = 0;
  // kBlocks (GGUF block formats): the format; shape.back() is a multiple of its block_values.
  const BlockFormat* blocks = nullptr;

  int64_t NumElements() const;
  std::string ShapeString() const;  // "[2048, 512]"
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // Returns the tensor named `name` (Hugging Face spelling) or nullptr.
  virtual const TensorInfo* Find(const std::string& name) const = 0;
  // Unmaps the whole pages of a tensor's bytes that have been copied elsewhere (mapped files
  // only; see MappedFile::ReleasePages).
  virtual void ReleasePages(const void* data, size_t bytes) const = 0;
  // Total bytes of all mapped files.
  virtual size_t MappedBytes() const = 0;
};

}  // namespace mlarun
