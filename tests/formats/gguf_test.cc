// GGUF reader and writer: round trips through every metadata type (nested arrays included) and
// several tensor types, with the default and a larger alignment, as version 3 and 2; values and
// the typed getters; a 150k-token vocabulary; the writer's errors. Malformed files are in
// gguf_errors_test.cc.
#include "formats/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "formats/gguf_test_util.h"

namespace mlarun {
namespace {

using test::Header;
using test::TempPath;
using ::testing::HasSubstr;

// ---------------------------------------------------------------------------------------------
// Round trip

std::vector<GgufKeyValue> SampleMetadata() {
  const std::vector<float> scores = {0.0f, -1.5f, 2.25f, 1e-30f};
  const std::vector<int32_t> token_types = {1, 3, -7, 2147483647};
  const std::vector<uint64_t> big = {0, 18446744073709551615ull};
  const std::vector<double> doubles = {3.141592653589793, -0.0};
  const std::vector<int32_t> one_two_three = {1, 2, 3};
  const std::vector<float> half = {0.5f};
  return {
      {"general.architecture", GgufValue::String("llama")},
      {"general.name", GgufValue::String(std::string("nul\0inside \xc3\xbc", 13))},
      {"general.empty", GgufValue::String("")},
      {"test.uint8", GgufValue::Unsigned(GgufType::kUint8, 200)},
      {"test.int8", GgufValue::Signed(GgufType::kInt8, -100)},
      {"test.uint16", GgufValue::Unsigned(GgufType::kUint16, 60000)},
      {"test.int16", GgufValue::Signed(GgufType::kInt16, -30000)},
      {"test.uint32", GgufValue::Uint32(4000000000u)},
      {"test.int32", GgufValue::Int32(-2000000000)},
      {"test.float32", GgufValue::Float32(0.1f)},
      {"test.bool", GgufValue::Bool(true)},
      {"test.uint64", GgufValue::Uint64(9223372036854775813ull)},
      {"test.int64", GgufValue::Int64(-4611686018427387904ll)},
      {"test.float64", GgufValue::Float64(2.718281828459045)},
      {"tokenizer.ggml.tokens", GgufValue::StringArray({"<s>", "hello", "", "\xc3\xbc"})},
      {"tokenizer.ggml.scores", GgufValue::Float32Array(scores)},
      {"tokenizer.ggml.token_type", GgufValue::Int32Array(token_types)},
      {"test.uint64s", GgufValue::Uint64Array(big)},
      {"test.float64s", GgufValue::Float64Array(doubles)},
      {"test.bools",
       GgufValue::Array(GgufType::kBool, {GgufValue::Bool(false), GgufValue::Bool(true)})},
      {"test.uint8s",
       GgufValue::Array(GgufType::kUint8, {GgufValue::Unsigned(GgufType::kUint8, 0),
                                           GgufValue::Unsigned(GgufType::kUint8, 255)})},
      {"test.int16s",
       GgufValue::Array(GgufType::kInt16, {GgufValue::Signed(GgufType::kInt16, -1)})},
      {"test.empty", GgufValue::Array(GgufType::kFloat32, {})},
      // Arrays of arrays, of differing element types and lengths, nested three deep.
      {"test.nested",
       GgufValue::Array(GgufType::kArray,
                        {GgufValue::Int32Array(one_two_three), GgufValue::Int32Array({}),
                         GgufValue::StringArray({"x", "yz"}),
                         GgufValue::Array(GgufType::kArray, {GgufValue::Float32Array(half)})})},
  };
}

struct SampleTensor {
  GgufTensorDecl decl;
  size_t n_bytes;
};

std::vector<SampleTensor> SampleTensors() {
  return {
      {{"token_embd.weight", kGgmlF32, {8, 3}}, 8 * 3 * 4},
      {{"output_norm.weight", kGgmlF32, {5}}, 20},  // not a multiple of the alignment
      {{"blk.0.attn_q.weight", kGgmlF16, {64, 2}}, 64 * 2 * 2},
      {{"blk.0.ffn_up.weight", kGgmlQ8_0, {64, 3}}, 2 * 34 * 3},
      {{"blk.0.ffn_down.weight", kGgmlQ4_K, {256, 2, 1, 2}}, 144 * 4},
      {{"blk.0.attn_k.weight", kGgmlBF16, {3, 1, 7}}, 3 * 7 * 2},
  };
}

// The bytes of tensor `index` of SampleTensors: a pattern that differs per tensor.
std::vector<uint8_t> SampleBytes(size_t index, size_t n_bytes) {
  std::vector<uint8_t> bytes(n_bytes);
  for (size_t j = 0; j < n_bytes; ++j) bytes[j] = static_cast<uint8_t>(j * 31 + index * 7 + 1);
  return bytes;
}

void WriteSample(const std::string& path, std::vector<GgufKeyValue> metadata) {
  std::vector<GgufTensorDecl> decls;
  for (const SampleTensor& t : SampleTensors()) decls.push_back(t.decl);
  size_t next = 0;
  WriteGguf(path, metadata, decls, [&](const GgufTensorDecl& d, std::vector<uint8_t>& bytes) {
    // Called once per tensor, in the declared order.
    ASSERT_LT(next, decls.size());
    EXPECT_EQ(d.name, decls[next].name);
    bytes = SampleBytes(next, SampleTensors()[next].n_bytes);
    ++next;
  });
  EXPECT_EQ(next, decls.size());
}

void ExpectSample(const GgufFile& file, const std::vector<GgufKeyValue>& metadata,
                  uint32_t alignment) {
  EXPECT_EQ(file.alignment(), alignment);
  EXPECT_EQ(file.data_offset() % alignment, 0u);
  ASSERT_EQ(file.metadata().size(), metadata.size());
  std::vector<std::string_view> keys;
  for (size_t i = 0; i < metadata.size(); ++i) {
    EXPECT_EQ(file.metadata()[i].key, metadata[i].key);
    EXPECT_EQ(file.metadata()[i].value, metadata[i].value)
        << metadata[i].key << ": " << file.metadata()[i].value.ToString();
    const GgufValue* found = file.Find(metadata[i].key);
    ASSERT_NE(found, nullptr) << metadata[i].key;
    EXPECT_EQ(*found, metadata[i].value);
    keys.push_back(metadata[i].key);
  }
  EXPECT_EQ(file.Keys(), keys);
  EXPECT_EQ(file.Find("no.such.key"), nullptr);

  const std::vector<SampleTensor> expected = SampleTensors();
  ASSERT_EQ(file.tensors().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const GgufTensor& t = file.tensors()[i];
    const GgufTensorDecl& d = expected[i].decl;
    EXPECT_EQ(t.name, d.name);
    EXPECT_EQ(file.FindTensor(d.name), &t);
    EXPECT_EQ(t.ggml_type, d.ggml_type) << d.name;
    ASSERT_NE(t.format, nullptr) << d.name;
    EXPECT_EQ(t.format->ggml_type, d.ggml_type) << d.name;
    EXPECT_EQ(t.ne, d.ne) << d.name;
    EXPECT_EQ(t.offset % alignment, 0u) << d.name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % alignment, 0u) << d.name;
    EXPECT_EQ(t.data, file.tensors()[0].data + (t.offset - file.tensors()[0].offset)) << d.name;
    ASSERT_EQ(t.n_bytes, expected[i].n_bytes) << d.name;
    const std::vector<uint8_t> bytes = SampleBytes(i, t.n_bytes);
    EXPECT_EQ(std::memcmp(t.data, bytes.data(), t.n_bytes), 0) << d.name;
  }
  EXPECT_EQ(file.FindTensor("blk.1.ffn_up.weight"), nullptr);
}

TEST(GgufTest, RoundTripWithDefaultAlignment) {
  const std::string path = TempPath("round_trip.gguf");
  const std::vector<GgufKeyValue> metadata = SampleMetadata();
  WriteSample(path, metadata);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  for (FileLoad load : {FileLoad::kMmap, FileLoad::kCopy}) {
    const GgufFile file = GgufFile::Open(path, load);
    EXPECT_EQ(file.path(), path);
    EXPECT_EQ(file.version(), 3u);
    EXPECT_EQ(file.MappedBytes(), std::filesystem::file_size(path));
    ExpectSample(file, metadata, 32);
  }
  // Every tensor is padded to the alignment, the last one too.
  EXPECT_EQ(std::filesystem::file_size(path) % 32, 0u);

  const GgufFile file = GgufFile::Open(path);
  const GgufTensor* q4k = file.FindTensor("blk.0.ffn_down.weight");
  ASSERT_NE(q4k, nullptr);
  EXPECT_EQ(q4k->ShapeString(), "[256, 2, 1, 2]");
  EXPECT_EQ(q4k->NumElements(), 1024);
  EXPECT_EQ(q4k->format->name, "Q4_K");
  file.ReleasePages(q4k->data, q4k->n_bytes);  // still readable afterwards (page cache)
  EXPECT_EQ(q4k->data[0], SampleBytes(4, 1)[0]);
  std::filesystem::remove(path);
}

TEST(GgufTest, RoundTripWithAlignmentFromMetadata) {
  const std::string path = TempPath("aligned64.gguf");
  std::vector<GgufKeyValue> metadata = SampleMetadata();
  metadata.insert(metadata.begin() + 1, {"general.alignment", GgufValue::Uint32(64)});
  WriteSample(path, metadata);
  const GgufFile file = GgufFile::Open(path);
  ExpectSample(file, metadata, 64);
  EXPECT_EQ(std::filesystem::file_size(path) % 64, 0u);
  std::filesystem::remove(path);
}

TEST(GgufTest, ReadsVersion2) {
  // Versions 2 and 3 share the layout (3 only allows big-endian files).
  const std::string path = TempPath("version2.gguf");
  const std::vector<GgufKeyValue> metadata = SampleMetadata();
  WriteSample(path, metadata);
  std::string bytes = ReadFileToString(path);
  ASSERT_EQ(bytes[4], 3);
  bytes[4] = 2;
  WriteStringToFile(path, bytes);
  const GgufFile file = GgufFile::Open(path);
  EXPECT_EQ(file.version(), 2u);
  ExpectSample(file, metadata, 32);
  std::filesystem::remove(path);
}

TEST(GgufTest, FileWithoutTensorsOrMetadata) {
  const std::string path = TempPath("empty.gguf");
  WriteGguf(path, {}, {}, [](const GgufTensorDecl&, std::vector<uint8_t>&) {});
  EXPECT_EQ(std::filesystem::file_size(path), 32u);  // the 24-byte header, padded
  const GgufFile file = GgufFile::Open(path);
  EXPECT_TRUE(file.metadata().empty());
  EXPECT_TRUE(file.tensors().empty());
  // Without padding after the header, too.
  WriteStringToFile(path, Header(0, 0).str());
  EXPECT_TRUE(GgufFile::Open(path).tensors().empty());
  std::filesystem::remove(path);
}

// ---------------------------------------------------------------------------------------------
// Values and typed getters

TEST(GgufTest, ValueConversions) {
  EXPECT_EQ(GgufValue::Int32(-1).AsUint(), std::nullopt);
  EXPECT_EQ(GgufValue::Int32(7).AsUint(), 7u);
  EXPECT_EQ(GgufValue::Uint64(~uint64_t{0}).AsInt(), std::nullopt);
  EXPECT_EQ(GgufValue::Uint64(5).AsInt(), 5);
  EXPECT_EQ(GgufValue::Unsigned(GgufType::kUint16, 65535).AsFloat(), 65535.0);
  EXPECT_EQ(GgufValue::Float32(0.1f).AsFloat(), static_cast<double>(0.1f));
  EXPECT_EQ(GgufValue::Float32(0.1f).AsInt(), std::nullopt);
  EXPECT_EQ(GgufValue::Bool(true).AsBool(), true);
  EXPECT_EQ(GgufValue::Bool(true).AsUint(), std::nullopt);
  EXPECT_EQ(GgufValue::Uint32(1).AsBool(), std::nullopt);
  EXPECT_EQ(GgufValue::String("a").AsUint(), std::nullopt);
  EXPECT_EQ(*GgufValue::String("a").AsString(), "a");
  EXPECT_EQ(GgufValue::Uint32(1).AsString(), nullptr);

  const std::vector<int32_t> ints = {1, -2, 3};
  const GgufValue array = GgufValue::Int32Array(ints);
  EXPECT_EQ(array.TypeString(), "array[int32]");
  EXPECT_EQ(array.size(), 3u);
  EXPECT_EQ(array.Element(1), GgufValue::Int32(-2));
  EXPECT_EQ(array.AsIntVector(), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(array.AsFloatVector(), (std::vector<float>{1, -2, 3}));
  EXPECT_EQ(array.ToString(2), "[1, -2, ... (3 int32s)]");
  EXPECT_EQ(array.AsUint(), std::nullopt);
  EXPECT_EQ(GgufValue::StringArray({"a"}).AsIntVector(), std::nullopt);
  EXPECT_EQ(GgufValue::Uint64Array(std::vector<uint64_t>{~uint64_t{0}}).AsIntVector(),
            std::nullopt);
  const GgufValue nested = GgufValue::Array(GgufType::kArray, {GgufValue::StringArray({"a", "b"})});
  EXPECT_EQ(nested.TypeString(), "array[array[string]]");
  EXPECT_EQ(nested.ToString(), "[[\"a\", \"b\"]]");
  EXPECT_EQ(nested.arrays().at(0).strings(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(nested.AsFloatVector(), std::nullopt);
  EXPECT_EQ(GgufValue::Bool(false).ToString(), "false");
  EXPECT_EQ(GgufValue::Float64(-1.5).ToString(), "-1.5");
}

TEST(GgufTest, TypedGetters) {
  const std::string path = TempPath("getters.gguf");
  std::vector<GgufKeyValue> metadata = SampleMetadata();
  metadata.push_back({"test.negative", GgufValue::Int32(-3)});
  WriteSample(path, metadata);
  const GgufFile f = GgufFile::Open(path);
  EXPECT_EQ(f.GetString("general.architecture"), "llama");
  EXPECT_EQ(f.GetUint("test.uint8"), 200u);
  EXPECT_EQ(f.GetUint("test.uint32"), 4000000000u);
  EXPECT_EQ(f.GetUint("test.uint64"), 9223372036854775813ull);
  EXPECT_EQ(f.GetInt("test.int8"), -100);
  EXPECT_EQ(f.GetInt("test.uint16"), 60000);
  EXPECT_EQ(f.GetInt("test.int64"), -4611686018427387904ll);
  EXPECT_FLOAT_EQ(f.GetFloat("test.float32"), 0.1f);
  EXPECT_EQ(f.GetFloat("test.float64"), 2.718281828459045);
  EXPECT_EQ(f.GetFloat("test.int16"), -30000.0);
  EXPECT_TRUE(f.GetBool("test.bool"));
  EXPECT_EQ(f.GetStringArray("tokenizer.ggml.tokens"),
            (std::vector<std::string>{"<s>", "hello", "", "\xc3\xbc"}));
  EXPECT_EQ(f.GetIntArray("tokenizer.ggml.token_type"),
            (std::vector<int64_t>{1, 3, -7, 2147483647}));
  EXPECT_EQ(f.GetFloatArray("tokenizer.ggml.scores"),
            (std::vector<float>{0.0f, -1.5f, 2.25f, 1e-30f}));
  EXPECT_EQ(f.GetFloatArray("tokenizer.ggml.token_type"),
            (std::vector<float>{1, 3, -7, 2147483648.0f}));

  // Optional variants: absent -> empty; present of the wrong type -> still an error.
  EXPECT_EQ(f.FindUint("no.such.key"), std::nullopt);
  EXPECT_EQ(f.FindInt("no.such.key"), std::nullopt);
  EXPECT_EQ(f.FindFloat("no.such.key"), std::nullopt);
  EXPECT_EQ(f.FindBool("no.such.key"), std::nullopt);
  EXPECT_EQ(f.FindString("no.such.key"), nullptr);
  EXPECT_EQ(f.FindStringArray("no.such.key"), nullptr);
  EXPECT_EQ(f.FindIntArray("no.such.key"), std::nullopt);
  EXPECT_EQ(f.FindFloatArray("no.such.key"), std::nullopt);
  EXPECT_EQ(f.FindUint("test.uint16"), 60000u);
  EXPECT_EQ(*f.FindString("general.empty"), "");

  auto expect_error = [&](auto get, const std::string& key, const std::string& what) {
    try {
      get();
      ADD_FAILURE() << key << ": no error";
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
      EXPECT_THAT(message, HasSubstr("'" + key + "'"));
      EXPECT_THAT(message, HasSubstr(what));
      EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    }
  };
  expect_error([&] { f.GetUint("no.such.key"); }, "no.such.key", "is missing");
  expect_error([&] { f.GetString("no.such.key"); }, "no.such.key", "is missing");
  expect_error([&] { f.GetFloatArray("no.such.key"); }, "no.such.key", "is missing");
  expect_error([&] { f.GetUint("test.negative"); }, "test.negative",
               "is int32 -3, expected a non-negative integer");
  expect_error([&] { f.FindUint("general.architecture"); }, "general.architecture",
               "is string \"llama\", expected a non-negative integer");
  expect_error([&] { f.GetInt("test.uint64s"); }, "test.uint64s", "is array[uint64]");
  expect_error([&] { f.GetFloat("test.bool"); }, "test.bool", "expected a number");
  expect_error([&] { f.GetIntArray("test.bools"); }, "test.bools", "is array[bool] [false, true]");
  expect_error([&] { f.GetBool("test.uint8"); }, "test.uint8", "expected a bool");
  expect_error([&] { f.GetString("test.uint8"); }, "test.uint8", "expected a string");
  expect_error([&] { f.GetStringArray("tokenizer.ggml.scores"); }, "tokenizer.ggml.scores",
               "expected an array of strings");
  expect_error([&] { f.GetIntArray("tokenizer.ggml.scores"); }, "tokenizer.ggml.scores",
               "expected an array of integers");
  expect_error([&] { f.GetIntArray("test.uint64s"); }, "test.uint64s",
               "expected an array of integers that fit int64");
  expect_error([&] { f.GetFloatArray("tokenizer.ggml.tokens"); }, "tokenizer.ggml.tokens",
               "expected an array of numbers");
  expect_error([&] { f.GetInt("test.uint64"); }, "test.uint64", "expected an integer that fits");
  std::filesystem::remove(path);
}

TEST(GgufTest, LargeVocabularyParsesQuickly) {
  // A 150k-token vocabulary with scores and types, as tokenizer metadata holds it.
  constexpr int kTokens = 150000;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int i = 0; i < kTokens; ++i) {
    tokens.push_back("token_" + std::to_string(i) + (i % 3 ? "" : " with a longer tail"));
    scores.push_back(-static_cast<float>(i));
    types.push_back(i % 5);
  }
  const std::string path = TempPath("vocab.gguf");
  WriteGguf(path,
            {{"tokenizer.ggml.tokens", GgufValue::StringArray(tokens)},
             {"tokenizer.ggml.scores", GgufValue::Float32Array(scores)},
             {"tokenizer.ggml.token_type", GgufValue::Int32Array(types)}},
            {}, [](const GgufTensorDecl&, std::vector<uint8_t>&) {});
  const std::clock_t start = std::clock();  // CPU time: robust to a loaded machine
  const GgufFile file = GgufFile::Open(path);
  const std::vector<std::string>& read = file.GetStringArray("tokenizer.ggml.tokens");
  const std::vector<float> read_scores = file.GetFloatArray("tokenizer.ggml.scores");
  const double seconds = static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
  EXPECT_EQ(read, tokens);
  EXPECT_EQ(read_scores, scores);
  EXPECT_EQ(file.GetIntArray("tokenizer.ggml.token_type").at(kTokens - 1), (kTokens - 1) % 5);
  EXPECT_LT(seconds, 0.25) << "parsing took " << seconds << " s of CPU time";
  std::filesystem::remove(path);
}

// ---------------------------------------------------------------------------------------------
// Writer errors: an Error naming the file and key or tensor, and no file left behind.

void ExpectWriteError(const std::string& name, const std::vector<GgufKeyValue>& metadata,
                      const std::vector<GgufTensorDecl>& decls,
                      const std::function<void(const GgufTensorDecl&, std::vector<uint8_t>&)>& fill,
                      const std::string& expected, bool names_file = true) {
  const std::string path = TempPath(name);
  try {
    WriteGguf(path, metadata, decls, fill);
    ADD_FAILURE() << name << ": written without an error";
  } catch (const Error& e) {
    const std::string message = e.what();
    if (names_file) {  // errors thrown by `fill` itself pass unchanged
      EXPECT_THAT(message, HasSubstr(path));
    }
    EXPECT_THAT(message, HasSubstr(expected));
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << name;
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp")) << name;
}

TEST(GgufTest, WriterRejectsInvalidDeclarationsAndLeavesNoFile) {
  auto fill_exact = [](const GgufTensorDecl& d, std::vector<uint8_t>& bytes) {
    bytes.assign(static_cast<size_t>(d.ne[0]) * 4, 0);  // F32 vectors only
  };
  ExpectWriteError("dup_key.gguf", {{"a", GgufValue::Uint32(1)}, {"a", GgufValue::Uint32(2)}}, {},
                   fill_exact, "metadata key 'a' is given twice");
  ExpectWriteError("bad_alignment.gguf", {{"general.alignment", GgufValue::Uint32(48)}}, {},
                   fill_exact, "'general.alignment' is uint32 48, expected a power of two");
  ExpectWriteError("string_alignment.gguf", {{"general.alignment", GgufValue::String("32")}}, {},
                   fill_exact, "'general.alignment' is string");
  ExpectWriteError("dup_tensor.gguf", {}, {{"w", kGgmlF32, {4}}, {"w", kGgmlF32, {4}}}, fill_exact,
                   "tensor 'w': the name is given twice");
  ExpectWriteError("bad_row.gguf", {}, {{"q", kGgmlQ8_0, {48, 2}}}, fill_exact,
                   "tensor 'q': row length ne[0] = 48 is not a multiple of the 32 values of a "
                   "Q8_0 block");
  ExpectWriteError("bad_type.gguf", {}, {{"t", 4, {32}}}, fill_exact,
                   "tensor 't': unknown ggml type id 4 (Q4_2");
  ExpectWriteError("no_dims.gguf", {}, {{"t", kGgmlF32, {}}}, fill_exact, "n_dims is 0");
  ExpectWriteError("five_dims.gguf", {}, {{"t", kGgmlF32, {1, 1, 1, 1, 1}}}, fill_exact,
                   "n_dims is 5");
  ExpectWriteError("zero_dim.gguf", {}, {{"t", kGgmlF32, {4, 0}}}, fill_exact,
                   "dimension ne[1] is 0");
  ExpectWriteError(
      "short_fill.gguf", {}, {{"a", kGgmlF32, {4}}, {"b", kGgmlF32, {8}}},
      [](const GgufTensorDecl& d, std::vector<uint8_t>& bytes) {
        bytes.assign(d.name == "b" ? 31 : 16, 0);
      },
      "tensor 'b' was filled with 31 bytes, its shape [8] of F32 has 32");
  ExpectWriteError(
      "throwing_fill.gguf", {}, {{"a", kGgmlF32, {4}}},
      [](const GgufTensorDecl&, std::vector<uint8_t>&) { throw Error("cannot quantize 'a'"); },
      "cannot quantize 'a'", /*names_file=*/false);
}

TEST(GgufTest, FailedWriteKeepsThePreviousFile) {
  const std::string path = TempPath("keep.gguf");
  WriteSample(path, SampleMetadata());
  const std::string before = ReadFileToString(path);
  EXPECT_THROW(WriteGguf(path, {}, {{"a", kGgmlF32, {4}}},
                         [](const GgufTensorDecl&, std::vector<uint8_t>& bytes) { bytes = {1}; }),
               Error);
  EXPECT_EQ(ReadFileToString(path), before);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace mlarun
