// .npy round trip and the exact header NumPy expects.
#include "core/npy.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/mapped_file.h"

namespace mlarun {
namespace {

TEST(NpyTest, RoundTripsShapeAndData) {
  const std::string path = ::testing::TempDir() + "/a.npy";
  const std::vector<float> data = {1, 2, 3, 4, 5, 6};
  WriteNpyF32(path, {2, 3}, data.data());
  const std::string bytes = ReadFileToString(path);
  EXPECT_EQ((bytes.size() - data.size() * 4) % 64, 0u);  // header padded to 64
  EXPECT_NE(bytes.find("'shape': (2, 3)"), std::string::npos);
  const NpyArray a = ReadNpyF32(path);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.data, data);
  WriteNpyF32(path, {6}, data.data());
  EXPECT_NE(ReadFileToString(path).find("'shape': (6,)"), std::string::npos);
  EXPECT_EQ(ReadNpyF32(path).shape, (std::vector<int64_t>{6}));
}

TEST(NpyTest, RejectsOtherFiles) {
  const std::string path = ::testing::TempDir() + "/bad.npy";
  WriteStringToFile(path, "not numpy");
  EXPECT_THROW(ReadNpyF32(path), Error);
}

}  // namespace
}  // namespace mlarun
