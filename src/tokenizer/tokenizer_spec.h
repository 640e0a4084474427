// Declares `TokenizerSpec`, the plain-data view of a Hugging Face tokenizer.json (+ optional
// tokenizer_config.json), and the parsers that fill it, validating every field they read.
#ifndef MLARUN_TOKENIZER_TOKENIZER_SPEC_H_
#define MLARUN_TOKENIZER_TOKENIZER_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mlarun::detail {

// How a Split pre-tokenizer treats the delimiters it finds (tokenizers `SplitDelimiterBehavior`).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// One `{"type": "Split"}` pre-tokenizer.
struct SplitSpec {
  std::string pattern;  // regex (Oniguruma syntax) or literal string
  bool is_regex = true;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  std::string where;  // "tokenizer.json: pre_tokenizer.pretokenizers[0]" for error messages
};

// The `{"type": "ByteLevel"}` pre-tokenizer; must come last in the pre-tokenizer sequence.
struct ByteLevelSpec {
  bool present = false;
  bool add_prefix_space = false;
  bool use_regex = false;  // true: split with the GPT-2 regex first
};

// One normalizer of the (flattened) normalizer sequence.
struct NormalizerSpec {
  enum class Kind { kReplace, kPrepend };
  Kind kind = Kind::kReplace;
  std::string pattern;  // kReplace: what to replace (regex or literal)
  bool is_regex = false;
  std::string content;  // kReplace: replacement; kPrepend: the prefix
  std::string where;
};

// One entry of `added_tokens`. `id` is the id Hugging Face tokenizers assigns, which must equal
// the one written in the file.
struct AddedTokenSpec {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

// `model` of type BPE.
struct BpeSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;       // token string -> id, in file order
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

// Everything the tokenizer needs from tokenizer.json and tokenizer_config.json.
struct TokenizerSpec {
  std::string source;  // tokenizer.json path (or name) used in error messages
  std::vector<NormalizerSpec> normalizers;
  std::vector<SplitSpec> splits;
  ByteLevelSpec byte_level;
  BpeSpec bpe;
  std::vector<AddedTokenSpec> added_tokens;
  bool byte_level_decoder = false;  // false: no decoder (tokens are joined with ' ')
  // From tokenizer_config.json (empty when absent).
  std::string bos_token;
  std::string eos_token;
  std::optional<bool> add_bos_token;
  std::string chat_template;
};

// Parses tokenizer.json text. Throws `TokenizerError` naming `source` and the offending field.
TokenizerSpec ParseTokenizerJson(std::string_view json_text, std::string_view source);

// Parses tokenizer_config.json text into the config fields of `spec`. Throws `TokenizerError`.
void ParseTokenizerConfigJson(std::string_view json_text, std::string_view source,
                              TokenizerSpec* spec);

}  // namespace mlarun::detail

#endif  // MLARUN_TOKENIZER_TOKENIZER_SPEC_H_
