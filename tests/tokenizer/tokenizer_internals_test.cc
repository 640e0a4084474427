// Unit tests for the tokenizer's building blocks: UTF-8 helpers, the GPT-2 byte alphabet, the
// Oniguruma-compatible regex wrapper, Split behaviours and the two BPE merge strategies.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace mlarun::detail {
namespace {

TEST(TokenizerUtf8Test, ValidatesPerUnicodeTable3_7) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("a\xC3\xA9\xE4\xB8\x96\xF0\x9F\x99\x82"));
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));   // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xC0\x80"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xE0\x80\xAF"));      // overlong
  EXPECT_FALSE(IsValidUtf8("\xE4\xB8"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\x80"));
}

TEST(TokenizerUtf8Test, ReplacesMaximalSubpartsLikeWhatwg) {
  // Examples of Unicode 15 section 3.9 (Table 3-8 style): one U+FFFD per maximal subpart.
  EXPECT_EQ(ReplaceInvalidUtf8("a\x80"
                               "b"),
            "a\uFFFDb");
  EXPECT_EQ(ReplaceInvalidUtf8("\xE4\xB8"
                               "x"),
            "\uFFFDx");
  EXPECT_EQ(ReplaceInvalidUtf8("\xC0\x80"), "\uFFFD\uFFFD");
  EXPECT_EQ(ReplaceInvalidUtf8("\xED\xA0\x80"), "\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(ReplaceInvalidUtf8("\xF0\x9F\x98"), "\uFFFD");
  EXPECT_EQ(ReplaceInvalidUtf8("\xF5\x80"), "\uFFFD\uFFFD");
  EXPECT_EQ(ReplaceInvalidUtf8("ok \xE4\xB8\x96"), "ok \xE4\xB8\x96");
}

TEST(TokenizerUtf8Test, EmittablePrefixStopsBeforeAnUnfinishedCharacter) {
  EXPECT_EQ(EmittablePrefixLength("abc"), 3u);
  EXPECT_EQ(EmittablePrefixLength("ab\xE4\xB8"), 2u);
  EXPECT_EQ(EmittablePrefixLength("ab\xF0\x9F\x99"), 2u);
  EXPECT_EQ(EmittablePrefixLength("ab\xF0\x9F\x99\x82"), 6u);
  EXPECT_EQ(EmittablePrefixLength("ab\xE4x"), 4u);  // definitely invalid: emit (as U+FFFD)
  EXPECT_EQ(EmittablePrefixLength("\x80"), 1u);
}

TEST(TokenizerByteLevelTest, MapsBytesLikeGpt2) {
  const ByteLevelAlphabet alphabet;
  EXPECT_EQ(alphabet.Utf8Of(' '), "\xC4\xA0");   // U+0120 'Ġ'
  EXPECT_EQ(alphabet.Utf8Of('\n'), "\xC4\x8A");  // U+010A 'Ċ'
  EXPECT_EQ(alphabet.Utf8Of('A'), "A");
  EXPECT_EQ(alphabet.CodePointOf(0), 0x100u);
  EXPECT_EQ(alphabet.CodePointOf(0xAD), 0x143u);  // the last shifted byte
  std::string all;
  for (int byte = 0; byte < 256; ++byte) {
    all.push_back(static_cast<char>(byte));
  }
  EXPECT_EQ(alphabet.Decode(alphabet.Encode(all)), all);
  EXPECT_EQ(alphabet.Decode("\xEF\xBD\x9C"), std::nullopt);  // '｜' is not in the alphabet
}

TEST(TokenizerRegexTest, TranslatesOnigurumaShorthandClasses) {
  EXPECT_EQ(TranslateOnigurumaPattern(R"(\s+(?!\S))"),
            R"([\t-\r\x{85}\p{Z}]+(?![^\t-\r\x{85}\p{Z}]))");
  EXPECT_EQ(TranslateOnigurumaPattern(R"([^\s\p{L}])"), R"([^\t-\r\x{85}\p{Z}\p{L}])");
  EXPECT_EQ(TranslateOnigurumaPattern(R"(\w+)"), R"([\p{L}\p{M}\p{Nd}\p{Pc}]+)");
  EXPECT_EQ(TranslateOnigurumaPattern(R"(\\s[\]s][^\S])"), R"(\\s[\]s][^\S])");  // not classes
  EXPECT_EQ(TranslateOnigurumaPattern(R"([]\s])"), R"([]\t-\r\x{85}\p{Z}])");  // ']' first: literal
}

std::vector<std::pair<size_t, size_t>> Matches(const Regex& regex, std::string_view text) {
  RegexScratch scratch;
  std::vector<std::pair<size_t, size_t>> out;
  regex.ForEachMatch(text, &scratch,
                     [&](size_t start, size_t end) { out.emplace_back(start, end); });
  return out;
}

TEST(TokenizerRegexTest, IteratesLikeOnigurumaIncludingEmptyMatches) {
  using Spans = std::vector<std::pair<size_t, size_t>>;
  EXPECT_EQ(Matches(Regex("a*", "test"), "baab"), (Spans{{0, 0}, {1, 3}, {4, 4}}));
  EXPECT_EQ(Matches(Regex(R"(\p{N}{1,3})", "test"), "x12345y"), (Spans{{1, 4}, {4, 6}}));
  // U+0085 is whitespace and U+180E and U+200B are not, as in Oniguruma (PCRE2's own \s differs).
  EXPECT_EQ(Matches(Regex(R"(\s+)", "test"), "a\xC2\x85 b\xE1\xA0\x8E\xE2\x80\x8B"),
            (Spans{{1, 4}}));
  // Ill-formed bytes never match, and never stop the search.
  EXPECT_EQ(Matches(Regex(R"(\p{L}+)", "test"),
                    "ab\xFF"
                    "cd"),
            (Spans{{0, 2}, {3, 5}}));
}

std::vector<std::string> Pieces(const std::vector<SplitSpec>& splits, ByteLevelSpec byte_level,
                                std::string_view text) {
  const PreTokenizer pretokenizer(splits, byte_level);
  PreTokenizerScratch scratch;
  std::vector<std::string_view> views;
  pretokenizer.Split(text, &scratch, &views);
  return {views.begin(), views.end()};
}

TEST(TokenizerPreTokenizerTest, SplitBehavioursMatchTokenizersDocs) {
  // The example of tokenizers' `SplitDelimiterBehavior` docs: "the-final--countdown" on "-".
  using Strings = std::vector<std::string>;
  auto split = [](SplitBehavior behavior, bool invert = false) {
    return Pieces({{.pattern = "-", .is_regex = false, .behavior = behavior, .invert = invert}}, {},
                  "the-final--countdown");
  };
  EXPECT_EQ(split(SplitBehavior::kRemoved), (Strings{"the", "final", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::kIsolated), (Strings{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::kMergedWithPrevious),
            (Strings{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::kMergedWithNext), (Strings{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(split(SplitBehavior::kContiguous), (Strings{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(split(SplitBehavior::kRemoved, /*invert=*/true), (Strings{"-", "-", "-"}));
}

TEST(TokenizerPreTokenizerTest, RulesApplyPerPieceAndByteLevelPrefixesEachPiece) {
  using Strings = std::vector<std::string>;
  const std::vector<SplitSpec> digits = {{.pattern = R"(\p{N}{1,3})"}};
  EXPECT_EQ(Pieces(digits, {}, "ab1234567c"), (Strings{"ab", "123", "456", "7", "c"}));
  // GPT-2 regex after a Split: its lookahead never sees past the piece.
  EXPECT_EQ(Pieces(digits, {.present = true, .use_regex = true}, "a  12 b"),
            (Strings{"a", "  ", "12", " b"}));
  EXPECT_EQ(Pieces(digits, {.present = true, .add_prefix_space = true}, "x1 y"),
            (Strings{" x", " 1", " y"}));
}

TEST(TokenizerBpeTest, ScanAndHeapMergesAgree) {
  // Merges over a 4-letter alphabet with overlapping pairs, applied to pseudo-random words.
  BpeSpec spec;
  const std::string letters = "abcd";
  for (const char c : letters) {
    spec.vocab.emplace_back(std::string(1, c), static_cast<int32_t>(spec.vocab.size()));
  }
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"},  {"b", "a"},  {"ab", "a"},  {"c", "c"},   {"a", "a"}, {"cc", "cc"},
      {"d", "ab"}, {"ba", "b"}, {"aa", "aa"}, {"dab", "c"}, {"b", "c"}, {"bc", "d"}};
  for (const auto& merge : merges) {
    spec.merges.push_back(merge);
    const std::string merged = merge.first + merge.second;
    if (std::none_of(spec.vocab.begin(), spec.vocab.end(),
                     [&](const auto& entry) { return entry.first == merged; })) {
      spec.vocab.emplace_back(merged, static_cast<int32_t>(spec.vocab.size()));
    }
  }
  const BpeModel model(spec, /*byte_level=*/false, ByteLevelAlphabet(), "test");
  BpeScratch scratch;
  uint32_t state = 7;
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<int32_t> word;
    for (int i = 0; i < 2 + trial % 90; ++i) {
      state = state * 1103515245u + 12345u;
      word.push_back(static_cast<int32_t>((state >> 16) % 4));
    }
    std::vector<int32_t> by_scan = word;
    std::vector<int32_t> by_heap = word;
    model.ApplyMerges(&by_scan, &scratch, MergeStrategy::kScan);
    model.ApplyMerges(&by_heap, &scratch, MergeStrategy::kHeap);
    ASSERT_EQ(by_scan, by_heap) << "trial " << trial;
  }
}

TEST(TokenizerBpeTest, CacheFindsWhatItStoredAndEmptiesWhenFull) {
  BpeCache cache(4);
  const std::vector<int32_t> ids = {1, 2, 3};
  cache.Insert("abc", HashBytes("abc"), ids);
  const auto found = cache.Find("abc", HashBytes("abc"));
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(std::vector<int32_t>(found->begin(), found->end()), ids);
  EXPECT_FALSE(cache.Find("abd", HashBytes("abd")).has_value());
  for (int i = 0; i < 4; ++i) {
    cache.Insert(std::to_string(i), HashBytes(std::to_string(i)), ids);
  }
  EXPECT_EQ(cache.size(), 1u);  // emptied once it held 4, then took the 5th
  EXPECT_FALSE(cache.Find("abc", HashBytes("abc")).has_value());
}

}  // namespace
}  // namespace mlarun::detail
