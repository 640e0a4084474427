// Unit tests for `Tokenizer` and `StreamDecoder` on hand-built tokenizer.json documents: merges in
// both forms, rank order, added tokens, every byte, invalid UTF-8, streaming and malformed files.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>  // getpid

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/tiny_tokenizer.h"
#include "tokenizer/utf8.h"

namespace mlarun {
namespace {

using testing::TinyAddedToken;
using testing::TinyTokenizerJson;
using testing::TinyTokenizerOptions;
using Ids = std::vector<int32_t>;

// Merges that build "hello" (ids 256..259) and " world" (260..264).
TinyTokenizerOptions HelloWorldOptions() {
  TinyTokenizerOptions options;
  options.merges = {{"h", "e"}, {"l", "l"},   {"he", "ll"}, {"hell", "o"}, {" ", "w"},
                    {"o", "r"}, {" w", "or"}, {"l", "d"},   {" wor", "ld"}};
  return options;
}

TEST(TokenizerTest, MergesInStringAndArrayFormGiveTheSameIds) {
  TinyTokenizerOptions array_form = HelloWorldOptions();
  TinyTokenizerOptions string_form = HelloWorldOptions();
  string_form.string_form_merges = true;
  const Tokenizer from_arrays = Tokenizer::FromJson(TinyTokenizerJson(array_form));
  const Tokenizer from_strings = Tokenizer::FromJson(TinyTokenizerJson(string_form));
  // "hello" = merge 3 (id 259); " world" = merge 8 (id 264).
  EXPECT_EQ(from_arrays.Encode("hello world"), (Ids{259, 264}));
  EXPECT_EQ(from_strings.Encode("hello world"), (Ids{259, 264}));
  EXPECT_EQ(from_arrays.Encode("help"), (Ids{256, 'l', 'p'}));  // only "he" merges
}

TEST(TokenizerTest, LowerRankMergesFirst) {
  TinyTokenizerOptions options;
  options.merges = {{"b", "c"}, {"a", "b"}};  // "bc" = 256 outranks "ab" = 257
  const Tokenizer tokenizer = Tokenizer::FromJson(TinyTokenizerJson(options));
  EXPECT_EQ(tokenizer.Encode("abc"), (Ids{'a', 256}));
  EXPECT_EQ(tokenizer.Encode("abd"), (Ids{257, 'd'}));
  // Equal ranks resolve leftmost first: "aaa" with a+a -> "aa" "a".
  TinyTokenizerOptions repeated;
  repeated.merges = {{"a", "a"}};
  EXPECT_EQ(Tokenizer::FromJson(TinyTokenizerJson(repeated)).Encode("aaaaa"), (Ids{256, 256, 'a'}));
}

TEST(TokenizerTest, AddedTokensAreMatchedBeforeBpeLongestFirst) {
  TinyTokenizerOptions options = HelloWorldOptions();
  options.added = {{.content = "<s>"},
                   {.content = "<|x|>", .special = false},
                   {.content = "<|x|>y", .special = false}};
  const Tokenizer tokenizer = Tokenizer::FromJson(TinyTokenizerJson(options));
  const int32_t s = 265;
  const int32_t x = 266;
  const int32_t xy = 267;
  // "hello" would merge across "<s>" if it were plain text; the token splits it first.
  EXPECT_EQ(tokenizer.Encode("hel<s>lo"), (Ids{256, 'l', s, 'l', 'o'}));
  EXPECT_EQ(tokenizer.Encode("<|x|>y<|x|>z"), (Ids{xy, x, 'z'}));
  EXPECT_EQ(tokenizer.Encode("<s<s>>"), (Ids{'<', 's', s, '>'}));
  EXPECT_TRUE(tokenizer.IsSpecial(s));
  EXPECT_FALSE(tokenizer.IsSpecial(x));
  EXPECT_FALSE(tokenizer.IsSpecial(259));
  EXPECT_EQ(tokenizer.vocab_size(), 268);
  EXPECT_EQ(tokenizer.TokenToId("<|x|>y"), xy);
  EXPECT_EQ(tokenizer.TokenToId("Ġworld"), 264);
  EXPECT_EQ(tokenizer.IdToToken(264), "Ġworld");
  EXPECT_EQ(tokenizer.TokenToPiece(264), " world");
  EXPECT_EQ(tokenizer.Decode(Ids{259, s, 264}), "hello<s> world");
  EXPECT_EQ(tokenizer.Decode(Ids{259, s, 264}, /*skip_special=*/true), "hello world");
  EXPECT_EQ(tokenizer.Decode(Ids{259, 9999, -1, 264}), "hello world");  // unknown ids: nothing
}

TEST(TokenizerTest, AddedTokenStripAndSingleWordFlags) {
  TinyTokenizerOptions options;
  options.added = {{.content = "<m>", .lstrip = true, .rstrip = true},
                   {.content = "cat", .special = false, .single_word = true}};
  const Tokenizer tokenizer = Tokenizer::FromJson(TinyTokenizerJson(options));
  const int32_t m = 256;
  const int32_t cat = 257;
  EXPECT_EQ(tokenizer.Encode("a  <m> \tb"), (Ids{'a', m, 'b'}));
  EXPECT_EQ(tokenizer.Encode("a cat b"), (Ids{'a', ' ', cat, ' ', 'b'}));
  EXPECT_EQ(tokenizer.Encode("concat"), (Ids{'c', 'o', 'n', 'c', 'a', 't'}));
  EXPECT_EQ(tokenizer.Encode("cats"), (Ids{'c', 'a', 't', 's'}));
}

TEST(TokenizerTest, EveryByteIsEncodableAndRoundTrips) {
  const Tokenizer tokenizer = Tokenizer::FromJson(TinyTokenizerJson(HelloWorldOptions()));
  std::string all_bytes;
  for (int byte = 0; byte < 256; ++byte) {
    const std::string one(1, static_cast<char>(byte));
    all_bytes += one;
    EXPECT_EQ(tokenizer.Encode(one), (Ids{byte})) << "byte " << byte;
    EXPECT_EQ(tokenizer.Decode(Ids{byte}), one) << "byte " << byte;
    EXPECT_EQ(tokenizer.TokenToPiece(byte), one) << "byte " << byte;
  }
  EXPECT_EQ(tokenizer.Decode(tokenizer.Encode(all_bytes)), all_bytes);
  // Pseudo-random byte strings (mostly ill-formed UTF-8) survive the round trip too.
  uint32_t state = 12345;
  for (int trial = 0; trial < 200; ++trial) {
    std::string bytes;
    for (int i = 0; i < trial % 37; ++i) {
      state = state * 1664525u + 1013904223u;
      bytes.push_back(static_cast<char>(state >> 24));
    }
    EXPECT_EQ(tokenizer.Decode(tokenizer.Encode(bytes)), bytes) << "trial " << trial;
  }
}

TEST(TokenizerTest, InvalidUtf8KeepsBytesOrBecomesReplacementCharacters) {
  TinyTokenizerOptions options;
  options.pre_tokenizer = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
  const Tokenizer tokenizer = Tokenizer::FromJson(TinyTokenizerJson(options));
  const std::string text = "ab\xFF\xC3(cd\xE4\xB8";
  const Ids kept = tokenizer.Encode(text);
  EXPECT_EQ(kept, (Ids{'a', 'b', 0xFF, 0xC3, '(', 'c', 'd', 0xE4, 0xB8}));
  EXPECT_EQ(tokenizer.Decode(kept), text);
  EXPECT_EQ(tokenizer.Encode(text), kept);  // deterministic
  const Ids replaced = tokenizer.Encode(text, EncodeOptions{.invalid_utf8 = InvalidUtf8::kReplace});
  // U+FFFD is EF BF BD; "\xFF" and "\xC3" are two maximal subparts, "\xE4\xB8" one.
  EXPECT_EQ(replaced,
            (Ids{'a', 'b', 0xEF, 0xBF, 0xBD, 0xEF, 0xBF, 0xBD, '(', 'c', 'd', 0xEF, 0xBF, 0xBD}));
  EXPECT_EQ(tokenizer.Decode(replaced), "ab\uFFFD\uFFFD(cd\uFFFD");
}

TEST(TokenizerTest, BosAndEosComeFromTokenizerConfig) {
  TinyTokenizerOptions options;
  options.added = {{.content = "<bos>"}, {.content = "<eos>"}, {.content = "<s>"}};
  const std::string json = TinyTokenizerJson(options);
  const Tokenizer configured = Tokenizer::FromJson(
      json, R"({"bos_token": {"content": "<s>"}, "eos_token": "<eos>", "add_bos_token": true,
                "chat_template": "{{ bos_token }}"})");
  EXPECT_EQ(configured.bos_id(), 258);
  EXPECT_EQ(configured.eos_id(), 257);
  EXPECT_TRUE(configured.add_bos_token());
  EXPECT_EQ(configured.chat_template(), "{{ bos_token }}");
  EXPECT_EQ(configured.Encode("hi", /*add_special_bos=*/true), (Ids{258, 'h', 'i'}));
  // Without a config, well-known special tokens are used.
  const Tokenizer unconfigured = Tokenizer::FromJson(json);
  EXPECT_EQ(unconfigured.bos_id(), 258);  // "<s>" comes before "<bos>" in the candidate list
  EXPECT_EQ(unconfigured.eos_id(), 257);
  EXPECT_FALSE(unconfigured.add_bos_token());
}

TEST(TokenizerTest, StreamDecoderNeverEmitsHalfACharacter) {
  const Tokenizer tokenizer = Tokenizer::FromJson(TinyTokenizerJson({}));  // one token per byte
  const std::string text =
      "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x99\x82";  // héllo 世界 🙂
  const Ids ids = tokenizer.Encode(text);
  ASSERT_EQ(ids.size(), text.size());
  StreamDecoder stream(tokenizer);
  std::string joined;
  std::vector<std::string> outputs;
  for (const int32_t id : ids) {
    const std::string out = stream.Feed(id);
    EXPECT_TRUE(detail::IsValidUtf8(out)) << "after id " << id;
    outputs.push_back(out);
    joined += out;
  }
  joined += stream.Flush();
  EXPECT_EQ(joined, text);
  // 'é' is two tokens: its first byte yields nothing, its second the whole character.
  EXPECT_EQ(outputs[1], "");
  EXPECT_EQ(outputs[2], "\xC3\xA9");
  // '🙂' is four tokens: only the last one emits.
  EXPECT_EQ(outputs[outputs.size() - 2], "");
  EXPECT_EQ(outputs.back(), "\xF0\x9F\x99\x82");
}

TEST(TokenizerTest, StreamDecoderReplacesIllFormedBytes) {
  const Tokenizer tokenizer = Tokenizer::FromJson(TinyTokenizerJson({}));
  StreamDecoder stream(tokenizer);
  EXPECT_EQ(stream.Feed('a'), "a");
  EXPECT_EQ(stream.Feed(0xE4), "");        // could still become a character
  EXPECT_EQ(stream.Feed('b'), "\uFFFDb");  // now it cannot
  EXPECT_EQ(stream.Feed(0x80), "\uFFFD");  // a lone continuation byte
  EXPECT_EQ(stream.Feed(0xF0), "");
  EXPECT_EQ(stream.Flush(), "\uFFFD");  // an unfinished character at the end
}

TEST(TokenizerTest, StreamDecoderFollowsAMovedTokenizer) {
  Tokenizer original = Tokenizer::FromJson(TinyTokenizerJson({}));
  StreamDecoder stream(original);
  const Tokenizer moved = std::move(original);
  EXPECT_EQ(stream.Feed('o') + stream.Feed('k'), "ok");
  EXPECT_EQ(moved.Decode(Ids{'o', 'k'}), "ok");
}

// Returns the message of the `TokenizerError` that `load` throws ("" if none).
template <typename Load>
std::string LoadError(Load load) {
  try {
    load();
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "";
}

TEST(TokenizerTest, MalformedFilesNameTheFileAndField) {
  EXPECT_EQ(LoadError([] {
              Tokenizer::FromJson("{not json", "", "bad/tokenizer.json");
            }).rfind("bad/tokenizer.json: not valid JSON (byte ", 0),
            0u);
  EXPECT_EQ(LoadError([] { Tokenizer::FromJson(R"({"model": {"type": "BPE", "merges": []}})"); }),
            "tokenizer.json: model.vocab: missing");
  EXPECT_EQ(
      LoadError([] {
        Tokenizer::FromJson(
            R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a c"]}})");
      }),
      "tokenizer.json: model.merges[0]: unknown token 'c'");
  EXPECT_EQ(
      LoadError([] {
        Tokenizer::FromJson(
            R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": [["a", "b"]]}})");
      }),
      "tokenizer.json: model.merges[0]: merged token 'ab' is not in model.vocab");
  EXPECT_EQ(
      LoadError(
          [] { Tokenizer::FromJson(R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})"); }),
      "tokenizer.json: model.type: unsupported model type 'WordPiece' (only BPE is supported)");
  EXPECT_EQ(LoadError([] {
              Tokenizer::FromJson(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                                      "pre_tokenizer": {"type": "Metaspace"}})");
            }),
            "tokenizer.json: pre_tokenizer.type: unsupported pre-tokenizer 'Metaspace' "
            "(supported: Sequence, Split, ByteLevel)");
  EXPECT_EQ(LoadError([] {
              Tokenizer::FromJson(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                                      "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"},
                                                        "behavior": "Isolated"}})");
            }).rfind("tokenizer.json: pre_tokenizer: invalid regex at offset 2: ", 0),
            0u);
  EXPECT_EQ(LoadError([] {
              Tokenizer::FromJson(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                                      "added_tokens": [{"id": 5, "content": "<s>"}]})");
            }),
            "tokenizer.json: added_tokens[0].id: is 5 but Hugging Face tokenizers assigns 1 to "
            "'<s>' (its vocab id, else the next id after the vocab)");
  EXPECT_EQ(LoadError([] {
              Tokenizer::FromJson(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})",
                                  R"({"bos_token": "<s>"})", "dir/tokenizer.json");
            }),
            "dir/tokenizer_config.json: bos_token: '<s>' is not a token of dir/tokenizer.json");
}

TEST(TokenizerTest, FromDirectoryReadsBothFilesAndNamesMissingOnes) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("mlarun_tokenizer_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  TinyTokenizerOptions options = HelloWorldOptions();
  options.added = {{.content = "<｜begin▁of▁sentence｜>"}, {.content = "<｜end▁of▁sentence｜>"}};
  std::ofstream(dir / "tokenizer.json") << TinyTokenizerJson(options);
  std::ofstream(dir / "tokenizer_config.json") << R"({"add_bos_token": true})";
  const Tokenizer tokenizer = Tokenizer::FromDirectory(dir);
  EXPECT_EQ(tokenizer.bos_id(), 265);
  EXPECT_EQ(tokenizer.eos_id(), 266);
  EXPECT_TRUE(tokenizer.add_bos_token());
  std::filesystem::remove_all(dir);
  EXPECT_EQ(LoadError([&] { Tokenizer::FromDirectory(dir); }),
            (dir / "tokenizer.json").string() + ": cannot open file");
}

}  // namespace
}  // namespace mlarun
