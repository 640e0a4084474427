// Malformed GGUF files, one per validation rule, built byte by byte: each must fail with one line
// that names the file and the key or tensor at fault, fast (counts are checked against the bytes
// left before anything is allocated), and without reading out of bounds (the ASan build runs
// these too). Also: every truncation and random corruptions of a valid file, and a file written
// by the independent Python writer of bench/llamacpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "formats/gguf.h"
#include "formats/gguf_test_util.h"

namespace mlarun {
namespace {

using test::Bytes;
using test::Header;
using test::OpenError;
using test::TempPath;
using ::testing::EndsWith;
using ::testing::HasSubstr;

constexpr uint64_t kU64Max = ~uint64_t{0};

TEST(GgufErrorsTest, BadMagic) {
  EXPECT_THAT(OpenError("zip", Bytes().Raw("PK\x03\x04").Zeros(40).str()),
              HasSubstr("not a GGUF file: it starts with bytes 50 4b 03 04, not 47 47 55 46"));
  EXPECT_THAT(OpenError("lower", Bytes().Raw("gguf").U32(3).U64(0).U64(0).str()),
              HasSubstr("not a GGUF file"));
}

TEST(GgufErrorsTest, UnsupportedVersion) {
  EXPECT_THAT(OpenError("v1", Header(0, 0, 1).str()),
              EndsWith(": unsupported GGUF version 1 (mlarun reads 2 and 3)"));
  EXPECT_THAT(OpenError("v4", Header(0, 0, 4).str()),
              EndsWith(": unsupported GGUF version 4 (mlarun reads 2 and 3)"));
  EXPECT_THAT(OpenError("v0", Header(0, 0, 0).str()), HasSubstr("unsupported GGUF version 0"));
  EXPECT_THAT(OpenError("big_endian", Header(0, 0, 0x03000000).str()),
              HasSubstr("version 50331648 (mlarun reads 2 and 3); is it a big-endian file?"));
}

TEST(GgufErrorsTest, TruncatedHeader) {
  EXPECT_THAT(OpenError("empty", ""),
              HasSubstr("truncated GGUF header: the file has 0 bytes, the header needs 24"));
  EXPECT_THAT(OpenError("two_bytes", "GG"), HasSubstr("the file has 2 bytes"));
  EXPECT_THAT(OpenError("no_counts", Bytes().Raw("GGUF").U32(3).U64(0).str()),
              HasSubstr("truncated GGUF header: the file has 16 bytes, the header needs 24"));
}

TEST(GgufErrorsTest, TruncatedInsideMetadata) {
  // The value of a uint32 key: 2 of its 4 bytes.
  EXPECT_THAT(OpenError("value",
                        Header(0, 1).Key("llama.block_count", GgufType::kUint32).U8(1).U8(0).str()),
              HasSubstr(": metadata 'llama.block_count': truncated: uint32 value needs 4 bytes "
                        "at offset 53 but the file ends at 55"));
  // The value type of the second key.
  EXPECT_THAT(
      OpenError("type", Header(0, 2).Key("a", GgufType::kUint8).U8(1).Str("bbbbbbbb").U8(0).str()),
      HasSubstr(": metadata 'bbbbbbbb': truncated: value type needs 4 bytes at offset 54 but the "
                "file ends at 55"));
  // A string value's length.
  EXPECT_THAT(OpenError("length", Header(0, 1).Key("general.name", GgufType::kString).U32(0).str()),
              HasSubstr(": metadata 'general.name': truncated: string length needs 8 bytes"));
  // An array's element count.
  EXPECT_THAT(
      OpenError("count",
                Header(0, 1).Key("a", GgufType::kArray).Type(GgufType::kInt32).U32(1).str()),
      HasSubstr(": metadata 'a': truncated: array length needs 8 bytes"));
}

TEST(GgufErrorsTest, StringLengthPastTheEnd) {
  EXPECT_THAT(
      OpenError("value",
                Header(0, 1).Key("general.name", GgufType::kString).U64(1000).Raw("abc").str()),
      HasSubstr(": metadata 'general.name': string length 1000 at offset 48 runs past the end of "
                "the file (59 bytes)"));
  EXPECT_THAT(OpenError("key", Header(0, 1).U64(uint64_t{1} << 62).Zeros(12).str()),
              HasSubstr(": metadata #0: key length 4611686018427387904 at offset 24 runs past"));
  EXPECT_THAT(OpenError("max", Header(0, 1).U64(kU64Max).Zeros(12).str()),
              HasSubstr("key length 18446744073709551615 at offset 24 runs past"));
  EXPECT_THAT(OpenError("element", Header(0, 1)
                                       .Key("tokens", GgufType::kArray)
                                       .Type(GgufType::kString)
                                       .U64(2)
                                       .Str("ok")
                                       .U64(3)
                                       .Raw("ab")
                                       .str()),
              HasSubstr(": metadata 'tokens': string length 3 at offset"));
}

TEST(GgufErrorsTest, ArrayCountPastTheEndFailsFast) {
  const std::clock_t start = std::clock();  // CPU time: robust to a loaded machine
  // 2^60 strings would need 2^63 bytes of lengths alone: no allocation may follow the count.
  EXPECT_THAT(OpenError("strings", Header(0, 1)
                                       .Key("tokenizer.ggml.tokens", GgufType::kArray)
                                       .Type(GgufType::kString)
                                       .U64(uint64_t{1} << 60)
                                       .Str("a")
                                       .str()),
              HasSubstr(": metadata 'tokenizer.ggml.tokens': array of 1152921504606846976 string "
                        "at offset"));
  EXPECT_THAT(OpenError("uint32", Header(0, 1)
                                      .Key("a", GgufType::kArray)
                                      .Type(GgufType::kUint32)
                                      .U64(3)
                                      .U32(1)
                                      .U32(2)
                                      .str()),
              HasSubstr(": metadata 'a': array of 3 uint32 at offset"));
  EXPECT_THAT(OpenError("nested", Header(0, 1)
                                      .Key("a", GgufType::kArray)
                                      .Type(GgufType::kArray)
                                      .U64(kU64Max)
                                      .Zeros(24)
                                      .str()),
              HasSubstr("array of 18446744073709551615 array at offset"));
  EXPECT_THAT(OpenError("max_bytes", Header(0, 1)
                                         .Key("a", GgufType::kArray)
                                         .Type(GgufType::kUint64)
                                         .U64(kU64Max / 8 + 1)
                                         .str()),
              HasSubstr("runs past the end of the file"));
  const double seconds = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  EXPECT_LT(seconds, 0.1) << seconds << " s of CPU time";
}

TEST(GgufErrorsTest, UnknownValueType) {
  EXPECT_THAT(OpenError("value", Header(0, 1).Str("general.name").U32(13).U64(0).str()),
              HasSubstr(": metadata 'general.name': unknown value type 13 at offset 44 (GGUF "
                        "defines 0 to 12)"));
  EXPECT_THAT(
      OpenError("element", Header(0, 1).Key("a", GgufType::kArray).U32(99).U64(1).U64(0).str()),
      HasSubstr(": metadata 'a': unknown array element type 99 at offset"));
}

// An array value nested `depth` deep: depth - 1 arrays of one array, then an empty uint8 array.
Bytes NestedArrays(int depth) {
  Bytes b = Header(0, 1).Key("deep", GgufType::kArray);
  for (int i = 1; i < depth; ++i) b.Type(GgufType::kArray).U64(1);
  return b.Type(GgufType::kUint8).U64(0);
}

TEST(GgufErrorsTest, ArraysNestedTooDeep) {
  static_assert(GgufFile::kMaxArrayDepth == 8);
  const std::string path = TempPath("deep_ok.gguf");
  WriteStringToFile(path, NestedArrays(8).str());
  const GgufFile file = GgufFile::Open(path);
  const GgufValue* value = file.Find("deep");
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(value->TypeString(), "array[array[array[array[array[array[array[array[uint8]]]]]]]]");
  std::filesystem::remove(path);
  EXPECT_THAT(OpenError("deep9", NestedArrays(9).str()),
              HasSubstr(": metadata 'deep': arrays nested deeper than 8 levels at offset"));
  EXPECT_THAT(OpenError("deep100000", NestedArrays(100000).str()),
              HasSubstr("arrays nested deeper than 8 levels"));
}

TEST(GgufErrorsTest, DuplicateKey) {
  EXPECT_THAT(OpenError("dup", Header(0, 3)
                                   .Key("general.architecture", GgufType::kString)
                                   .Str("llama")
                                   .Key("general.name", GgufType::kString)
                                   .Str("x")
                                   .Key("general.architecture", GgufType::kUint8)
                                   .U8(1)
                                   .str()),
              HasSubstr(": metadata 'general.architecture': the key appears twice (entries #0 "
                        "and #2, offset"));
}

TEST(GgufErrorsTest, BoolOtherThanZeroOrOne) {
  EXPECT_THAT(OpenError("scalar", Header(0, 1).Key("flag", GgufType::kBool).U8(2).str()),
              HasSubstr(": metadata 'flag': bool byte 2 at offset 40 is neither 0 nor 1"));
  EXPECT_THAT(OpenError("array", Header(0, 1)
                                     .Key("flags", GgufType::kArray)
                                     .Type(GgufType::kBool)
                                     .U64(3)
                                     .U8(1)
                                     .U8(0)
                                     .U8(255)
                                     .str()),
              HasSubstr(": metadata 'flags': bool byte 255 at offset"));
}

TEST(GgufErrorsTest, CountsBeyondTheFile) {
  EXPECT_THAT(OpenError("kv_count", Header(0, uint64_t{1} << 62).Zeros(64).str()),
              HasSubstr(": metadata count 4611686018427387904 at offset 16 is more than the 64 "
                        "bytes after the header can hold"));
  EXPECT_THAT(OpenError("tensor_count", Header(kU64Max, 0).Zeros(64).str()),
              HasSubstr(": tensor count 18446744073709551615 at offset 8 is more than the 64 bytes "
                        "after the metadata can hold"));
}

// A file with one tensor info and `data_bytes` zero bytes of data after the aligned header.
std::string OneTensor(std::string_view name, const std::vector<uint64_t>& ne, uint32_t type,
                      uint64_t offset = 0, size_t data_bytes = 0) {
  return Header(1, 0).TensorInfo(name, ne, type, offset).PadTo(32).Zeros(data_bytes).str();
}

TEST(GgufErrorsTest, DimensionCount) {
  EXPECT_THAT(OpenError("n_dims0", OneTensor("w", {}, kGgmlF32, 0, 64)),
              HasSubstr(": tensor 'w': n_dims is 0 (GGUF tensors have 1 to 4 dimensions)"));
  EXPECT_THAT(OpenError("n_dims5", OneTensor("w", {1, 1, 1, 1, 1}, kGgmlF32, 0, 64)),
              HasSubstr(": tensor 'w': n_dims is 5"));
  EXPECT_THAT(OpenError("n_dims_max", Header(1, 0).Str("w").U32(0xffffffff).Zeros(64).str()),
              HasSubstr(": tensor 'w': n_dims is 4294967295"));
}

TEST(GgufErrorsTest, BadDimensions) {
  EXPECT_THAT(OpenError("zero", OneTensor("w", {4, 0}, kGgmlF32, 0, 64)),
              HasSubstr(": tensor 'w': dimension ne[1] is 0; dimensions must be positive"));
  EXPECT_THAT(OpenError("negative", OneTensor("w", {4, 1, kU64Max - 4}, kGgmlF32, 0, 64)),
              HasSubstr(": tensor 'w': dimension ne[2] is -5 (as int64)"));
  EXPECT_THAT(
      OpenError("elements", OneTensor("w", {uint64_t{1} << 32, uint64_t{1} << 32}, kGgmlF32)),
      HasSubstr(": tensor 'w': shape [4294967296, 4294967296] of F32 is too large"));
  EXPECT_THAT(OpenError("elements_int64", OneTensor("w", {uint64_t{1} << 62, 2}, kGgmlQ8_0)),
              HasSubstr("is too large"));
  // 2^62 values fit int64, but 2^62 F64 values take 2^65 bytes.
  EXPECT_THAT(OpenError("bytes", OneTensor("w", {uint64_t{1} << 61, 2}, 28)),
              HasSubstr(": tensor 'w': shape [2305843009213693952, 2] of F64 is too large"));
}

TEST(GgufErrorsTest, UnknownTensorType) {
  EXPECT_THAT(OpenError("id99", OneTensor("blk.0.attn_q.weight", {32}, 99, 0, 64)),
              EndsWith(": tensor 'blk.0.attn_q.weight': unknown ggml type id 99"));
  EXPECT_THAT(OpenError("removed", OneTensor("w", {32}, 31, 0, 64)),
              HasSubstr(": tensor 'w': unknown ggml type id 31 (Q4_0_4_4, which ggml no longer "
                        "defines)"));
}

TEST(GgufErrorsTest, RowLengthNotAMultipleOfTheBlock) {
  EXPECT_THAT(OpenError("q4k", OneTensor("w", {100, 2}, kGgmlQ4_K, 0, 1024)),
              HasSubstr(": tensor 'w': row length ne[0] = 100 is not a multiple of the 256 values "
                        "of a Q4_K block"));
  EXPECT_THAT(OpenError("q8", OneTensor("w", {33}, kGgmlQ8_0, 0, 64)),
              HasSubstr("row length ne[0] = 33 is not a multiple of the 32 values of a Q8_0"));
}

TEST(GgufErrorsTest, TensorDataOutOfBounds) {
  // Data section at 64 (the 49-byte header + info padded to 32), 16 of the 32 bytes present.
  EXPECT_THAT(OpenError("short", OneTensor("w", {8}, kGgmlF32, 0, 16)),
              HasSubstr(": tensor 'w': data offset 0 + 32 bytes (from file offset 64) runs past "
                        "the end of the file (80 bytes)"));
  EXPECT_THAT(OpenError("offset", OneTensor("w", {8}, kGgmlF32, 64, 64)),
              HasSubstr(": tensor 'w': data offset 64 + 32 bytes"));
  EXPECT_THAT(OpenError("wrap", OneTensor("w", {8}, kGgmlF32, kU64Max - 31, 64)),
              HasSubstr(": tensor 'w': data offset 18446744073709551584 + 32 bytes"));
  // No data section at all: the file ends right after the tensor info.
  EXPECT_THAT(OpenError("none", Header(1, 0).TensorInfo("w", {8}, kGgmlF32, 0).str()),
              HasSubstr("runs past the end of the file (57 bytes)"));
}

TEST(GgufErrorsTest, MisalignedTensorOffset) {
  EXPECT_THAT(OpenError("misaligned", OneTensor("w", {4}, kGgmlF32, 16, 64)),
              HasSubstr(": tensor 'w': data offset 16 is not a multiple of the alignment 32"));
}

TEST(GgufErrorsTest, OverlappingTensors) {
  const std::string overlapping = Header(2, 0)
                                      .TensorInfo("a", {16}, kGgmlF32, 0)
                                      .TensorInfo("b", {16}, kGgmlF32, 32)
                                      .PadTo(32)
                                      .Zeros(128)
                                      .str();
  EXPECT_THAT(OpenError("overlap", overlapping),
              HasSubstr(": tensors 'a' (data offset 0, 64 bytes) and 'b' (data offset 32) "
                        "overlap"));
  // Adjacent tensors, listed out of offset order, are fine.
  const std::string path = TempPath("adjacent.gguf");
  WriteStringToFile(path, Header(2, 0)
                              .TensorInfo("a", {16}, kGgmlF32, 64)
                              .TensorInfo("b", {16}, kGgmlF32, 0)
                              .PadTo(32)
                              .Zeros(128)
                              .str());
  const GgufFile file = GgufFile::Open(path);
  EXPECT_EQ(file.FindTensor("a")->data, file.FindTensor("b")->data + 64);
  std::filesystem::remove(path);
}

TEST(GgufErrorsTest, DuplicateTensorName) {
  EXPECT_THAT(OpenError("dup", Header(2, 0)
                                   .TensorInfo("w", {8}, kGgmlF32, 0)
                                   .TensorInfo("w", {8}, kGgmlF32, 32)
                                   .PadTo(32)
                                   .Zeros(64)
                                   .str()),
              HasSubstr(": tensor 'w': the name appears twice (tensors #0 and #1)"));
}

TEST(GgufErrorsTest, NamesInMessagesStayOnOneLine) {
  // Control bytes of a key or name are escaped, and long ones cut, in messages.
  EXPECT_THAT(OpenError("newline", Header(0, 1).Key("a\nb", GgufType::kBool).U8(7).str()),
              HasSubstr(": metadata 'a\\x0ab': bool byte 7"));
  const std::string long_name(5000, 'n');
  EXPECT_THAT(OpenError("long", OneTensor(long_name, {8}, 99, 0, 64)),
              HasSubstr(": tensor '" + long_name.substr(0, 128) + "...': unknown ggml type id 99"));
}

TEST(GgufErrorsTest, TruncatedTensorInfo) {
  EXPECT_THAT(
      OpenError("dims", Header(1, 0).Str("blk.0.ffn_up.weight").U32(4).U64(64).U64(2).str()),
      HasSubstr(": tensor 'blk.0.ffn_up.weight': truncated: the dimension list needs 32 bytes at "
                "offset 55 but the file ends at 71"));
  EXPECT_THAT(OpenError("offset", Header(1, 0).Str("blk.0.w").U32(1).U64(32).U32(0).U32(0).str()),
              HasSubstr(": tensor 'blk.0.w': truncated: data offset needs 8 bytes at offset 55"));
}

std::string WithAlignment(const std::function<void(Bytes&)>& value) {
  Bytes b = Header(1, 1).Str("general.alignment");
  value(b);
  return b.TensorInfo("w", {4}, kGgmlF32, 0).PadTo(64).Zeros(64).str();
}

TEST(GgufErrorsTest, BadAlignment) {
  auto uint32 = [](uint32_t v) {
    return WithAlignment([v](Bytes& b) { b.Type(GgufType::kUint32).U32(v); });
  };
  EXPECT_THAT(OpenError("zero", uint32(0)),
              EndsWith(": metadata 'general.alignment' is uint32 0, expected a power of two below "
                       "2^32"));
  EXPECT_THAT(OpenError("48", uint32(48)), HasSubstr("'general.alignment' is uint32 48, expected"));
  EXPECT_THAT(
      OpenError("string", WithAlignment([](Bytes& b) { b.Type(GgufType::kString).Str("32"); })),
      HasSubstr("'general.alignment' is string \"32\", expected a power of two"));
  EXPECT_THAT(
      OpenError("negative", WithAlignment([](Bytes& b) { b.Type(GgufType::kInt32).U32(-32); })),
      HasSubstr("'general.alignment' is int32 -32, expected a power of two"));
  EXPECT_THAT(OpenError("2^32", WithAlignment([](Bytes& b) {
                          b.Type(GgufType::kUint64).U64(uint64_t{1} << 32);
                        })),
              HasSubstr("'general.alignment' is uint64 4294967296, expected a power of two"));
  // Other powers of two are fine, in any unsigned type; the data section moves with them.
  const std::string path = TempPath("alignment8.gguf");
  WriteStringToFile(path, Header(1, 1)
                              .Key("general.alignment", GgufType::kUint64)
                              .U64(8)
                              .TensorInfo("w", {4}, kGgmlF32, 0)
                              .PadTo(8)
                              .Zeros(16)
                              .str());
  const GgufFile file = GgufFile::Open(path);
  EXPECT_EQ(file.alignment(), 8u);
  EXPECT_EQ(file.data_offset(), 96u);  // 24 + 33 + 12 + 25, up to a multiple of 8
  std::filesystem::remove(path);
}

// ---------------------------------------------------------------------------------------------
// Every prefix and random corruptions of a valid file: an Error or a valid parse, nothing else.

std::string SmallValidFile() {
  const std::string path = TempPath("small_valid.gguf");
  const std::vector<int32_t> ints = {1, 2, 3};
  WriteGguf(path,
            {{"general.architecture", GgufValue::String("llama")},
             {"general.alignment", GgufValue::Uint32(16)},
             {"a.flag", GgufValue::Bool(true)},
             {"a.f", GgufValue::Float64(0.5)},
             {"tokens", GgufValue::StringArray({"a", "bb", ""})},
             {"nested", GgufValue::Array(GgufType::kArray, {GgufValue::Int32Array(ints)})}},
            {{"w", kGgmlQ8_0, {32, 2}}, {"b", kGgmlF32, {3}}},
            [](const GgufTensorDecl& d, std::vector<uint8_t>& bytes) {
              bytes.assign(d.name == "w" ? 68 : 12, 0x11);
            });
  std::string bytes = ReadFileToString(path);
  std::filesystem::remove(path);
  return bytes;
}

TEST(GgufErrorsTest, EveryTruncationFailsCleanly) {
  const std::string valid = SmallValidFile();
  const std::string path = TempPath("prefix.gguf");
  WriteStringToFile(path, valid);
  const GgufFile file = GgufFile::Open(path);
  // Past the last tensor's bytes only padding is cut, which the reader does not need.
  const GgufTensor& last = file.tensors().back();
  const size_t needed = file.data_offset() + last.offset + last.n_bytes;
  ASSERT_LT(needed, valid.size());
  for (size_t length = 0; length < valid.size(); ++length) {
    if (length < needed) {
      const std::string message =
          OpenError("prefix" + std::to_string(length), valid.substr(0, length));
      EXPECT_FALSE(message.empty()) << length;
    } else {
      WriteStringToFile(path, valid.substr(0, length));
      EXPECT_NO_THROW(GgufFile::Open(path)) << length;
    }
  }
  std::filesystem::remove(path);
}

TEST(GgufErrorsTest, RandomCorruptionsFailCleanly) {
  const std::string valid = SmallValidFile();
  // A new file per trial: rewriting one file makes ext4 flush it to disk at every close.
  const std::string dir = TempPath("corrupt");
  std::filesystem::create_directories(dir);
  std::mt19937 rng(1234);
  int opened = 0;
  int rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = valid;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly the header, metadata and tensor infos (the first 260 bytes), where parsing happens.
      const size_t at = rng() % std::min<size_t>(bytes.size(), 260);
      bytes[at] = static_cast<char>(rng() % 4 == 0 ? 0xff : rng());
    }
    const std::string path = dir + "/" + std::to_string(trial) + ".gguf";
    WriteStringToFile(path, bytes);
    try {
      const GgufFile file = GgufFile::Open(path);
      ++opened;
      for (const GgufKeyValue& kv : file.metadata()) kv.value.ToString();
    } catch (const Error& e) {
      ++rejected;
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(opened, 0);
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// A file from an independent writer: the GgufWriter of bench/llamacpp/gguf_from_safetensors.py.

TEST(GgufErrorsTest, ReadsThePythonWritersFile) {
  if (std::system("/usr/bin/python3 -c 'import numpy' > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs /usr/bin/python3 with numpy";
  }
  const std::string dir = TempPath("python");
  std::filesystem::create_directories(dir);
  const std::string script = dir + "/write.py";
  WriteStringToFile(script, R"(import sys
import numpy as np
sys.path.insert(0, sys.argv[1] + "/bench/llamacpp")
from gguf_from_safetensors import GgufWriter
x = (np.arange(3 * 64, dtype=np.float32).reshape(3, 64) - 90) / 16
y = (np.arange(2 * 48, dtype=np.float32).reshape(2, 48) - 40) / 8
b = np.arange(5, dtype=np.float32) * 0.5
w = GgufWriter("q8_0")
w.add("general.architecture", "llama")
w.add("general.alignment", 32)
w.add("llama.block_count", 2)
w.add("test.negative", -3)
w.add("llama.rope.freq_base", 10000.0)
w.add("test.flag", True)
w.add("tokenizer.ggml.tokens", ["a", "bc", "\u00fc"])
w.add("tokenizer.ggml.token_type", ("i32[]", [1, 2, 3]))
w.add("tokenizer.ggml.merges", [])
w.tensor("blk.0.ffn_up.weight", lambda: x, [3, 64])
w.tensor("blk.0.attn_k.weight", lambda: y, [2, 48])
w.tensor("output_norm.weight", lambda: b, [5])
w.write(sys.argv[2])
)");
  const std::string path = dir + "/python.gguf";
  const std::string command = "/usr/bin/python3 " + script + " " + MLARUN_SOURCE_DIR + " " + path;
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  const GgufFile file = GgufFile::Open(path);
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.Keys(),
            (std::vector<std::string_view>{
                "general.architecture", "general.alignment", "llama.block_count", "test.negative",
                "llama.rope.freq_base", "test.flag", "tokenizer.ggml.tokens",
                "tokenizer.ggml.token_type", "tokenizer.ggml.merges"}));
  EXPECT_EQ(file.GetString("general.architecture"), "llama");
  EXPECT_EQ(file.Find("general.alignment")->type(), GgufType::kUint32);
  EXPECT_EQ(file.GetUint("llama.block_count"), 2u);
  EXPECT_EQ(file.GetInt("test.negative"), -3);
  EXPECT_EQ(file.Find("llama.rope.freq_base")->type(), GgufType::kFloat32);
  EXPECT_EQ(file.GetFloat("llama.rope.freq_base"), 10000.0);
  EXPECT_TRUE(file.GetBool("test.flag"));
  EXPECT_EQ(file.GetStringArray("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"a", "bc", "\xc3\xbc"}));
  EXPECT_EQ(file.GetIntArray("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(file.GetStringArray("tokenizer.ggml.merges").empty());

  ASSERT_EQ(file.tensors().size(), 3u);
  const GgufTensor* q8 = file.FindTensor("blk.0.ffn_up.weight");
  ASSERT_NE(q8, nullptr);
  EXPECT_EQ(q8->ggml_type, kGgmlQ8_0);
  EXPECT_EQ(q8->ne, (std::vector<int64_t>{64, 3}));
  ASSERT_EQ(q8->n_bytes, 6u * 34);
  for (int block = 0; block < 6; ++block) {  // f16 scale d, 32 int8 q: x ~ d q
    const uint8_t* p = q8->data + 34 * block;
    const float d = F16ToF32(static_cast<uint16_t>(p[0] | p[1] << 8));
    for (int i = 0; i < 32; ++i) {
      const float x = static_cast<float>(32 * block + i - 90) / 16;
      // Half a step, plus the scale's f16 rounding (the quants were rounded with the f32 scale).
      EXPECT_NEAR(d * static_cast<int8_t>(p[2 + i]), x, d * (0.5f + 127.0f / 1024)) << block;
    }
  }
  const GgufTensor* bf16 = file.FindTensor("blk.0.attn_k.weight");
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(bf16->ggml_type, kGgmlBF16);
  EXPECT_EQ(bf16->ne, (std::vector<int64_t>{48, 2}));
  ASSERT_EQ(bf16->n_bytes, 96u * 2);
  for (int i = 0; i < 96; ++i) {  // (i - 40) / 8 is exact in bf16
    const auto bits = static_cast<uint16_t>(bf16->data[2 * i] | bf16->data[2 * i + 1] << 8);
    EXPECT_EQ(BF16ToF32(bits), static_cast<float>(i - 40) / 8) << i;
  }
  const GgufTensor* f32 = file.FindTensor("output_norm.weight");
  ASSERT_NE(f32, nullptr);
  EXPECT_EQ(f32->ggml_type, kGgmlF32);
  EXPECT_EQ(f32->ShapeString(), "[5]");
  for (int i = 0; i < 5; ++i) {
    float v;
    std::memcpy(&v, f32->data + 4 * i, 4);
    EXPECT_EQ(v, 0.5f * i);
  }
  for (const GgufTensor& t : file.tensors()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 32, 0u) << t.name;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mlarun
