// Declares the UTF-8 helpers the tokenizer shares: validation, "maximal subpart" replacement of
// invalid sequences by U+FFFD, and the complete-prefix test the stream decoder relies on.
#ifndef MLARUN_TOKENIZER_UTF8_H_
#define MLARUN_TOKENIZER_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace mlarun::detail {

// U+FFFD REPLACEMENT CHARACTER, UTF-8 encoded.
inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

// Result of looking at the UTF-8 sequence that starts at one position.
struct Utf8Step {
  // Bytes consumed: the sequence length when `valid`, else the length of the maximal subpart of an
  // ill-formed sequence (always >= 1), as in Unicode 15 section 3.9 "U+FFFD Substitution of
  // Maximal Subparts" (the WHATWG Encoding Standard decoder behaves the same).
  int length = 0;
  bool valid = false;
  // True when the sequence is cut short by the end of the input but could still become valid.
  bool truncated = false;
  char32_t code_point = 0;  // meaningful only when `valid`
};

// Decodes the sequence at `text[pos]`. PRECONDITIONS: `pos < text.size()`.
Utf8Step DecodeUtf8At(std::string_view text, size_t pos);

// Returns true if `text` is well-formed UTF-8 (no surrogates, no overlongs, <= U+10FFFF).
bool IsValidUtf8(std::string_view text);

// Returns `text` with every maximal subpart of an ill-formed sequence replaced by U+FFFD: the same
// string Node's `Buffer.toString("utf8")` and Rust's `String::from_utf8_lossy` produce.
std::string ReplaceInvalidUtf8(std::string_view text);

// Returns the length of the longest prefix of `text` that can be emitted now: every sequence in it
// is complete (valid or definitely invalid); what follows is a truncated but possibly valid tail.
size_t EmittablePrefixLength(std::string_view text);

// Appends the UTF-8 encoding of `code_point` (<= U+10FFFF) to `out`.
void AppendUtf8(char32_t code_point, std::string* out);

}  // namespace mlarun::detail

#endif  // MLARUN_TOKENIZER_UTF8_H_
