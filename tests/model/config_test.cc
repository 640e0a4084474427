// config.json parsing: the published DeepSeek-V2-Lite and V3 configs, and errors naming fields.
#include "model/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/mapped_file.h"

namespace mlarun {
namespace {

const std::string kConfigs = "tests/testdata/configs/";

TEST(ConfigTest, ParsesDeepseekV2Lite) {
  const std::string path = kConfigs + "deepseek-v2-lite.config.json";
  const ModelConfig c = ParseModelConfig(ReadFileToString(path), path);
  EXPECT_EQ(c.family, ArchFamily::kDeepseek);
  EXPECT_EQ(c.q_lora_rank, 0);
  EXPECT_EQ(c.kv_lora_rank, 512);
  EXPECT_EQ(c.QkHeadDim(), 192);
  EXPECT_EQ(c.n_routed_experts, 64);
  EXPECT_EQ(c.num_experts_per_tok, 6);
  EXPECT_EQ(c.topk_method, TopkMethod::kGreedy);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSoftmax);
  EXPECT_FALSE(c.scale_after_norm);
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->factor, 40);
  EXPECT_EQ(c.rope_scaling->mscale_all_dim, 0.707);
  EXPECT_FALSE(c.IsMoeLayer(0));
  EXPECT_TRUE(c.IsMoeLayer(1));
  EXPECT_EQ(c.bos_token_id, 100000);
}

TEST(ConfigTest, ParsesDeepseekV3) {
  const std::string path = kConfigs + "deepseek-v3.config.json";
  const ModelConfig c = ParseModelConfig(ReadFileToString(path), path);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.topk_method, TopkMethod::kNoauxTc);
  EXPECT_EQ(c.scoring_func, ScoringFunc::kSigmoid);
  EXPECT_EQ(c.n_group, 8);
  EXPECT_EQ(c.topk_group, 4);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.scale_after_norm);
  EXPECT_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.fp8_block_rows, 128);
  EXPECT_EQ(c.first_k_dense_replace, 3);
  EXPECT_FALSE(c.IsMoeLayer(2));
  EXPECT_TRUE(c.IsMoeLayer(3));
}

std::string ErrorFor(const nlohmann::json& json) {
  try {
    ParseModelConfig(json.dump(), "dir/config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigTest, ErrorsNameTheFileAndField) {
  const std::string path = kConfigs + "deepseek-v2-lite.config.json";
  const nlohmann::json base = nlohmann::json::parse(ReadFileToString(path));
  nlohmann::json missing = base;
  missing.erase("kv_lora_rank");
  EXPECT_EQ(ErrorFor(missing), "dir/config.json: field 'kv_lora_rank' is missing");
  nlohmann::json arch = base;
  arch["architectures"] = {"GPT2LMHeadModel"};
  EXPECT_NE(ErrorFor(arch).find("'GPT2LMHeadModel' is not supported"), std::string::npos);
  nlohmann::json topk = base;
  topk["topk_method"] = "best";
  EXPECT_NE(ErrorFor(topk).find("field 'topk_method'"), std::string::npos);
  nlohmann::json wrong_type = base;
  wrong_type["hidden_size"] = "big";
  EXPECT_EQ(ErrorFor(wrong_type), "dir/config.json: field 'hidden_size' must be an integer");
  EXPECT_NE(ErrorFor(nlohmann::json::array()).find("expected a JSON object"), std::string::npos);
  try {
    ParseModelConfig("{not json", "x/config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("x/config.json: invalid JSON"), std::string::npos);
  }
}

}  // namespace
}  // namespace mlarun
