// Helpers of the GGUF tests: temporary paths, hand-built GGUF bytes, and opening a file that must
// fail.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "formats/gguf.h"

namespace mlarun::test {

inline std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/gguf_test_" + std::to_string(::getpid()) + "_" + name;
}

// Little-endian GGUF bytes, built by hand for files the writer refuses to produce.
class Bytes {
 public:
  Bytes& Raw(std::string_view s) {
    data_.append(s);
    return *this;
  }
  Bytes& U8(uint8_t v) { return Le(v, 1); }
  Bytes& U32(uint32_t v) { return Le(v, 4); }
  Bytes& U64(uint64_t v) { return Le(v, 8); }
  Bytes& Str(std::string_view s) { return U64(s.size()).Raw(s); }
  Bytes& Type(GgufType t) { return U32(static_cast<uint32_t>(t)); }
  // A metadata key and its value type; the value follows.
  Bytes& Key(std::string_view key, GgufType type) { return Str(key).Type(type); }
  Bytes& TensorInfo(std::string_view name, const std::vector<uint64_t>& ne, uint32_t ggml_type,
                    uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) U64(d);
    return U32(ggml_type).U64(offset);
  }
  Bytes& PadTo(size_t alignment) {
    data_.append((alignment - data_.size() % alignment) % alignment, '\0');
    return *this;
  }
  Bytes& Zeros(size_t n) {
    data_.append(n, '\0');
    return *this;
  }
  const std::string& str() const { return data_; }

 private:
  Bytes& Le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) data_.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  std::string data_;
};

inline Bytes Header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
  return Bytes().Raw("GGUF").U32(version).U64(tensors).U64(kvs);
}

// Opens `bytes` as a file and returns the Error's message; fails the test if it opens. Every
// message is one line that starts with the file's path.
inline std::string OpenError(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  WriteStringToFile(path, bytes);
  try {
    GgufFile::Open(path);
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
    std::filesystem::remove(path);
    return message;
  }
  ADD_FAILURE() << name << ": opened without an error";
  return "";
}

}  // namespace mlarun::test
