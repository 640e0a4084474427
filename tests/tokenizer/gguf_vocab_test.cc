// Unit tests for the GGUF tokenizer metadata conversion: mlarun's default model's tokenizer.json to
// GGUF keys and back (ids checked by hand and on the whole corpus), the tokenizer.json built for
// each llama.cpp pre-tokenizer name, what the keys cannot express, and one-line errors.
#include "tokenizer/gguf_vocab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/bpe_trainer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/corpus_util.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/tiny_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_spec.h"

namespace mlarun {
namespace {

using Json = nlohmann::json;
using Ids = std::vector<int32_t>;
using testing::CorpusLine;
using testing::ReadCorpus;
using testing::ReadFile;

constexpr int32_t kNormal = static_cast<int32_t>(GgufTokenType::kNormal);
constexpr int32_t kControl = static_cast<int32_t>(GgufTokenType::kControl);
constexpr int32_t kUserDefined = static_cast<int32_t>(GgufTokenType::kUserDefined);
constexpr int32_t kUnused = static_cast<int32_t>(GgufTokenType::kUnused);

const std::string kSourceDir = MLARUN_SOURCE_DIR;
const std::string kDefaultJson = kSourceDir + "/models/default/tokenizer.json";
const std::string kDefaultConfig = kSourceDir + "/models/default/tokenizer_config.json";

Tokenizer Load(const TokenizerJsonFiles& files, const std::string& source = "gguf") {
  return Tokenizer::FromJson(files.tokenizer_json, files.config_json, source);
}

// Returns how many corpus lines `a` and `b` encode differently (each line with both policies).
size_t DifferentLines(const Tokenizer& a, const Tokenizer& b,
                      const std::vector<CorpusLine>& lines) {
  size_t different = 0;
  for (const CorpusLine& line : lines) {
    const EncodeOptions options{.invalid_utf8 = line.raw_bytes ? InvalidUtf8::kReplace
                                                               : InvalidUtf8::kKeepBytes};
    different += a.Encode(line.text, options) != b.Encode(line.text, options) ||
                 a.Encode(line.text) != b.Encode(line.text);
  }
  return different;
}

class TokenizerGgufDefaultModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    json_ = new std::string(ReadFile(kDefaultJson));
    config_ = new std::string(ReadFile(kDefaultConfig));
    corpus_ = new std::vector<CorpusLine>(
        ReadCorpus(kSourceDir + "/tests/tokenizer/testdata/corpus.jsonl"));
    original_ = new Tokenizer(Tokenizer::FromJson(*json_, *config_, kDefaultJson));
  }
  static void TearDownTestSuite() {
    delete original_;
    delete corpus_;
    delete config_;
    delete json_;
  }
  static inline const std::string* json_ = nullptr;
  static inline const std::string* config_ = nullptr;
  static inline const std::vector<CorpusLine>* corpus_ = nullptr;
  static inline const Tokenizer* original_ = nullptr;
};

TEST_F(TokenizerGgufDefaultModelTest, ExtractsTokensMergesTypesAndSpecialIds) {
  const GgufVocab v = GgufVocabFromTokenizerJson(*json_, *config_, kDefaultJson);
  EXPECT_EQ(v.source, kDefaultJson);
  EXPECT_EQ(v.model, "gpt2");
  ASSERT_EQ(v.tokens.size(), 4096u);
  ASSERT_EQ(v.token_types.size(), 4096u);
  // The four special added tokens come first, then the 256 bytes in byte order, then merges.
  EXPECT_EQ(v.tokens[0], "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(v.tokens[1], "<｜end▁of▁sentence｜>");
  EXPECT_EQ(v.tokens[2], "<｜User｜>");
  EXPECT_EQ(v.tokens[3], "<｜Assistant｜>");
  for (int id = 0; id < 4; ++id) {
    EXPECT_EQ(v.token_types[id], kControl) << id;
  }
  EXPECT_EQ(v.tokens[4], "Ā");    // byte 0x00
  EXPECT_EQ(v.tokens[36], "Ġ");   // byte 0x20, the space
  EXPECT_EQ(v.tokens[256], "ü");  // byte 0xFC
  EXPECT_EQ(v.tokens[300], "as");
  EXPECT_EQ(v.tokens[4095], "Ġstanding");
  EXPECT_EQ(v.token_types[4], kNormal);
  EXPECT_EQ(v.token_types[4095], kNormal);
  EXPECT_EQ(std::count(v.token_types.begin(), v.token_types.end(), kControl), 4);
  ASSERT_EQ(v.merges.size(), 3836u);
  EXPECT_EQ(v.merges[0], "t h");
  EXPECT_EQ(v.merges[1], "Ġ th");
  EXPECT_EQ(v.merges[2], "Ġ a");
  EXPECT_EQ(v.bos_id, 0);
  EXPECT_EQ(v.eos_id, 1);
  EXPECT_EQ(v.pad_id, 1);
  EXPECT_EQ(v.unk_id, std::nullopt);
  EXPECT_EQ(v.add_bos, false);
  EXPECT_EQ(v.add_eos, false);
  EXPECT_EQ(v.chat_template, original_->chat_template());
  EXPECT_FALSE(v.chat_template.empty());
  // mlarun's ASCII regex is no llama.cpp pre-tokenizer's: "default", with the exact tokenizer.json.
  EXPECT_EQ(v.pre, "default");
  EXPECT_EQ(v.huggingface_json, *json_);
  ASSERT_EQ(v.differences.size(), 1u);
  EXPECT_EQ(
      v.differences[0].rfind("pre_tokenizer: no llama.cpp pre-tokenizer has these regexes", 0), 0u)
      << v.differences[0];
}

TEST_F(TokenizerGgufDefaultModelTest, RebuiltTokenizerEncodesTheCorpusLikeTheOriginal) {
  const GgufVocab v = GgufVocabFromTokenizerJson(*json_, *config_, kDefaultJson);
  // Through tokenizer.huggingface.json, as mlarun reads back a GGUF it wrote.
  const Tokenizer stored = Load(TokenizerJsonFromGgufVocab(v));
  EXPECT_EQ(DifferentLines(*original_, stored, *corpus_), 0u);
  // Through the keys alone, with the model's own regex in place of the "default" one.
  GgufVocab keys_only = v;
  keys_only.huggingface_json.clear();
  const TokenizerJsonFiles files = TokenizerJsonFromGgufVocab(keys_only);
  const Tokenizer llama_default = Load(files);  // llama.cpp's "default" regexes
  Json json = Json::parse(files.tokenizer_json);
  json["pre_tokenizer"] = Json::parse(*json_)["pre_tokenizer"];
  const Tokenizer rebuilt = Tokenizer::FromJson(json.dump(), files.config_json, "rebuilt");
  ASSERT_GE(corpus_->size(), 700u);
  EXPECT_EQ(DifferentLines(*original_, rebuilt, *corpus_), 0u);
  EXPECT_GT(DifferentLines(*original_, llama_default, *corpus_), 100u);  // the regex matters
  for (const Tokenizer* t : {&stored, &rebuilt}) {
    EXPECT_EQ(t->vocab_size(), 4096);
    EXPECT_EQ(t->bos_id(), 0);
    EXPECT_EQ(t->eos_id(), 1);
    EXPECT_FALSE(t->add_bos_token());
    EXPECT_TRUE(t->IsSpecial(3));
    EXPECT_FALSE(t->IsSpecial(300));
    EXPECT_EQ(t->chat_template(), original_->chat_template());
    EXPECT_EQ(t->Encode("<｜User｜>And it came to pass"),
              original_->Encode("<｜User｜>And it came to pass"));
  }
  EXPECT_EQ(rebuilt.Encode("<｜User｜>as"), (Ids{2, 300}));
}

TEST_F(TokenizerGgufDefaultModelTest, PadsToTheEmbeddingRowsWithUnusedTokens) {
  const GgufVocab v = GgufVocabFromTokenizerJson(*json_, *config_, kDefaultJson, 4100);
  ASSERT_EQ(v.tokens.size(), 4100u);
  EXPECT_EQ(v.tokens[4096], "[PAD4096]");
  EXPECT_EQ(v.tokens[4099], "[PAD4099]");
  EXPECT_EQ(v.token_types[4099], kUnused);
  GgufVocab keys_only = v;
  keys_only.huggingface_json.clear();
  const Tokenizer tokenizer = Load(TokenizerJsonFromGgufVocab(keys_only));
  EXPECT_EQ(tokenizer.vocab_size(), 4096);  // unused ids decode to nothing, as in tokenizer.json
  EXPECT_EQ(tokenizer.Decode(Ids{4099}), "");
  EXPECT_EQ(tokenizer.TokenToId("[PAD4099]"), std::nullopt);
  EXPECT_EQ(Load(TokenizerJsonFromGgufVocab(v)).vocab_size(), 4096);
}

// A GGUF vocab by hand: the 256 byte tokens, "he" (merge "h e"), a control token and a
// user-defined one.
GgufVocab SmallVocab() {
  const detail::ByteLevelAlphabet alphabet;
  GgufVocab v{.source = "test.gguf", .model = "gpt2", .pre = "deepseek-v3"};
  for (int byte = 0; byte < 256; ++byte) {
    v.tokens.emplace_back(alphabet.Utf8Of(static_cast<uint8_t>(byte)));
    v.token_types.push_back(kNormal);
  }
  v.tokens.push_back("he");
  v.token_types.push_back(kNormal);
  v.tokens.push_back("<s>");
  v.token_types.push_back(kControl);
  v.tokens.push_back("<tool>");
  v.token_types.push_back(kUserDefined);
  v.tokens.push_back("[PAD259]");
  v.token_types.push_back(kUnused);
  v.merges = {"h e"};
  v.bos_id = 257;
  v.eos_id = 257;
  return v;
}

TEST(TokenizerGgufVocabTest, BuildsATokenizerFromTheKeys) {
  const GgufVocab v = SmallVocab();
  const TokenizerJsonFiles files = TokenizerJsonFromGgufVocab(v);
  const Tokenizer tokenizer = Load(files);
  EXPECT_EQ(tokenizer.Encode("hello<s><tool>"), (Ids{256, 'l', 'l', 'o', 257, 258}));
  EXPECT_EQ(tokenizer.Encode("he", /*add_special_bos=*/true), (Ids{257, 256}));
  EXPECT_TRUE(tokenizer.IsSpecial(257));
  EXPECT_FALSE(tokenizer.IsSpecial(258));  // user-defined: an added token, not special
  EXPECT_EQ(tokenizer.vocab_size(), 259);  // the unused token is a gap
  EXPECT_EQ(tokenizer.Decode(Ids{256, 257, 259}), "he<s>");
  EXPECT_EQ(tokenizer.Decode(Ids{256, 257, 258}, /*skip_special=*/true), "he<tool>");
  const Json config = Json::parse(files.config_json);
  EXPECT_EQ(config["bos_token"], "<s>");
  EXPECT_EQ(config["eos_token"], "<s>");
  EXPECT_EQ(config["add_bos_token"], false);
  EXPECT_EQ(config["add_eos_token"], false);
  EXPECT_FALSE(config.contains("chat_template"));
  // Back to keys: the same tokens, types, merges, ids and pre-tokenizer name.
  const GgufVocab back = GgufVocabFromTokenizerJson(files.tokenizer_json, files.config_json,
                                                    "rebuilt/tokenizer.json", 260);
  EXPECT_EQ(back.tokens, v.tokens);
  EXPECT_EQ(back.token_types, v.token_types);
  EXPECT_EQ(back.merges, v.merges);
  EXPECT_EQ(back.pre, "deepseek-v3");
  EXPECT_EQ(back.bos_id, 257);
  EXPECT_TRUE(back.differences.empty());
  EXPECT_TRUE(back.huggingface_json.empty());
}

// The pre_tokenizer of the tokenizer.json built for `pre`, and the pieces it cuts `text` into.
std::vector<std::string> Pieces(const std::string& pre, std::string_view text) {
  GgufVocab v = SmallVocab();
  v.pre = pre;
  const TokenizerJsonFiles files = TokenizerJsonFromGgufVocab(v);
  Load(files);  // every regex compiles
  const detail::TokenizerSpec spec = detail::ParseTokenizerJson(files.tokenizer_json, pre);
  const detail::PreTokenizer pretokenizer(spec.splits, spec.byte_level);
  detail::PreTokenizerScratch scratch;
  std::vector<std::string_view> pieces;
  pretokenizer.Split(text, &scratch, &pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(TokenizerGgufVocabTest, EachPreTokenizerNameGivesItsRegexes) {
  using P = std::vector<std::string>;
  EXPECT_EQ(Pieces("deepseek-v3", "Hello 12345 世界!\n"),
            (P{"Hello", " ", "123", "45", " ", "世界", "!\n"}));
  EXPECT_EQ(Pieces("llama-bpe", "I'LL 12345 世界!\n"),
            (P{"I", "'LL", " ", "123", "45", " 世界", "!\n"}));
  EXPECT_EQ(Pieces("llama3", "x 1234"), (P{"x", " ", "123", "4"}));
  EXPECT_EQ(Pieces("qwen2", "I'LL 12345"), (P{"I", "'LL", " ", "1", "2", "3", "4", "5"}));
  EXPECT_EQ(Pieces("deepseek-r1-qwen", "x 12"), (P{"x", " ", "1", "2"}));
  EXPECT_EQ(Pieces("gpt-2", "I'll 12345 !!"), (P{"I", "'ll", " 12345", " !!"}));
  EXPECT_EQ(Pieces("gpt2", "a b"), (P{"a", " b"}));
  // deepseek-llm: newlines, letters, punctuation (ASCII letters too), trailing spaces, CJK (whose
  // range U+0800-U+4E00 also takes Greek and letter-like symbols), digit runs.
  EXPECT_EQ(Pieces("deepseek-llm", "ab \u2126\u212A\u1F7D 42,\n世界  "),
            (P{"ab", " ", "\u2126\u212A\u1F7D", " ", "42", ",", "\n", "世界", "  "}));
  EXPECT_EQ(Pieces("deepseek-llm", "Hi, ÀÉ!"), (P{"Hi", ",", " ÀÉ", "!"}));
  EXPECT_EQ(Pieces("deepseek-coder", "ab 42"), (P{"ab", " ", "4", "2"}));
  EXPECT_EQ(Pieces("default", "ab, 1234"), (P{"ab", ",", " ", "123", "4"}));
  EXPECT_EQ(Pieces("", "ab, 1234"), Pieces("default", "ab, 1234"));  // absent: llama.cpp's default
}

TEST(TokenizerGgufVocabTest, DeepSeekLlmLetterClassHoldsTheCompatibilityCodePoints) {
  // U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126 and U+212A: Unicode normalization would turn them into
  // U+03CE, U+03B9, U+0390, U+038A, U+03A9 and U+004B, so the class is written with escapes.
  std::vector<std::string> patterns;
  GgufVocab v = SmallVocab();
  v.pre = "deepseek-llm";
  for (const detail::SplitSpec& split :
       detail::ParseTokenizerJson(TokenizerJsonFromGgufVocab(v).tokenizer_json, "t").splits) {
    patterns.push_back(split.pattern);
  }
  ASSERT_EQ(patterns.size(), 6u);
  const detail::Regex letters(patterns[1], "letters");
  detail::RegexScratch scratch;
  for (const std::string letter :
       {"\u1F7D", "\u1FBE", "\u1FD3", "\u1FDB", "\u2126", "\u212A", "\U0001E943", "\u00B5"}) {
    const std::string text = " " + letter;
    std::vector<std::pair<size_t, size_t>> matches;
    letters.ForEachMatch(text, &scratch, [&](size_t b, size_t e) { matches.emplace_back(b, e); });
    EXPECT_EQ(matches, (std::vector<std::pair<size_t, size_t>>{{0, text.size()}})) << text;
  }
  std::vector<std::pair<size_t, size_t>> matches;
  letters.ForEachMatch("\u01BB\u02B0", &scratch,
                       [&](size_t b, size_t e) { matches.emplace_back(b, e); });
  EXPECT_TRUE(matches.empty());  // U+01BB and U+02B0 are letters outside the class
}

TEST(TokenizerGgufVocabTest, Llama3NamesIgnoreMergesAndAddBos) {
  GgufVocab v = SmallVocab();
  v.pre = "llama-bpe";
  TokenizerJsonFiles files = TokenizerJsonFromGgufVocab(v);
  EXPECT_EQ(Json::parse(files.tokenizer_json)["model"]["ignore_merges"], true);
  EXPECT_EQ(Json::parse(files.config_json)["add_bos_token"], true);  // llama.cpp's default
  v.add_bos = false;
  files = TokenizerJsonFromGgufVocab(v);
  EXPECT_EQ(Json::parse(files.config_json)["add_bos_token"], false);  // the key wins
  v.pre = "qwen2";
  EXPECT_EQ(Json::parse(TokenizerJsonFromGgufVocab(v).tokenizer_json)["model"]["ignore_merges"],
            false);
}

// A tiny tokenizer.json with `pre_tokenizer` and optional extras.
std::string TinyJson(const nlohmann::ordered_json& pre_tokenizer,
                     const std::vector<std::pair<std::string, std::string>>& merges = {
                         {"h", "e"}}) {
  testing::TinyTokenizerOptions options;
  options.merges = merges;
  options.added = {{.content = "<s>"}, {.content = "<tool>", .special = false}};
  options.pre_tokenizer = pre_tokenizer;
  return testing::TinyTokenizerJson(options);
}

nlohmann::ordered_json SplitThenByteLevel(const std::vector<std::string>& patterns,
                                          const nlohmann::ordered_json& last = nullptr) {
  nlohmann::ordered_json steps = nlohmann::ordered_json::array();
  for (const std::string& pattern : patterns) {
    steps.push_back({{"type", "Split"},
                     {"pattern", {{"Regex", pattern}}},
                     {"behavior", "Isolated"},
                     {"invert", false}});
  }
  if (!last.is_null()) {
    steps.push_back(last);
  }
  steps.push_back({{"type", "ByteLevel"},
                   {"add_prefix_space", false},
                   {"trim_offsets", true},
                   {"use_regex", false}});
  return {{"type", "Sequence"}, {"pretokenizers", steps}};
}

TEST(TokenizerGgufVocabTest, FindsTheLlamaCppNameOfAPreTokenizer) {
  const std::vector<std::string> ds3(std::begin(detail::kDeepSeekSplitPatterns),
                                     std::end(detail::kDeepSeekSplitPatterns));
  GgufVocab v = GgufVocabFromTokenizerJson(TinyJson(SplitThenByteLevel(ds3)), "", "t.json");
  EXPECT_EQ(v.pre, "deepseek-v3");
  EXPECT_TRUE(v.differences.empty());
  EXPECT_TRUE(v.huggingface_json.empty());
  EXPECT_EQ(v.tokens[257], "<s>");
  EXPECT_EQ(v.token_types[257], kControl);
  EXPECT_EQ(v.tokens[258], "<tool>");
  EXPECT_EQ(v.token_types[258], kUserDefined);
  EXPECT_EQ(v.bos_id, std::nullopt);  // no config
  // GPT-2: ByteLevel with its own regex.
  v = GgufVocabFromTokenizerJson(
      TinyJson({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}), "",
      "t.json");
  EXPECT_EQ(v.pre, "gpt-2");
  // With a prefix space it is no llama.cpp pre-tokenizer.
  v = GgufVocabFromTokenizerJson(TinyJson({{"type", "ByteLevel"}, {"add_prefix_space", true}}), "",
                                 "t.json");
  EXPECT_EQ(v.pre, "default");
  EXPECT_FALSE(v.huggingface_json.empty());
  // Llama 3's regex without ignore_merges: named, but noted.
  const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  v = GgufVocabFromTokenizerJson(TinyJson(SplitThenByteLevel({llama3})), "", "t.json");
  EXPECT_EQ(v.pre, "llama-bpe");
  EXPECT_EQ(v.differences,
            (std::vector<std::string>{
                "model.ignore_merges: is false, but llama.cpp's 'llama-bpe' uses true"}));
}

// The Split regexes of the tokenizer.json built for `pre`.
std::vector<std::string> SplitRegexes(const std::string& pre) {
  GgufVocab v = SmallVocab();
  v.pre = pre;
  std::vector<std::string> patterns;
  for (const detail::SplitSpec& split :
       detail::ParseTokenizerJson(TokenizerJsonFromGgufVocab(v).tokenizer_json, pre).splits) {
    patterns.push_back(split.pattern);
  }
  return patterns;
}

TEST(TokenizerGgufVocabTest, TrainedTokenizersAreDeepSeekV3) {
  // `mlarun make-model` tokenizers come from the trainer, whose Split regexes are DeepSeek-V3's
  // with "\\r\\n" escapes where DeepSeek-V3's file has the characters: the same regexes.
  const std::vector<std::string> specials = {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"};
  std::string corpus;
  for (int i = 0; i < 50; ++i) {
    corpus += "And it came to pass, 123 times 世界.\r\n";
  }
  const std::string json = TrainByteLevelBpeJson(corpus, 276, specials);
  const std::string config = MakeTokenizerConfigJson(specials[0], specials[1]);
  const GgufVocab v = GgufVocabFromTokenizerJson(json, config, "tiny/tokenizer.json");
  EXPECT_EQ(v.pre, "deepseek-v3");
  EXPECT_TRUE(v.differences.empty());
  EXPECT_TRUE(v.huggingface_json.empty());
  EXPECT_EQ(v.tokens.size(), 276u);
  EXPECT_EQ(v.tokens[274], specials[0]);
  EXPECT_EQ(v.token_types[274], kControl);
  EXPECT_EQ(v.bos_id, 274);
  EXPECT_EQ(v.eos_id, 275);
  const Tokenizer original = Tokenizer::FromJson(json, config);
  const Tokenizer rebuilt = Load(TokenizerJsonFromGgufVocab(v));
  for (const std::string_view text :
       {std::string_view(corpus), std::string_view("<｜begin▁of▁sentence｜>it came\r\n\n 4567")}) {
    EXPECT_EQ(rebuilt.Encode(text), original.Encode(text));
  }
  EXPECT_EQ(rebuilt.chat_template(), original.chat_template());
}

TEST(TokenizerGgufVocabTest, DeepSeekLlmDigitsMatchWhenNoMergeJoinsDigits) {
  // deepseek-llm's own tokenizer.json ends with tokenizers' Digits step; llama.cpp splits \p{N}+.
  std::vector<std::string> patterns = SplitRegexes("deepseek-llm");
  ASSERT_EQ(patterns.size(), 6u);
  EXPECT_EQ(patterns.back(), "\\p{N}+");
  patterns.pop_back();
  const nlohmann::ordered_json runs = {{"type", "Digits"}, {"individual_digits", false}};
  const nlohmann::ordered_json single = {{"type", "Digits"}, {"individual_digits", true}};
  GgufVocab v = GgufVocabFromTokenizerJson(TinyJson(SplitThenByteLevel(patterns, runs)), "", "t");
  EXPECT_EQ(v.pre, "deepseek-llm");
  EXPECT_TRUE(v.differences.empty());
  v = GgufVocabFromTokenizerJson(TinyJson(SplitThenByteLevel(patterns, single)), "", "t");
  EXPECT_EQ(v.pre, "deepseek-llm");
  EXPECT_TRUE(v.differences.empty());
  v = GgufVocabFromTokenizerJson(
      TinyJson(SplitThenByteLevel(patterns, single), {{"h", "e"}, {"1", "2"}}), "", "t");
  EXPECT_EQ(v.pre, "deepseek-llm");
  EXPECT_EQ(v.differences, (std::vector<std::string>{
                               "pre_tokenizer: digits are split one by one, but llama.cpp's "
                               "'deepseek-llm' splits digit runs and some merges join digits"}));
  // The same regexes spelled by hand find deepseek-coder (digits one by one).
  EXPECT_EQ(GgufVocabFromTokenizerJson(TinyJson(SplitThenByteLevel(SplitRegexes("deepseek-coder"))),
                                       "", "t")
                .pre,
            "deepseek-coder");
}

TEST(TokenizerGgufVocabTest, ListsWhatTheKeysCannotExpress) {
  Json json = Json::parse(TinyJson(SplitThenByteLevel(SplitRegexes("qwen2"))));
  json["normalizer"] = {{"type", "NFC"}};
  json["added_tokens"][1]["lstrip"] = true;
  json["model"]["byte_fallback"] = true;
  const GgufVocab v = GgufVocabFromTokenizerJson(json.dump(), "", "q/tokenizer.json");
  EXPECT_EQ(v.pre, "qwen2");
  EXPECT_TRUE(v.huggingface_json.empty());  // mlarun reads qwen2 from the keys
  EXPECT_EQ(v.differences,
            (std::vector<std::string>{
                "added_tokens[1] '<tool>': lstrip is not stored in GGUF",
                "model.byte_fallback: is not stored in GGUF",
                "normalizer: 'NFC' is not stored in GGUF (llama.cpp normalizes nothing)"}));
}

TEST(TokenizerGgufVocabTest, ReadsTheConfig) {
  const std::string json = TinyJson(SplitThenByteLevel(SplitRegexes("deepseek-v3")));
  const Json config = {
      {"bos_token", {{"content", "<s>"}, {"lstrip", false}}},
      {"eos_token", "<tool>"},
      {"pad_token", nullptr},
      {"unk_token", "x"},
      {"add_bos_token", true},
      {"add_eos_token", false},
      {"chat_template",
       {{{"name", "tool_use"}, {"template", "T"}}, {{"name", "default"}, {"template", "D"}}}}};
  const GgufVocab v = GgufVocabFromTokenizerJson(json, config.dump(), "m/tokenizer.json");
  EXPECT_EQ(v.bos_id, 257);
  EXPECT_EQ(v.eos_id, 258);
  EXPECT_EQ(v.pad_id, std::nullopt);
  EXPECT_EQ(v.unk_id, 120);  // 'x'
  EXPECT_EQ(v.add_bos, true);
  EXPECT_EQ(v.add_eos, false);
  EXPECT_EQ(v.chat_template, "D");
  const Tokenizer tokenizer = Load(TokenizerJsonFromGgufVocab(v));
  EXPECT_EQ(tokenizer.bos_id(), 257);
  EXPECT_EQ(tokenizer.eos_id(), 258);
  EXPECT_TRUE(tokenizer.add_bos_token());
  EXPECT_EQ(tokenizer.chat_template(), "D");
}

// Expects `fn` to throw a TokenizerError whose message is `expected`, on one line.
template <typename Fn>
void ExpectError(Fn&& fn, const std::string& expected) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected: " << expected;
  } catch (const TokenizerError& e) {
    EXPECT_EQ(std::string(e.what()), expected);
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(TokenizerGgufVocabTest, RejectsBadKeysWithOneLineNamingTheKey) {
  auto from = [](GgufVocab v) { return [v] { TokenizerJsonFromGgufVocab(v); }; };
  GgufVocab v = SmallVocab();
  v.pre = "tekken";
  ExpectError(from(v),
              "test.gguf: tokenizer.ggml.pre: unsupported pre-tokenizer 'tekken' (supported: "
              "default, gpt-2, llama-bpe, deepseek-llm, deepseek-coder, deepseek-v3, qwen2, "
              "llama3, llama-v3, deepseek-r1-qwen, gpt2)");
  v = SmallVocab();
  v.model = "llama";
  ExpectError(from(v),
              "test.gguf: tokenizer.ggml.model: unsupported tokenizer model 'llama' "
              "(SentencePiece); only 'gpt2' (byte-level BPE) is supported");
  v.model = "bert";
  ExpectError(from(v),
              "test.gguf: tokenizer.ggml.model: unsupported tokenizer model 'bert'; only 'gpt2' "
              "(byte-level BPE) is supported");
  v = SmallVocab();
  v.merges.push_back("h zq");
  ExpectError(from(v),
              "test.gguf: tokenizer.ggml.merges[1]: 'h zq': 'zq' is not a token of "
              "tokenizer.ggml.tokens (or is unused)");
  v = SmallVocab();
  v.merges.push_back("l l");  // "ll" is not a token
  ExpectError(from(v),
              "test.gguf: tokenizer.ggml.merges[1]: 'l l': the merged token 'll' is not a token "
              "of tokenizer.ggml.tokens (or is unused)");
  v = SmallVocab();
  v.merges.push_back("he");
  ExpectError(from(v), "test.gguf: tokenizer.ggml.merges[1]: expected \"left right\", got 'he'");
  v = SmallVocab();
  v.token_types.resize(3);
  ExpectError(from(v),
              "test.gguf: tokenizer.ggml.token_type: 3 types for 260 tokens "
              "(tokenizer.ggml.tokens)");
  v = SmallVocab();
  v.token_types[10] = 9;
  ExpectError(from(v),
              "test.gguf: tokenizer.ggml.token_type[10]: unknown type 9 (1 normal, 2 unknown, 3 "
              "control, 4 user-defined, 5 unused, 6 byte)");
  v = SmallVocab();
  v.bos_id = 260;
  ExpectError(from(v), "test.gguf: tokenizer.ggml.bos_token_id: 260 is out of range (260 tokens)");
  v = SmallVocab();
  v.eos_id = 259;
  ExpectError(from(v), "test.gguf: tokenizer.ggml.eos_token_id: 259 is an unused or empty token");
  v = SmallVocab();
  v.pad_id = -1;
  ExpectError(from(v),
              "test.gguf: tokenizer.ggml.padding_token_id: -1 is out of range (260 tokens)");
  v = SmallVocab();
  v.tokens[256] = "<s>";
  ExpectError(from(v),
              "test.gguf: tokenizer.ggml.tokens[257]: '<s>' repeats tokenizer.ggml.tokens[256]");
  v = SmallVocab();
  v.tokens[256] = "\xFF";
  ExpectError(from(v), "test.gguf: tokenizer.ggml.tokens[256]: not valid UTF-8");
  v = SmallVocab();
  v.tokens.clear();
  v.token_types.clear();
  ExpectError(from(v), "test.gguf: tokenizer.ggml.tokens: empty");
  v = SmallVocab();
  v.pre = "unknown-but-stored";
  v.huggingface_json = TinyJson(nullptr, {{"h", "e"}, {"l", "l"}});  // "ll" is id 257 there
  ExpectError(from(v),
              "test.gguf: tokenizer.huggingface.json: model.vocab: 'll' has id 257, which is not "
              "its id in tokenizer.ggml.tokens");
}

TEST(TokenizerGgufVocabTest, RejectsTokenizerJsonThatGgufCannotHold) {
  auto from = [](std::string json, std::string config = {}) {
    return [json, config] { GgufVocabFromTokenizerJson(json, config, "m/tokenizer.json"); };
  };
  ExpectError(from("{"), "m/tokenizer.json: not valid JSON (byte 2)");
  Json json = Json::parse(TinyJson(nullptr));
  json["model"]["type"] = "WordPiece";
  ExpectError(from(json.dump()),
              "m/tokenizer.json: model.type: unsupported model type 'WordPiece' (only byte-level "
              "BPE has a GGUF 'gpt2' form)");
  json = Json::parse(TinyJson(nullptr));
  json["pre_tokenizer"] = {{"type", "Split"},
                           {"pattern", {{"Regex", "\\s+"}}},
                           {"behavior", "Isolated"},
                           {"invert", false}};
  ExpectError(from(json.dump()),
              "m/tokenizer.json: pre_tokenizer: no ByteLevel step: not a byte-level BPE "
              "tokenizer, which GGUF's 'gpt2' tokenizer model is");
  json = Json::parse(TinyJson(nullptr));
  json["model"]["merges"].push_back({"a b", "c"});
  ExpectError(from(json.dump()),
              "m/tokenizer.json: model.merges[1]: a part contains ' ', which a GGUF \"left "
              "right\" merge cannot hold");
  json = Json::parse(TinyJson(nullptr));
  json["model"]["vocab"]["dup"] = 5;
  ExpectError(from(json.dump()), "m/tokenizer.json: model.vocab: 'dup' and 'ą' both have id 5");
  ExpectError(from(TinyJson(nullptr), R"({"bos_token": "<bos>"})"),
              "m/tokenizer_config.json: bos_token: '<bos>' is not a token of m/tokenizer.json");
}

}  // namespace
}  // namespace mlarun
