// Helpers for tests that need small generated models on disk.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "model/safetensors.h"
#include "model/synthetic.h"

namespace mlarun::testing {

// Writes (once per process) the preset at `dtype` under the gtest temp dir; returns its path.
inline std::string MakeTestModel(const std::string& preset, DType dtype = DType::kF32,
                                 uint64_t max_shard_bytes = 0) {
  // Per process: ctest runs tests in parallel processes that must not rewrite each other's files.
  // The process's directory is removed when it exits.
  struct RemovedAtExit {
    std::string path;
    ~RemovedAtExit() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const RemovedAtExit root{::testing::TempDir() + "/mlarun_models_" +
                                  std::to_string(getpid())};
  const std::string dir = root.path + "/" + preset + "_" + std::string(DTypeName(dtype)) + "_" +
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

// Rewrites DIR/model.safetensors with `edit` applied to the tensor called `name` (a test failure
// if there is none).
template <typename Edit>
void EditTensor(const std::string& dir, const std::string& name, Edit edit) {
  RewriteTensors(dir, [&](std::vector<TensorToWrite>& tensors) {
    for (TensorToWrite& t : tensors) {
      if (t.name == name) return edit(t);
    }
    ADD_FAILURE() << dir << ": no tensor '" << name << "' to edit";
  });
}

}  // namespace mlarun::testing
