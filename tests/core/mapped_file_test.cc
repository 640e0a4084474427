#include "core/mapped_file.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/error.h"

namespace mlarun {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("mlarun_mapped_file_test_" + name)).string();
}

// Bytes that differ from position to position (no zero pages that could hide a missed read).
std::string Pattern(size_t n) {
  std::string s(n, '\0');
  uint32_t v = 12345;
  for (char& c : s) {
    v = v * 1103515245u + 12345u;
    c = static_cast<char>(v >> 24);
  }
  return s;
}

TEST(MappedFileTest, ReadFileToStringReadsFilesAndRefusesDirectories) {
  const std::string path = TempPath("read");
  const std::string contents = Pattern(100000);
  WriteStringToFile(path, contents);
  EXPECT_EQ(ReadFileToString(path), contents);
  WriteStringToFile(path, "");
  EXPECT_EQ(ReadFileToString(path), "");
  const std::string dir = TempPath("read_dir");
  std::filesystem::create_directories(dir);
  try {
    ReadFileToString(dir);
    ADD_FAILURE() << "a directory read as a file";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), dir + ": is a directory, not a file");
  }
  EXPECT_THROW(ReadFileToString(TempPath("missing")), Error);
  std::filesystem::remove(dir);
  std::filesystem::remove(path);
}

TEST(MappedFileTest, ReleasedPagesReadBackTheFileBytes) {
  // Packed copies of tensors drop the mapped file's pages; a later read still sees the file.
  const std::string contents = Pattern((size_t{1} << 20) + 77);
  const std::string path = TempPath("release");
  WriteStringToFile(path, contents);
  for (FileLoad load : {FileLoad::kMmap, FileLoad::kCopy}) {
    const MappedFile file(path, load);
    file.ReleasePages(file.data() + 1000, 500000);                  // an unaligned range inside
    file.ReleasePages(file.data() + file.size() - 10, 20);          // past the end: ignored
    file.ReleasePages(reinterpret_cast<const uint8_t*>(&load), 4);  // another object: ignored
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(file.data()), file.size()), contents);
  }
  std::filesystem::remove(path);
}

TEST(MappedFileTest, MmapAndCopyHoldTheFileBytes) {
  // 3 MiB + 5: more than one huge page and not a multiple of the page size.
  const std::string contents = Pattern((size_t{3} << 20) + 5);
  const std::string path = TempPath("bytes");
  WriteStringToFile(path, contents);
  for (FileLoad load : {FileLoad::kMmap, FileLoad::kCopy}) {
    const MappedFile file(path, load);
    ASSERT_EQ(file.size(), contents.size());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(file.data()), file.size()), contents);
    if (load == FileLoad::kCopy) {
      // The copy starts on a 2 MiB boundary, so huge pages can back it from the first byte.
      EXPECT_EQ(reinterpret_cast<uintptr_t>(file.data()) % (uintptr_t{2} << 20), 0u);
    }
  }
  // A moved-from file gives up its mapping; the new owner still reads the bytes.
  MappedFile original(path, FileLoad::kCopy);
  const MappedFile moved(std::move(original));
  EXPECT_EQ(original.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_EQ(moved.data()[contents.size() - 1], static_cast<uint8_t>(contents.back()));
  std::filesystem::remove(path);
}

TEST(MappedFileTest, EmptyFileAndMissingFile) {
  const std::string path = TempPath("empty");
  WriteStringToFile(path, "");
  for (FileLoad load : {FileLoad::kMmap, FileLoad::kCopy}) {
    const MappedFile file(path, load);
    EXPECT_EQ(file.size(), 0u);
  }
  std::filesystem::remove(path);
  for (FileLoad load : {FileLoad::kMmap, FileLoad::kCopy}) {
    try {
      const MappedFile file(path, load);
      FAIL() << "opened a missing file";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace mlarun
