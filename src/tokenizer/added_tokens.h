// Declares `AddedTokenMatcher`, which finds added tokens in raw text before any pre-tokenization,
// leftmost-longest, as tokenizers' `AddedVocabulary` (an Aho-Corasick LeftmostLongest automaton)
// does.
#ifndef MLARUN_TOKENIZER_ADDED_TOKENS_H_
#define MLARUN_TOKENIZER_ADDED_TOKENS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/tokenizer_spec.h"

namespace mlarun::detail {

// A piece of input text: an added token (`token_id >= 0`) or plain text (`token_id == -1`).
struct TextSegment {
  size_t begin = 0;  // byte offsets into the text that was split
  size_t end = 0;
  int32_t token_id = -1;
};

// Matches a fixed set of added tokens. Immutable after construction; thread-safe.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `tokens` carry their final ids. Later duplicates of a content are ignored.
  explicit AddedTokenMatcher(const std::vector<AddedTokenSpec>& tokens);

  bool IsEmpty() const { return tokens_.empty(); }

  // Appends the segments of `text` to `out`: the matched tokens (honouring `lstrip`, `rstrip` and
  // `single_word`) and the non-empty plain runs between them, in order.
  void Split(std::string_view text, RegexScratch* scratch, std::vector<TextSegment>* out) const;

 private:
  // Returns the index into `tokens_` of the longest token starting at `pos`, or -1.
  int32_t LongestMatchAt(std::string_view text, size_t pos) const;
  bool IsWordCharBefore(std::string_view text, size_t pos, RegexScratch* scratch) const;
  bool IsWordCharAt(std::string_view text, size_t pos, RegexScratch* scratch) const;

  std::vector<AddedTokenSpec> tokens_;
  std::array<int32_t, 256> root_children_{};        // byte -> trie node, -1 if none
  std::unordered_map<uint64_t, int32_t> children_;  // (node << 8 | byte) -> trie node
  std::vector<int32_t> node_token_;                 // trie node -> token index or -1
  std::optional<Regex> word_char_;                  // built only when a token is `single_word`
};

}  // namespace mlarun::detail

#endif  // MLARUN_TOKENIZER_ADDED_TOKENS_H_
