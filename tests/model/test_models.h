// Helpers for tests that need small generated models on disk.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "model/safetensors.h"
#include "model/synthetic.h"

namespace mlarun::testing {

// Writes (once per process) the preset at `dtype` under the gtest temp dir; returns its path.
inline std::string MakeTestModel(const std::string& preset, DType dtype = DType::kF32,
                                 uint64_t max_shard_bytes = 0) {
  // Per process: ctest runs tests in parallel processes that must not rewrite each other's files.
  const std::string dir = ::testing::TempDir() + "/mlarun_models_" + std::to_string(getpid()) +
                          "/" + preset + "_" + std::string(DTypeName(dtype)) + "_" +
                          std::to_string(max_shard_bytes);
  WriteSyntheticModel(
      {.preset = preset, .dtype = dtype, .seed = 1, .max_shard_bytes = max_shard_bytes}, dir);
  return dir;
}

// Rewrites DIR/model.safetensors with `edit` applied to its tensor list (corrupted copies).
template <typename Edit>
void RewriteTensors(const std::string& dir, Edit edit) {
  std::vector<TensorToWrite> tensors;
  {
    const SafetensorsArchive archive = SafetensorsArchive::Open(dir);
    for (const auto& [name, info] : archive.tensors()) {
      tensors.push_back({name, info.dtype, info.shape,
                         std::vector<uint8_t>(info.data, info.data + info.n_bytes)});
    }
  }
  edit(tensors);
  WriteSafetensors(dir + "/model.safetensors", tensors);
}

}  // namespace mlarun::testing
