// Bad checkpoints give one clear error naming the file and tensor; never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/dtype.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "kernels/kernel_table.h"
#include "model/checkpoint_writer.h"
#include "model/model.h"
#include "model/quantize.h"
#include "model/safetensors.h"
#include "model/synthetic.h"
#include "model/test_models.h"

namespace mlarun {
namespace {

namespace fs = std::filesystem;

std::string LoadError(const std::string& dir) {
  try {
    Model::Load(dir);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Copies a generated model (tiny-v2-lite unless told) into a fresh directory for corruption.
std::string CopyModel(const std::string& name, const std::string& preset = "tiny-v2-lite",
                      DType dtype = DType::kF32) {
  const std::string src = testing::MakeTestModel(preset, dtype);
  const std::string dst = ::testing::TempDir() + "/broken_" + name;
  fs::remove_all(dst);
  fs::create_directories(dst);
  fs::copy(src, dst, fs::copy_options::recursive);
  return dst;
}

// The same for tiny-v3 stored in FP8 (E4M3 with block scales).
std::string CopyFp8Model(const std::string& name) {
  return CopyModel(name, "tiny-v3", DType::kF8E4M3);
}

using testing::EditTensor;
using testing::RewriteTensors;

TEST(LoaderErrorsTest, MissingWeightsFile) {
  const std::string dir = CopyModel("missing");
  fs::remove(dir + "/model.safetensors");
  EXPECT_EQ(LoadError(dir), dir + ": no model.safetensors or model.safetensors.index.json");
}

TEST(LoaderErrorsTest, TruncatedFile) {
  const std::string dir = CopyModel("truncated");
  const std::string path = dir + "/model.safetensors";
  fs::resize_file(path, fs::file_size(path) - 1000);
  const std::string error = LoadError(dir);
  EXPECT_NE(error.find(path + ": tensor '"), std::string::npos) << error;
  EXPECT_NE(error.find("truncated file?"), std::string::npos) << error;
  fs::resize_file(path, 5);
  EXPECT_EQ(LoadError(dir), path + ": truncated safetensors file (5 bytes)");
}

TEST(LoaderErrorsTest, GarbageHeader) {
  const std::string dir = CopyModel("garbage");
  const std::string path = dir + "/model.safetensors";
  std::string bytes = ReadFileToString(path);
  bytes.replace(8, 10, "!!garbage!");
  WriteStringToFile(path, bytes);
  EXPECT_NE(LoadError(dir).find(path + ": safetensors header is not valid JSON"),
            std::string::npos);
  // A header size larger than the file.
  bytes[0] = '\xff';
  bytes[5] = '\x01';
  WriteStringToFile(path, bytes);
  EXPECT_NE(LoadError(dir).find("exceeds the file size"), std::string::npos);
}

TEST(LoaderErrorsTest, WrongShapeNamesTensor) {
  const std::string dir = CopyModel("shape");
  EditTensor(dir, "model.layers.1.self_attn.kv_b_proj.weight",
             [](TensorToWrite& t) { std::swap(t.shape[0], t.shape[1]); });
  EXPECT_EQ(LoadError(dir),
            dir +
                "/model.safetensors: tensor 'model.layers.1.self_attn.kv_b_proj.weight'"
                " has shape [32, 128], expected [128, 32]");
}

TEST(LoaderErrorsTest, WrongDtypeNamesTensor) {
  const std::string dir = CopyModel("dtype");
  EditTensor(dir, "model.norm.weight", [](TensorToWrite& t) { t.dtype = DType::kI32; });
  EXPECT_EQ(LoadError(dir),
            dir + "/model.safetensors: tensor 'model.norm.weight' has unsupported dtype I32");
}

TEST(LoaderErrorsTest, MissingTensorNamesIt) {
  const std::string dir = CopyModel("missing_tensor");
  RewriteTensors(dir, [](std::vector<TensorToWrite>& tensors) {
    std::erase_if(tensors, [](const TensorToWrite& t) { return t.name == "lm_head.weight"; });
  });
  EXPECT_EQ(LoadError(dir), dir + ": tensor 'lm_head.weight' is missing");
}

TEST(LoaderErrorsTest, MissingConfigField) {
  const std::string dir = CopyModel("config");
  std::string config = ReadFileToString(dir + "/config.json");
  const size_t at = config.find("\"qk_rope_head_dim\"");
  config.replace(at, std::string("\"qk_rope_head_dim\"").size(), "\"renamed_field\"");
  WriteStringToFile(dir + "/config.json", config);
  EXPECT_EQ(LoadError(dir), dir + "/config.json: field 'qk_rope_head_dim' is missing");
}

TEST(LoaderErrorsTest, Fp8WithoutScalesNamesTheScaleTensor) {
  const std::string dir = CopyFp8Model("fp8");
  RewriteTensors(dir, [](std::vector<TensorToWrite>& tensors) {
    std::erase_if(tensors, [](const TensorToWrite& t) {
      return t.name == "model.layers.0.self_attn.q_a_proj.weight_scale_inv";
    });
  });
  EXPECT_EQ(LoadError(dir),
            dir + ": tensor 'model.layers.0.self_attn.q_a_proj.weight_scale_inv' is missing");
}

TEST(LoaderErrorsTest, Fp8ScaleThatIsNotFiniteNamesTensorAndBlock) {
  const std::string dir = CopyFp8Model("fp8_scale");
  const std::string name = "model.layers.1.mlp.experts.2.up_proj.weight_scale_inv";
  EditTensor(dir, name, [](TensorToWrite& t) {
    const float inf = INFINITY;
    std::memcpy(t.data.data(), &inf, sizeof(inf));
  });
  const std::string error = LoadError(dir);
  EXPECT_NE(error.find("model.safetensors: tensor '" + name + "' holds inf at [0, 0]"),
            std::string::npos)
      << error;
}

TEST(LoaderErrorsTest, Int8QuantisationOfANanWeightNamesTensorAndPosition) {
  const std::string dir = CopyModel("nan_weight");
  const std::string name = "model.layers.1.mlp.experts.2.down_proj.weight";
  int64_t cols = 0;
  EditTensor(dir, name, [&](TensorToWrite& t) {
    ASSERT_EQ(t.dtype, DType::kF32);
    cols = t.shape[1];
    const float nan = NAN;
    std::memcpy(t.data.data() + (3 * cols + 5) * sizeof(float), &nan, sizeof(nan));
    const float inf = -INFINITY;  // a later row: the error names the first
    std::memcpy(t.data.data() + (7 * cols + 1) * sizeof(float), &inf, sizeof(inf));
  });
  ASSERT_GT(cols, 5);
  EXPECT_EQ(LoadError(dir), "");  // as loaded (f32), the values are passed through
  std::string error;
  try {
    Model::Load(dir, {.weights = WeightFormat::kInt8});
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_EQ(error, dir + ": tensor '" + name +
                       "' holds NaN at [3, 5]: it cannot be quantised to int8 (--weights int8)");
  // `mlarun quantize` (int8 and bf16) stops at the same weight and leaves no weights file.
  const std::string out = ::testing::TempDir() + "/nan_weight_quantized";
  fs::remove_all(out);
  for (WeightFormat format : {WeightFormat::kInt8, WeightFormat::kBf16}) {
    std::string written_error;
    try {
      WriteConvertedCheckpoint(dir, out, {.weights = format});
    } catch (const Error& e) {
      written_error = e.what();
    }
    if (format == WeightFormat::kInt8) {
      EXPECT_EQ(written_error, error);
    } else {
      // bf16's message: "... holds NaN at [3, 5]: weights must be finite ...".
      EXPECT_EQ(written_error.rfind(error.substr(0, error.find(": it cannot")), 0), 0u)
          << written_error;
    }
    EXPECT_FALSE(fs::exists(out + "/model.safetensors"));
    EXPECT_FALSE(fs::exists(out + "/model.safetensors.partial"));
    EXPECT_FALSE(fs::exists(out + "/config.json"));
  }
}

// A copying load: the archive copies the files (pack_16bit false), or the matrices are packed
// (16-bit ones) or copied (the others) from the mapped files one by one.
// The message of a refused non-finite weight.
std::string NonFiniteError(const std::string& dir, const std::string& tensor,
                           const std::string& what) {
  std::string message = dir;
  message.append(": tensor '").append(tensor).append("' holds ").append(what);
  return message.append(": weights must be finite (`--load mmap` skips this check)");
}

std::string CopyLoadError(const std::string& dir, bool pack_16bit,
                          const KernelTable* kernels = nullptr) {
  ModelLoadOptions options;
  options.file_load = FileLoad::kCopy;
  options.pack_16bit = pack_16bit;
  options.kernels = kernels;
  try {
    Model::Load(dir, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A copying load (bench's and serve's default) refuses NaN and inf weights, naming the tensor and
// the first position in row order; a mapped load stays instant and passes them through.
TEST(LoaderErrorsTest, CopyLoadRefusesNonFiniteWeightsNamingTensorAndPosition) {
  const std::string dir = CopyModel("nonfinite_f32");
  const std::string name = "model.layers.1.mlp.experts.2.down_proj.weight";
  EditTensor(dir, name, [](TensorToWrite& t) {
    ASSERT_EQ(t.dtype, DType::kF32);
    const int64_t cols = t.shape[1];
    const float inf = -INFINITY;
    std::memcpy(t.data.data() + (7 * cols + 1) * sizeof(float), &inf, sizeof(inf));
    const float nan = NAN;  // an earlier row: the error names this one
    std::memcpy(t.data.data() + (3 * cols + 5) * sizeof(float), &nan, sizeof(nan));
  });
  EXPECT_EQ(LoadError(dir), "");
  for (bool pack : {false, true}) {
    EXPECT_EQ(CopyLoadError(dir, pack), NonFiniteError(dir, name, "NaN at [3, 5]")) << pack;
  }
}

TEST(LoaderErrorsTest, CopyLoadRefusesInfInABf16MatrixAndNanInANorm) {
  const std::string dir = CopyModel("nonfinite_bf16");
  const std::string matrix = "model.layers.0.self_attn.o_proj.weight";
  EditTensor(dir, matrix, [](TensorToWrite& t) {
    // The matrix stored as bf16, with +inf at [2, 9].
    const int64_t n = static_cast<int64_t>(t.data.size() / sizeof(float));
    std::vector<uint8_t> bf16(static_cast<size_t>(n) * 2);
    for (int64_t i = 0; i < n; ++i) {
      float v = 0;
      std::memcpy(&v, t.data.data() + i * 4, 4);
      const uint16_t b = i == 2 * t.shape[1] + 9 ? uint16_t{0x7f80} : F32ToBF16(v);
      std::memcpy(bf16.data() + i * 2, &b, 2);
    }
    t.dtype = DType::kBF16;
    t.data = std::move(bf16);
  });
  EXPECT_EQ(LoadError(dir), "");
  for (bool pack : {false, true}) {
    EXPECT_EQ(CopyLoadError(dir, pack), NonFiniteError(dir, matrix, "inf at [2, 9]")) << pack;
  }
  // A NaN in the final norm (a vector: one index) is found too once the matrix is finite.
  RewriteTensors(dir, [&](std::vector<TensorToWrite>& tensors) {
    for (TensorToWrite& t : tensors) {
      if (t.name == matrix) std::memset(t.data.data() + (2 * t.shape[1] + 9) * 2, 0, 2);
      if (t.name != "model.norm.weight") continue;
      const float nan = NAN;
      std::memcpy(t.data.data() + 4 * sizeof(float), &nan, sizeof(nan));
    }
  });
  for (bool pack : {false, true}) {
    EXPECT_EQ(CopyLoadError(dir, pack),
              dir +
                  ": tensor 'model.norm.weight' holds NaN at [4]: weights must be finite "
                  "(`--load mmap` skips this check)")
        << pack;
  }
  // Once every weight is finite the same loads succeed.
  EditTensor(dir, "model.norm.weight",
             [](TensorToWrite& t) { std::memset(t.data.data() + 4 * sizeof(float), 0, 4); });
  for (bool pack : {false, true}) EXPECT_EQ(CopyLoadError(dir, pack), "") << pack;
}

// NaN bytes in an FP8 matrix: refused by a copying load whether the archive copies the file, the
// matrix is copied as it is, or (for a table with the AVX512-BF16 FP8 kernel) packed.
TEST(LoaderErrorsTest, CopyLoadRefusesNanInAnFp8MatrixAlsoWhenPackingIt) {
  const std::string dir = CopyFp8Model("nonfinite_fp8");
  const std::string name = "model.layers.1.mlp.experts.2.down_proj.weight";
  EditTensor(dir, name, [](TensorToWrite& t) {
    ASSERT_EQ(t.dtype, DType::kF8E4M3);
    const int64_t cols = t.shape[1];
    t.data[static_cast<size_t>(7 * cols + 1)] = 0xff;
    t.data[static_cast<size_t>(3 * cols + 5)] = 0x7f;  // an earlier row: the error names this one
  });
  EXPECT_EQ(LoadError(dir), "");
  for (const KernelTable* kernels : {&GetKernelTable(Isa::kScalar), &FastestKernelTable()}) {
    for (bool pack : {false, true}) {
      EXPECT_EQ(CopyLoadError(dir, pack, kernels), NonFiniteError(dir, name, "NaN at [3, 5]"))
          << IsaName(kernels->isa) << " pack " << pack;
    }
  }
}

// A packed Q8 copy of tiny-v2-lite, as `mlarun quantize` writes it.
std::string CopyPackedQ8Model(const std::string& name) {
  const std::string src = testing::MakeTestModel("tiny-v2-lite");
  const std::string dst = ::testing::TempDir() + "/broken_q8_" + name;
  fs::remove_all(dst);
  WriteConvertedCheckpoint(src, dst);
  return dst;
}

TEST(LoaderErrorsTest, PackedQ8WithWrongShapeNamesTensorAndLogicalShape) {
  const std::string dir = CopyPackedQ8Model("shape");
  EXPECT_EQ(LoadError(dir), "");
  EditTensor(dir, "model.layers.1.self_attn.kv_b_proj.weight", [](TensorToWrite& t) {
    t.shape = {64, 128};
  });
  EXPECT_EQ(LoadError(dir),
            dir +
                "/model.safetensors: tensor 'model.layers.1.self_attn.kv_b_proj.weight' (packed "
                "Q8 of [128, 32]) has shape [64, 128], expected [128, 64]");
}

TEST(LoaderErrorsTest, Q8LayoutMustBeKnownAndMatchTheTensors) {
  const std::string dir = CopyPackedQ8Model("layout");
  std::string config = ReadFileToString(dir + "/config.json");
  const size_t at = config.find("\"packed16\"");
  ASSERT_NE(at, std::string::npos);
  WriteStringToFile(
      dir + "/config.json",
      config.substr(0, at) + "\"tiled\"" + config.substr(at + std::string("\"packed16\"").size()));
  EXPECT_EQ(LoadError(dir), dir +
                                "/config.json: field 'quantization_config.layout' 'tiled' is not "
                                "supported (row_major, packed16)");
  WriteStringToFile(dir + "/config.json",
                    config.substr(0, at) + "\"row_major\"" +
                        config.substr(at + std::string("\"packed16\"").size()));
  EXPECT_NE(LoadError(dir).find("is U8 but config.json's quantization_config has no layout"),
            std::string::npos);
}

// A synthetic model's config patch that is not JSON is refused naming the option (and a valid
// one is applied).
TEST(LoaderErrorsTest, SyntheticConfigPatchMustBeJson) {
  try {
    SyntheticConfigJson({.preset = "tiny-v2-lite", .config_patch = "{\"qk_nope_head_dim\": "});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("config_patch: invalid JSON: ", 0), 0u) << e.what();
  }
  EXPECT_NE(SyntheticConfigJson({.preset = "tiny-v2-lite", .config_patch = R"({"v_head_dim": 8})"})
                .find("\"v_head_dim\": 8"),
            std::string::npos);
}

}  // namespace
}  // namespace mlarun
