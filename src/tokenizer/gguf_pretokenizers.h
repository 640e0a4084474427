// Declares the llama.cpp BPE pre-tokenizers that a GGUF file's tokenizer.ggml.pre names, each as
// the tokenizer.json pre_tokenizer of the models it was made for: Split regexes (each Isolated,
// not inverted), then ByteLevel without a prefix space.
#ifndef MLARUN_TOKENIZER_GGUF_PRETOKENIZERS_H_
#define MLARUN_TOKENIZER_GGUF_PRETOKENIZERS_H_

#include <string>
#include <string_view>
#include <vector>

namespace mlarun::detail {

struct GgufPreTokenizer {
  std::string_view name;              // llama.cpp's name, e.g. "llama-bpe"
  std::vector<std::string> patterns;  // the Split regexes, as the models' tokenizer.json spell them
  bool byte_level_regex = false;      // "gpt-2": ByteLevel's own GPT-2 regex (use_regex) instead
  bool ignore_merges = false;         // llama.cpp sets `ignore_merges` for the name
  bool add_bos = false;               // llama.cpp's add_bos default for the name
};

// The supported pre-tokenizers under their canonical names: "default", "gpt-2", "llama-bpe",
// "deepseek-llm", "deepseek-coder", "deepseek-v3", "qwen2".
const std::vector<GgufPreTokenizer>& GgufPreTokenizers();

// The canonical names, then the aliases llama.cpp also takes for the same regexes ("llama3",
// "llama-v3", "deepseek-r1-qwen") and "gpt2" (the model key's spelling; llama.cpp wants "gpt-2").
std::vector<std::string_view> GgufPreTokenizerNames();

// Returns the pre-tokenizer `name` (canonical or alias) stands for, or nullptr.
const GgufPreTokenizer* FindGgufPreTokenizer(std::string_view name);

// Returns the pre-tokenizer that splits exactly as `patterns` (a tokenizer.json's Split regexes
// in order, each Isolated; ByteLevel's GPT-2 regex when it has use_regex; tokenizers' Digits as
// "\p{N}" or "\p{N}+"), or nullptr. CR, LF and tab count the same as their escapes. One near
// match is accepted: deepseek-llm's files split digits one by one where llama.cpp splits runs;
// `*difference` then says so if some merge of `merges` ("left right") joins digits.
const GgufPreTokenizer* MatchGgufPreTokenizer(std::vector<std::string> patterns,
                                              const std::vector<std::string>& merges,
                                              std::string* difference);

}  // namespace mlarun::detail

#endif  // MLARUN_TOKENIZER_GGUF_PRETOKENIZERS_H_
