// Declares the conversion between a GGUF file's tokenizer metadata (llama.cpp's `tokenizer.ggml.*`
// keys) and the Hugging Face tokenizer.json + tokenizer_config.json that `Tokenizer::FromJson`
// loads. Only byte-level BPE (`tokenizer.ggml.model` "gpt2") is supported; SentencePiece ("llama")
// and the other llama.cpp tokenizer models are not.
#ifndef MLARUN_TOKENIZER_GGUF_VOCAB_H_
#define MLARUN_TOKENIZER_GGUF_VOCAB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_error.h"  // TokenizerError

namespace mlarun {

// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`, gguf-py's `TokenType`).
enum class GgufTokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// The tokenizer metadata of a GGUF file. Each field is the GGUF key named in its comment.
struct GgufVocab {
  std::string source;  // the file name, for error messages (not a key)
  std::string model;   // tokenizer.ggml.model: "gpt2" is byte-level BPE
  std::string pre;     // tokenizer.ggml.pre: llama.cpp's pre-tokenizer name ("" when absent)
  std::vector<std::string> tokens;   // tokenizer.ggml.tokens, in id order, as spelled in the vocab
  std::vector<std::string> merges;   // tokenizer.ggml.merges, "left right", in rank order
  std::vector<int32_t> token_types;  // tokenizer.ggml.token_type (GgufTokenType); may be empty
  std::optional<int64_t> bos_id;     // tokenizer.ggml.bos_token_id
  std::optional<int64_t> eos_id;     // tokenizer.ggml.eos_token_id
  std::optional<int64_t> pad_id;     // tokenizer.ggml.padding_token_id
  std::optional<int64_t> unk_id;     // tokenizer.ggml.unknown_token_id
  std::optional<bool> add_bos;       // tokenizer.ggml.add_bos_token
  std::optional<bool> add_eos;       // tokenizer.ggml.add_eos_token
  std::string chat_template;         // tokenizer.chat_template ("" when absent)
  // tokenizer.huggingface.json: a whole tokenizer.json ("" when absent). When present it is the
  // exact tokenizer, and `TokenizerJsonFromGgufVocab` uses it instead of `pre`.
  std::string huggingface_json;

  // Not a key: filled by `GgufVocabFromTokenizerJson` with the ways in which llama.cpp, reading
  // only the tokenizer.ggml.* keys, would tokenize differently from the tokenizer.json (one line
  // each, for a GGUF writer to print as warnings). Empty when the keys say it all.
  std::vector<std::string> differences;
};

// A tokenizer.json and its tokenizer_config.json, as file contents.
struct TokenizerJsonFiles {
  std::string tokenizer_json;
  std::string config_json;
};

// The llama.cpp pre-tokenizer names `TokenizerJsonFromGgufVocab` accepts, canonical names first
// ("default", "gpt-2", "llama-bpe", "deepseek-llm", "deepseek-coder", "deepseek-v3", "qwen2"), then
// the aliases llama.cpp also accepts for the same regexes ("llama3", "llama-v3",
// "deepseek-r1-qwen") and "gpt2".
std::vector<std::string_view> SupportedGgufPreTokenizers();

// Returns the tokenizer.json and tokenizer_config.json that `v` describes, for
// `Tokenizer::FromJson(files.tokenizer_json, files.config_json, v.source)`.
// - tokenizer.json: `v.huggingface_json` when it is present (after checking that its vocab and
//   added tokens have the ids `v.tokens` gives them); otherwise built from the keys as llama.cpp
//   reads them: a BPE model whose vocab is every token except the unused ones (those ids decode to
//   nothing, as ids missing from a tokenizer.json do), `ignore_merges` where llama.cpp sets it
//   (the Llama 3 names), the merges, a pre-tokenizer of the Split regexes of `pre` (as spelled in
//   the model's original tokenizer.json) then ByteLevel, a ByteLevel decoder, and an added token
//   for every control, unknown (special) and user-defined (not special) token. An absent `pre`
//   means "default", as in llama.cpp.
// - tokenizer_config.json: bos_token, eos_token, pad_token and unk_token as the token strings of
//   the ids, add_bos_token (when absent: true for the Llama 3 names, as llama.cpp defaults it,
//   else false), add_eos_token (false when absent) and chat_template.
// An empty token is a gap (llama.cpp renames it "[EMPTY_<id>]").
// Throws `TokenizerError` with one line naming `v.source` and the key: a model other than "gpt2",
// an unknown `pre`, no tokens, a repeated token, a token or chat template that is not UTF-8, a
// token_type array whose length differs from the tokens' or that holds an unknown type, a merge
// that is not "left right" or names a token (or makes one) that is not among the tokens, or a
// special-token id out of range or unused.
TokenizerJsonFiles TokenizerJsonFromGgufVocab(const GgufVocab& v);

// Returns the GGUF tokenizer metadata for a Hugging Face tokenizer.json (+ tokenizer_config.json,
// which may be empty), as llama.cpp's convert_hf_to_gguf.py writes it for a byte-level BPE model:
// model "gpt2"; the tokens in id order, added tokens included, with ids that neither the vocab
// nor an added token uses filled by "[PAD<id>]" (type unused), up to at least `min_vocab_size`
// tokens (pass config.json's vocab_size: llama.cpp wants a token per embedding row); token types
// control for special added tokens, user-defined for the other added tokens, normal otherwise
// (convert_hf_to_gguf.py also makes control tokens of added tokens that merely look special, such
// as DeepSeek-V3's non-special "<｜User｜>"; this keeps tokenizer.json's flag); the
// merges as "left right"; bos/eos/pad/unk ids from the config's token strings (unk also from
// model.unk_token); add_bos/add_eos from add_bos_token/add_eos_token when the config has them; the
// chat template (the "default" one of a list).
// `pre` is the llama.cpp name whose pre-tokenizer equals the tokenizer.json's (its Split regexes,
// each Isolated, then ByteLevel without a prefix space). When none does, `pre` is "default",
// `huggingface_json` is `tokenizer_json` (the writer should store it as
// tokenizer.huggingface.json, which mlarun reads back exactly) and `differences` says so.
// `differences` also lists what the keys cannot express: a normalizer, lstrip / rstrip /
// single_word added tokens, an `ignore_merges` that llama.cpp sets otherwise, byte fallback.
// Throws `TokenizerError` naming `source` and the field: not JSON, a model other than BPE, no
// ByteLevel pre-tokenizer (not byte-level BPE), two tokens with one id, a merge part containing a
// space (a GGUF merge string cannot hold it), a config token that is not in the vocab.
GgufVocab GgufVocabFromTokenizerJson(std::string_view tokenizer_json, std::string_view config_json,
                                     std::string source, int64_t min_vocab_size = 0);

}  // namespace mlarun

#endif  // MLARUN_TOKENIZER_GGUF_VOCAB_H_
