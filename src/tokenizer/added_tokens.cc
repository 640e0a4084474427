// Implements added-token matching with a byte trie: at each candidate position the longest token
// wins, and the scan resumes after it (leftmost-longest, non-overlapping).
#include "tokenizer/added_tokens.h"

#include "tokenizer/utf8.h"

namespace mlarun::detail {
namespace {

// Unicode White_Space (PropList.txt), which Rust's `char::is_whitespace` tests and tokenizers'
// lstrip/rstrip strip.
bool IsWhiteSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Returns the start of the code point that ends right before `pos` (ill-formed bytes count alone).
size_t PreviousCharStart(std::string_view text, size_t pos) {
  size_t start = pos - 1;
  while (start > 0 && pos - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
    --start;
  }
  const Utf8Step step = DecodeUtf8At(text, start);
  return start + static_cast<size_t>(step.length) == pos ? start : pos - 1;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedTokenSpec>& tokens) {
  root_children_.fill(-1);
  node_token_.push_back(-1);  // node 0 is the root
  for (const AddedTokenSpec& token : tokens) {
    int32_t node = 0;
    for (const char c : token.content) {
      const auto byte = static_cast<uint8_t>(c);
      int32_t* child = nullptr;
      if (node == 0) {
        child = &root_children_[byte];
      } else {
        const auto [it, inserted] =
            children_.try_emplace((static_cast<uint64_t>(node) << 8) | byte, -1);
        child = &it->second;
      }
      if (*child < 0) {
        *child = static_cast<int32_t>(node_token_.size());
        node_token_.push_back(-1);
      }
      node = *child;
    }
    if (node_token_[node] >= 0) {
      continue;  // duplicate content: the first one wins
    }
    node_token_[node] = static_cast<int32_t>(tokens_.size());
    tokens_.push_back(token);
    if (token.single_word && !word_char_) {
      // Rust's `char::is_alphanumeric` (Alphabetic or Numeric), approximated by letters and
      // numbers.
      word_char_.emplace("[\\p{L}\\p{N}]", "added token single_word check");
    }
  }
}

int32_t AddedTokenMatcher::LongestMatchAt(std::string_view text, size_t pos) const {
  int32_t node = root_children_[static_cast<uint8_t>(text[pos])];
  int32_t best = -1;
  size_t i = pos + 1;
  while (node >= 0) {
    if (node_token_[node] >= 0) {
      best = node_token_[node];
    }
    if (i == text.size()) {
      break;
    }
    const auto it =
        children_.find((static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(text[i]));
    node = it == children_.end() ? -1 : it->second;
    ++i;
  }
  return best;
}

bool AddedTokenMatcher::IsWordCharAt(std::string_view text, size_t pos,
                                     RegexScratch* scratch) const {
  const Utf8Step step = DecodeUtf8At(text, pos);
  if (!step.valid) {
    return false;
  }
  bool found = false;
  word_char_->ForEachMatch(text.substr(pos, step.length), scratch,
                           [&](size_t, size_t) { found = true; });
  return found;
}

bool AddedTokenMatcher::IsWordCharBefore(std::string_view text, size_t pos,
                                         RegexScratch* scratch) const {
  return pos > 0 && IsWordCharAt(text, PreviousCharStart(text, pos), scratch);
}

void AddedTokenMatcher::Split(std::string_view text, RegexScratch* scratch,
                              std::vector<TextSegment>* out) const {
  size_t plain_start = 0;  // end of the previous token segment
  size_t pos = 0;
  while (pos < text.size()) {
    if (root_children_[static_cast<uint8_t>(text[pos])] < 0) {
      ++pos;
      continue;
    }
    const int32_t index = LongestMatchAt(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedTokenSpec& token = tokens_[index];
    size_t start = pos;
    size_t stop = pos + token.content.size();
    pos = stop;
    if (token.single_word && (IsWordCharBefore(text, start, scratch) ||
                              (stop < text.size() && IsWordCharAt(text, stop, scratch)))) {
      continue;  // not a whole word; the scan still resumes after it, as Aho-Corasick's does
    }
    if (token.lstrip) {
      while (start > plain_start) {
        const size_t prev = PreviousCharStart(text, start);
        const Utf8Step step = DecodeUtf8At(text, prev);
        if (!step.valid || !IsWhiteSpace(step.code_point)) {
          break;
        }
        start = prev;
      }
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        const Utf8Step step = DecodeUtf8At(text, stop);
        if (!step.valid || !IsWhiteSpace(step.code_point)) {
          break;
        }
        stop += static_cast<size_t>(step.length);
      }
      pos = stop;
    }
    if (plain_start < start) {
      out->push_back({plain_start, start, -1});
    }
    out->push_back({start, stop, token.id});
    plain_start = stop;
  }
  if (plain_start < text.size()) {
    out->push_back({plain_start, text.size(), -1});
  }
}

}  // namespace mlarun::detail
