// Written safetensors files: contents round-trip, and the layout keeps vector loads on cache lines
// (the data section and every tensor of a whole number of cache lines start at a multiple of 64).
#include "model/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace mlarun {
namespace {

TEST(SafetensorsTest, WrittenTensorsRoundTripAndStartOnCacheLines) {
  // Odd sizes first in the input, so the writer must reorder to keep the large ones aligned.
  std::vector<TensorToWrite> tensors = {
      {"bias", DType::kF32, {3}, {}},          // 12 B
      {"odd_bf16", DType::kBF16, {5}, {}},     // 10 B
      {"weight", DType::kBF16, {64, 32}, {}},  // 4096 B
      {"q8", DType::kI8, {2, 64}, {}},         // 128 B
      {"odd_i8", DType::kI8, {7}, {}},         // 7 B
      {"scales", DType::kF32, {16, 4}, {}},    // 256 B
  };
  uint8_t next = 1;
  for (TensorToWrite& t : tensors) {
    size_t bytes = DTypeSize(t.dtype);
    for (int64_t d : t.shape) bytes *= static_cast<size_t>(d);
    t.data.resize(bytes);
    for (uint8_t& b : t.data) b = next++;
  }
  const std::string path = ::testing::TempDir() + "/aligned.safetensors";
  WriteSafetensors(path, tensors, {{"format", "pt"}});

  std::ifstream in(path, std::ios::binary);
  uint8_t size_bytes[8];
  in.read(reinterpret_cast<char*>(size_bytes), 8);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | size_bytes[i];
  EXPECT_EQ((8 + header) % 64, 0u) << "data section not on a cache line";

  const SafetensorsArchive archive = SafetensorsArchive::OpenFile(path);
  ASSERT_EQ(archive.tensors().size(), tensors.size());
  for (const TensorToWrite& t : tensors) {
    const TensorInfo* info = archive.Find(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(info->shape, t.shape) << t.name;
    ASSERT_EQ(info->n_bytes, t.data.size()) << t.name;
    EXPECT_TRUE(std::equal(t.data.begin(), t.data.end(), info->data)) << t.name;
    const auto address = reinterpret_cast<uintptr_t>(info->data);  // the mapping is page-aligned
    if (t.data.size() % 64 == 0) {
      EXPECT_EQ(address % 64, 0u) << t.name;
    } else {
      EXPECT_EQ(address % DTypeSize(t.dtype), 0u) << t.name;
    }
  }
  // Whole cache lines keep the given order (`mlarun quantize` writes a Q8 matrix's values, then
  // its scales, holding one matrix at a time); the odd sizes follow, larger elements first.
  std::vector<std::string> file_order;
  file_order.reserve(tensors.size());
  for (const TensorToWrite& t : tensors) file_order.push_back(t.name);
  std::sort(file_order.begin(), file_order.end(), [&](const std::string& a, const std::string& b) {
    return archive.Find(a)->data < archive.Find(b)->data;
  });
  EXPECT_EQ(file_order,
            (std::vector<std::string>{"weight", "q8", "scales", "bias", "odd_bf16", "odd_i8"}));
}

}  // namespace
}  // namespace mlarun
