// Declares `PreTokenizer`: a sequence of Split rules (regex or literal, with tokenizers' delimiter
// behaviours) optionally followed by ByteLevel, cutting text into the pieces BPE runs on.
#ifndef MLARUN_TOKENIZER_PRETOKENIZER_H_
#define MLARUN_TOKENIZER_PRETOKENIZER_H_

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/tokenizer_spec.h"

namespace mlarun::detail {

// The pattern tokenizers' ByteLevel pre-tokenizer splits with when `use_regex` is true
// (tokenizers/src/pre_tokenizers/byte_level.rs, from openai/gpt-2 encoder.py).
inline constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The Split regexes of DeepSeek-V3's tokenizer.json pre_tokenizer (each "Isolated"), in order:
// digit runs of 1-3, CJK runs, then words/punctuation/whitespace. Used by the BPE trainer.
inline constexpr std::string_view kDeepSeekSplitPatterns[] = {
    R"(\p{N}{1,3})",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

// Per-call state for `PreTokenizer::Split`. Not thread-safe.
struct PreTokenizerScratch {
  RegexScratch regex;
  struct Span {
    size_t begin;
    size_t end;
    bool is_match;
  };
  std::vector<std::vector<Span>> spans_by_rule;  // scratch per rule (rules recurse)
  std::deque<std::string> owned;  // pieces that got a prefix space; views point into these
};

class PreTokenizer {
 public:
  PreTokenizer() = default;  // the identity: the whole text is one piece
  PreTokenizer(const std::vector<SplitSpec>& splits, const ByteLevelSpec& byte_level);

  // Appends the non-empty pieces of `text` to `pieces`, in order. A piece views `text` or a string
  // in `scratch->owned`, so it is valid while both are.
  void Split(std::string_view text, PreTokenizerScratch* scratch,
             std::vector<std::string_view>* pieces) const;

 private:
  struct Rule {
    std::optional<Regex> regex;
    std::string literal;  // when `regex` is empty
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
  };

  void SplitFrom(size_t rule, std::string_view piece, PreTokenizerScratch* scratch,
                 std::vector<std::string_view>* pieces) const;
  // Fills `spans` with the matches and gaps of `rules_[rule]` in `piece` (tokenizers'
  // `Pattern::find_matches`, then `invert`).
  void FindSpans(size_t rule, std::string_view piece, PreTokenizerScratch* scratch,
                 std::vector<PreTokenizerScratch::Span>* spans) const;

  std::vector<Rule> rules_;
  size_t byte_level_rule_ = 0;  // index of the rule that runs after the ByteLevel prefix step
  bool byte_level_ = false;
  bool add_prefix_space_ = false;
};

}  // namespace mlarun::detail

#endif  // MLARUN_TOKENIZER_PRETOKENIZER_H_
