// Helpers for tests that need small generated models on disk.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

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

}  // namespace mlarun::testing
