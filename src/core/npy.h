// Reading and writing float32 arrays in NumPy's .npy format (version 1.0, little-endian '<f4').
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mlarun {

struct NpyArray {
  std::vector<int64_t> shape;  // outermost first
  std::vector<float> data;     // row-major
};

// Writes `data` with `shape` to `path`; throws Error naming the file on failure.
void WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data);
// Reads a C-order '<f4' array; throws Error naming the file for any other format.
NpyArray ReadNpyF32(const std::string& path);

}  // namespace mlarun
