// GGUF models: a checkpoint written as GGUF by WriteGgufModel and read back by Model::Load gives
// the same configuration and, in float32, bitwise the same logits as the safetensors checkpoint
// (every tensor mapped back to its Hugging Face name, llama's q/k rows reordered back, split MLA
// rebuilt); quantised files stay close to it; malformed files fail with one line naming the key
// or tensor.
#include "model/gguf_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "kernels/kernel_table.h"
#include "kv/kv_cache.h"
#include "model/gguf_export.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "model/test_models.h"
#include "runtime/generator.h"

namespace mlarun {
namespace {

std::vector<int32_t> Ids(int n, int vocab) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 37 + 11) % vocab);
  return ids;
}

// Logits [n, vocab] of `ids` run one token at a time (decode) or as one batch (prefill).
std::vector<float> Logits(const Model& model, const std::vector<int32_t>& ids, bool decode,
                          MlaPath path = MlaPath::kAuto) {
  ThreadPool pool(2);
  Exec exec{pool, GetKernelTable(BestIsa())};
  KvCache cache(model.MakeKvLayout(DType::kF32), {.block_size = 16, .budget_bytes = 64 << 20});
  const int32_t seq = cache.AddSequence();
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t vocab = model.config().vocab_size;
  std::vector<float> logits(static_cast<size_t>(n * vocab));
  const int64_t step = decode ? 1 : n;
  for (int64_t begin = 0; begin < n; begin += step) {
    std::vector<BatchToken> batch;
    for (int64_t i = begin; i < begin + step; ++i)
      batch.push_back(
          {.token = ids[static_cast<size_t>(i)], .seq = seq, .pos = i, .want_logits = true});
    ReserveOrThrow(cache, seq, step);
    model.Forward(exec, cache, batch, {.mla_path = path}, logits.data() + begin * vocab);
  }
  return logits;
}

// sqrt(mean (a - b)^2) / sqrt(mean b^2).
double RelativeRms(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, ref = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    ref += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(diff / ref);
}

float MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

float MaxAbs(const std::vector<float>& a) {
  float worst = 0.0f;
  for (float v : a) worst = std::max(worst, std::fabs(v));
  return worst;
}

std::string GgufPath(const std::string& dir, const std::string& type, bool split = true) {
  const std::string path = dir + "." + type + (split ? "" : ".kv_b") + ".gguf";
  if (!std::filesystem::exists(path)) {
    WriteGgufModel(dir, path, {.mix = FindGgufMix(type), .split_mla = split});
  }
  return path;
}

// The preset with rows of 256 in most matrices, so that the K-quants store them (the tiny
// presets' rows of 16-128 fall back to Q5_0, Q5_1 and Q8_0 everywhere). MoE presets route every
// token to all experts: with random weights a choice between near-equal experts flips with any
// rounding and moves that position's logits by tens of percent, which would drown the error the
// formats make; the routing itself does not depend on the weights' format.
std::string WideModel(const std::string& preset) {
  const std::string dir =
      ::testing::TempDir() + "/mlarun_gguf_wide_" + preset + "_" + std::to_string(getpid());
  if (std::filesystem::exists(dir + "/config.json")) return dir;
  std::string patch = R"({"hidden_size": 256, "intermediate_size": 512)";
  if (preset == "tiny-v2-lite") patch += R"(, "num_experts_per_tok": 8)";
  if (preset == "tiny-v2") patch += R"(, "num_experts_per_tok": 8, "topk_group": 4)";
  if (preset == "tiny-v3") patch += R"(, "num_experts_per_tok": 16, "topk_group": 4)";
  if (preset.find("-v") != std::string::npos) {
    patch += R"(, "moe_intermediate_size": 256, "kv_lora_rank": 256, "qk_nope_head_dim": 32,
                "v_head_dim": 32)";
  }
  WriteSyntheticModel({.preset = preset, .seed = 1, .config_patch = patch + "}"}, dir);
  return dir;
}

class GgufModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufModelTest, Float32FileGivesTheCheckpointsLogitsBitwise) {
  const std::string dir = testing::MakeTestModel(GetParam());
  const auto reference = Model::Load(dir);
  const auto gguf = Model::Load(GgufPath(dir, "f32"));
  const ModelConfig& a = reference->config();
  const ModelConfig& b = gguf->config();
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.q_lora_rank, b.q_lora_rank);
  EXPECT_EQ(a.qk_nope_head_dim, b.qk_nope_head_dim);
  EXPECT_EQ(a.v_head_dim, b.v_head_dim);
  EXPECT_EQ(a.n_routed_experts, b.n_routed_experts);
  EXPECT_EQ(a.topk_method, b.topk_method);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.rope_scaling.has_value(), b.rope_scaling.has_value());
  const std::vector<int32_t> ids = Ids(12, static_cast<int>(a.vocab_size));
  for (bool decode : {false, true}) {
    const std::vector<float> want = Logits(*reference, ids, decode);
    const std::vector<float> got = Logits(*gguf, ids, decode);
    // float32 parameters stored as float32 (YaRN's mscale through 0.1 * mscale / 0.1): equal up
    // to float rounding of the metadata.
    EXPECT_LE(MaxAbsDiff(want, got), 1e-5f * std::max(1.0f, MaxAbs(want)))
        << (decode ? "decode" : "prefill");
  }
}

TEST_P(GgufModelTest, QuantisedFilesStayCloseAndPrefillEqualsDecode) {
  const std::string dir = WideModel(GetParam());
  const auto reference = Model::Load(dir);
  const std::vector<int32_t> ids = Ids(10, static_cast<int>(reference->config().vocab_size));
  const std::vector<float> want = Logits(*reference, ids, false);
  const float scale = MaxAbs(want);
  // The logits' RMS error relative to the float32 checkpoint's, per mix. Measured on these
  // random presets (2026-12): q8_0 1.7-2.6%, q6_k 3.7-5.7%, q5_k_m 7.7-11.7%, q4_k_m 15-21%,
  // q4_0 16-24%. A wrong layout or scale gives ~100%.
  for (auto [type, bound] : {std::pair<const char*, double>{"q8_0", 0.05},
                             {"q6_k", 0.1},
                             {"q5_k_m", 0.2},
                             {"q4_k_m", 0.3},
                             {"q4_0", 0.35}}) {
    const auto model = Model::Load(GgufPath(dir, type));
    const std::vector<float> prefill = Logits(*model, ids, false);
    const double error = RelativeRms(prefill, want);
    EXPECT_LE(error, bound) << type;
    std::printf("%s %s: logits' relative RMS error %.4f\n", GetParam(), type, error);
    // Each token's products are independent of its batch: prefill on the decode's (absorbed)
    // MLA path gives the decode's logits up to the attention's summation order.
    EXPECT_LE(MaxAbsDiff(Logits(*model, ids, false, MlaPath::kAbsorbed),
                         Logits(*model, ids, true, MlaPath::kAbsorbed)),
              1e-4f * scale)
        << type;
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, GgufModelTest,
                         ::testing::Values("tiny-v2-lite", "tiny-v2", "tiny-v3", "tiny-llama-gqa",
                                           "tiny-qwen2"));

TEST(GgufModelLayoutTest, OldAndSplitMlaLayoutsGiveTheSameLogits) {
  const std::string dir = WideModel("tiny-v3");
  for (const char* type : {"f32", "q8_0"}) {
    const auto split = Model::Load(GgufPath(dir, type, true));
    const auto kv_b = Model::Load(GgufPath(dir, type, false));
    const std::vector<int32_t> ids = Ids(9, static_cast<int>(split->config().vocab_size));
    for (bool decode : {false, true}) {
      const std::vector<float> a = Logits(*split, ids, decode);
      const std::vector<float> b = Logits(*kv_b, ids, decode);
      if (std::string(type) == "f32") {
        // The same values in both layouts: the same logits.
        EXPECT_LE(MaxAbsDiff(a, b), 1e-5f * std::max(1.0f, MaxAbs(a))) << decode;
      } else {
        // W_uk^T quantised along attn_k_b's rows instead of attn_kv_b's: the two files' weights
        // differ by their rounding, and the naive path multiplies the split file's rebuilt
        // float32 kv_b_proj without quantising its activations (measured 2.6% RMS, as q8_0
        // against float32).
        EXPECT_LE(RelativeRms(a, b), 0.05) << decode;
      }
    }
  }
}

TEST(GgufModelSyntheticTest, DirectGgufEqualsTheFloat32CheckpointQuantised) {
  // make-model --format gguf generates each matrix when it is written; the same values written
  // as a float32 checkpoint and then quantised give the same tensors, byte for byte.
  const std::string dir = testing::MakeTestModel("tiny-v3");
  const std::string direct = dir + ".direct.q4_k_m.gguf";
  WriteSyntheticGguf({.preset = "tiny-v3", .seed = 1}, *FindGgufMix("q4_k_m"), direct);
  const GgufFile a = GgufFile::Open(GgufPath(dir, "q4_k_m"));
  const GgufFile b = GgufFile::Open(direct);
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const GgufTensor& x = a.tensors()[i];
    const GgufTensor& y = b.tensors()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.ggml_type, y.ggml_type) << x.name;
    ASSERT_EQ(x.n_bytes, y.n_bytes) << x.name;
    EXPECT_TRUE(std::equal(x.data, x.data + x.n_bytes, y.data)) << x.name;
  }
  for (const GgufKeyValue& kv : a.metadata()) {
    if (kv.key == "general.name") continue;
    const GgufValue* other = b.Find(kv.key);
    ASSERT_NE(other, nullptr) << kv.key;
    EXPECT_TRUE(*other == kv.value) << kv.key;
  }
}

TEST(GgufModelMixTest, TensorTypeOverridesTheMixForMatchingNames) {
  const std::string dir = testing::MakeTestModel("tiny-v3");
  const std::string path = dir + ".override.gguf";
  WriteGgufModel(dir, path,
                 {.mix = FindGgufMix("q8_0"),
                  .tensor_types = {ParseGgufTypeOverride("attn_v_b=bf16"),
                                   ParseGgufTypeOverride("blk.[12].ffn_down*=f16")}});
  const GgufFile file = GgufFile::Open(path);
  EXPECT_EQ(file.FindTensor("blk.0.attn_v_b.weight")->ggml_type, kGgmlBF16);
  EXPECT_EQ(file.FindTensor("blk.2.attn_v_b.weight")->ggml_type, kGgmlBF16);
  EXPECT_EQ(file.FindTensor("blk.1.ffn_down_exps.weight")->ggml_type, kGgmlF16);
  EXPECT_EQ(file.FindTensor("blk.3.ffn_down_exps.weight")->ggml_type, kGgmlQ8_0);
  EXPECT_EQ(file.FindTensor("blk.1.ffn_up_exps.weight")->ggml_type, kGgmlQ8_0);
  EXPECT_EQ(file.FindTensor("blk.1.attn_norm.weight")->ggml_type, kGgmlF32);  // vectors stay F32
  for (const char* bad : {"attn_v_b", "=q8_0", "attn_v_b=q3_k", "attn_v_b=iq4_nl"}) {
    try {
      ParseGgufTypeOverride(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--tensor-type"), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove(path);
}

TEST(GgufModelMixTest, Q4KMGivesMoreBitsWhereLlamaCppDoes) {
  const GgufMix& mix = *FindGgufMix("q4_k_m");
  // 27 layers (DeepSeek-V2-Lite): use_more_bits picks 0-2, 23-26 and every third from 5.
  std::vector<int> more;
  for (int i = 0; i < 27; ++i) {
    if (UseMoreBits(i, 27)) more.push_back(i);
  }
  EXPECT_EQ(more, (std::vector<int>{0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26}));
  EXPECT_EQ(GgufTensorType(mix, "ffn_down_exps.weight", 2048, true, 5, 27), kGgmlQ6_K);
  EXPECT_EQ(GgufTensorType(mix, "ffn_down_exps.weight", 2048, true, 6, 27), kGgmlQ4_K);
  EXPECT_EQ(GgufTensorType(mix, "attn_v.weight", 4096, true, 26, 27), kGgmlQ6_K);
  EXPECT_EQ(GgufTensorType(mix, "attn_q.weight", 4096, true, 26, 27), kGgmlQ4_K);
  // DeepSeek-V2-Lite's experts have rows of 1,408 = 5.5 x 256: Q6_K -> Q8_0, Q4_K -> Q5_0.
  EXPECT_EQ(GgufTensorType(mix, "ffn_down_exps.weight", 1408, true, 5, 27), kGgmlQ8_0);
  EXPECT_EQ(GgufTensorType(mix, "ffn_down_exps.weight", 1408, true, 6, 27), kGgmlQ5_0);
  EXPECT_EQ(GgufTensorType(mix, "output.weight", 2048, true, -1, 27), kGgmlQ6_K);
  EXPECT_EQ(GgufTensorType(mix, "token_embd.weight", 2048, true, -1, 27), kGgmlQ4_K);
  // Rows of 128 (attn_k_b) fall back: Q4_K -> Q5_0, and Q6_K -> Q8_0.
  EXPECT_EQ(GgufTensorType(mix, "attn_k_b.weight", 128, true, 6, 27), kGgmlQ5_0);
  EXPECT_EQ(GgufTensorType(*FindGgufMix("q6_k"), "attn_k_b.weight", 128, true, 6, 27), kGgmlQ8_0);
  EXPECT_EQ(GgufTensorType(mix, "attn_norm.weight", 2048, false, 6, 27), kGgmlF32);
  EXPECT_EQ(GgufTensorType(mix, "ffn_gate_inp.weight", 2048, true, 6, 27), kGgmlF32);
}

// Rewrites `path` into `out` with `edit` applied to its metadata and tensor declarations.
template <typename Edit>
void RewriteGguf(const std::string& path, const std::string& out, Edit edit) {
  const GgufFile file = GgufFile::Open(path);
  std::vector<GgufKeyValue> metadata = file.metadata();
  std::vector<GgufTensorDecl> decls;
  for (const GgufTensor& t : file.tensors()) decls.push_back({t.name, t.ggml_type, t.ne});
  edit(metadata, decls);
  WriteGguf(out, metadata, decls, [&](const GgufTensorDecl& d, std::vector<uint8_t>& bytes) {
    const GgufTensor* t = file.FindTensor(d.name);
    const BlockFormat& f = GetBlockFormat(d.ggml_type);
    int64_t n = 1;
    for (int64_t e : d.ne) n *= e;
    bytes.assign(static_cast<size_t>(f.Bytes(n)), 0);
    if (t != nullptr) std::copy_n(t->data, std::min(bytes.size(), t->n_bytes), bytes.begin());
  });
}

std::string LoadError(const std::string& path) {
  try {
    Model::Load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded)";
}

TEST(GgufModelErrorsTest, BadMetadataAndTensorsNameTheKeyOrTensor) {
  const std::string dir = testing::MakeTestModel("tiny-v3");
  const std::string good = GgufPath(dir, "q8_0");
  const std::string bad = dir + ".bad.gguf";
  auto erase_key = [](std::vector<GgufKeyValue>& kv, const std::string& key) {
    std::erase_if(kv, [&](const GgufKeyValue& e) { return e.key == key; });
  };
  RewriteGguf(good, bad, [&](auto& kv, auto&) {
    for (GgufKeyValue& e : kv) {
      if (e.key == "general.architecture") e.value = GgufValue::String("mamba");
    }
  });
  EXPECT_NE(LoadError(bad).find("'general.architecture' is 'mamba', which mlarun does not run "
                                "(supported: deepseek2, llama, qwen2)"),
            std::string::npos)
      << LoadError(bad);
  RewriteGguf(good, bad,
              [&](auto& kv, auto&) { erase_key(kv, "deepseek2.attention.kv_lora_rank"); });
  EXPECT_NE(LoadError(bad).find("deepseek2.attention.kv_lora_rank"), std::string::npos)
      << LoadError(bad);
  RewriteGguf(good, bad, [&](auto& kv, auto&) { erase_key(kv, "general.architecture"); });
  EXPECT_NE(LoadError(bad).find("general.architecture"), std::string::npos) << LoadError(bad);
  // A matrix whose shape disagrees with the configuration.
  RewriteGguf(good, bad, [&](auto&, std::vector<GgufTensorDecl>& decls) {
    for (GgufTensorDecl& d : decls) {
      if (d.name == "blk.1.attn_output.weight") d.ne[1] += 32;
    }
  });
  EXPECT_NE(LoadError(bad).find("model.layers.1.self_attn.o_proj.weight"), std::string::npos)
      << LoadError(bad);
  EXPECT_NE(LoadError(bad).find(bad), std::string::npos) << LoadError(bad);
  // A missing tensor.
  RewriteGguf(good, bad, [&](auto&, std::vector<GgufTensorDecl>& decls) {
    std::erase_if(decls,
                  [](const GgufTensorDecl& d) { return d.name == "blk.0.attn_kv_a_mqa.weight"; });
  });
  EXPECT_NE(LoadError(bad).find("kv_a_proj_with_mqa"), std::string::npos) << LoadError(bad);
  // A tensor of a type mlarun cannot multiply (IQ4_NL, 32 values in 18 bytes).
  RewriteGguf(good, bad, [&](auto&, std::vector<GgufTensorDecl>& decls) {
    for (GgufTensorDecl& d : decls) {
      if (d.name == "blk.1.attn_output.weight") d.ggml_type = 20;
    }
  });
  EXPECT_NE(LoadError(bad).find("IQ4_NL"), std::string::npos) << LoadError(bad);
  std::filesystem::remove(bad);
}

}  // namespace
}  // namespace mlarun
