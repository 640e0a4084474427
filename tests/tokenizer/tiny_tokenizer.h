// Builds small hand-made tokenizer.json documents for the tokenizer unit tests: a byte-level BPE
// whose ids are 0-255 for the bytes (in byte order) followed by one token per merge.
#ifndef MLARUN_TESTS_TOKENIZER_TINY_TOKENIZER_H_
#define MLARUN_TESTS_TOKENIZER_TINY_TOKENIZER_H_

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/byte_level.h"

namespace mlarun::testing {

struct TinyAddedToken {
  std::string content;
  bool special = true;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

struct TinyTokenizerOptions {
  // Merges as raw byte strings; merge i creates the token with id 256 + i.
  std::vector<std::pair<std::string, std::string>> merges;
  bool string_form_merges = false;    // "a b" instead of ["a", "b"]
  std::vector<TinyAddedToken> added;  // ids follow the merged tokens, in order
  // The pre_tokenizer; null means ByteLevel without regex and without prefix space.
  nlohmann::ordered_json pre_tokenizer = nullptr;
};

// Returns the tokenizer.json text.
inline std::string TinyTokenizerJson(const TinyTokenizerOptions& options) {
  const detail::ByteLevelAlphabet alphabet;
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
  for (int byte = 0; byte < 256; ++byte) {
    vocab[std::string(alphabet.Utf8Of(static_cast<uint8_t>(byte)))] = byte;
  }
  nlohmann::ordered_json merges = nlohmann::ordered_json::array();
  int next_id = 256;
  for (const auto& [left, right] : options.merges) {
    const std::string a = alphabet.Encode(left);
    const std::string b = alphabet.Encode(right);
    if (!vocab.contains(a + b)) vocab[a + b] = next_id++;
    if (options.string_form_merges) {
      merges.push_back(a + " " + b);
    } else {
      merges.push_back({a, b});
    }
  }
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (const TinyAddedToken& token : options.added) {
    added.push_back({{"id", next_id++},
                     {"content", token.content},
                     {"single_word", token.single_word},
                     {"lstrip", token.lstrip},
                     {"rstrip", token.rstrip},
                     {"normalized", token.normalized},
                     {"special", token.special}});
  }
  const nlohmann::ordered_json byte_level = {{"type", "ByteLevel"},
                                             {"add_prefix_space", false},
                                             {"trim_offsets", true},
                                             {"use_regex", false}};
  const nlohmann::ordered_json root = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", options.pre_tokenizer.is_null() ? byte_level : options.pre_tokenizer},
      {"post_processor", nullptr},
      {"decoder", byte_level},
      {"model", {{"type", "BPE"}, {"unk_token", nullptr}, {"vocab", vocab}, {"merges", merges}}},
  };
  return root.dump();
}

}  // namespace mlarun::testing

#endif  // MLARUN_TESTS_TOKENIZER_TINY_TOKENIZER_H_
