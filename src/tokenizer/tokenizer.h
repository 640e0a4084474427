// Declares `Tokenizer`, which loads a Hugging Face tokenizer.json (byte-level BPE, as used by
// DeepSeek-V2/V3) and encodes/decodes text, and `StreamDecoder` for incremental detokenization.
#ifndef MLARUN_TOKENIZER_TOKENIZER_H_
#define MLARUN_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer_error.h"  // TokenizerError

namespace mlarun {

// What `Encode` does with bytes that are not well-formed UTF-8.
enum class InvalidUtf8 {
  // Keep them: they are split off as their own pieces and encoded as byte tokens, so
  // `Decode(Encode(x)) == x` for every byte string `x`.
  kKeepBytes,
  // Replace each maximal ill-formed subpart by U+FFFD first, which is what a JavaScript or
  // Python caller of Hugging Face tokenizers sees; ids then equal the reference's.
  kReplace,
};

struct EncodeOptions {
  bool add_bos = false;  // prepend `bos_id()`
  InvalidUtf8 invalid_utf8 = InvalidUtf8::kKeepBytes;
};

// A loaded tokenizer. Immutable after loading; every method is thread-safe.
class Tokenizer {
 public:
  // Loads `dir`/tokenizer.json and, if present, `dir`/tokenizer_config.json.
  static Tokenizer FromDirectory(const std::filesystem::path& dir);
  // Loads `tokenizer_json` and, if present, tokenizer_config.json from the same directory.
  static Tokenizer FromFile(const std::filesystem::path& tokenizer_json);
  // Loads from file contents. `config_json` may be empty. `source` names the file in errors.
  static Tokenizer FromJson(std::string_view tokenizer_json, std::string_view config_json = {},
                            std::string_view source = "tokenizer.json");

  Tokenizer(Tokenizer&& other) noexcept;
  Tokenizer& operator=(Tokenizer&& other) noexcept;
  ~Tokenizer();

  // Returns the token ids of `text`: added tokens are matched first (longest match), the rest is
  // normalized, pre-tokenized and BPE-encoded. Throws `TokenizerError` if `add_special_bos` is set
  // and there is no bos token.
  std::vector<int32_t> Encode(std::string_view text, bool add_special_bos = false) const;
  std::vector<int32_t> Encode(std::string_view text, const EncodeOptions& options) const;

  // Returns the bytes `ids` stand for. Ids outside the vocabulary decode to nothing (as in
  // tokenizers); special tokens are dropped when `skip_special` is set. The result is the exact
  // byte string, which may end inside a UTF-8 character; `StreamDecoder` never returns such text.
  std::string Decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // Returns the bytes one token decodes to ("" for an unknown id).
  std::string_view TokenToPiece(int32_t id) const;
  // Returns the token as spelled in tokenizer.json, e.g. "Ġworld" ("" for an unknown id).
  std::string_view IdToToken(int32_t id) const;
  // Returns the id of an added token's content or of a vocab entry as spelled in tokenizer.json.
  std::optional<int32_t> TokenToId(std::string_view token) const;

  // Ids of tokenizer_config.json's bos_token/eos_token (else well-known added tokens), or -1.
  int32_t bos_id() const;
  int32_t eos_id() const;
  // One past the largest id in the vocab and the added tokens.
  int32_t vocab_size() const;
  // True for added tokens marked `"special": true`.
  bool IsSpecial(int32_t id) const;
  // tokenizer_config.json's `add_bos_token` (false when absent).
  bool add_bos_token() const;
  // tokenizer_config.json's `chat_template` ("" when absent).
  const std::string& chat_template() const;

 private:
  friend class StreamDecoder;
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Returns `bytes` with every ill-formed UTF-8 sequence (maximal subpart) replaced by U+FFFD, as
// JavaScript's and Python's lossy decoders do: e.g. a token piece that ends inside a character.
std::string LossyUtf8(std::string_view bytes);

// Turns a stream of ids into text that is always whole UTF-8 characters: bytes of a character
// that is not complete yet are held back until it is. Ill-formed sequences come out as U+FFFD,
// so the concatenated output equals the lossy UTF-8 reading of `Decode(all ids)`.
class StreamDecoder {
 public:
  // `tokenizer` (or the tokenizer it is moved into) must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  // Returns the text that `id` completes (possibly empty).
  std::string Feed(int32_t id);
  // Returns what is still held back (an unfinished character becomes U+FFFD) and resets.
  std::string Flush();

 private:
  const Tokenizer::Impl* impl_;  // stable across moves of the `Tokenizer`
  bool skip_special_;
  bool first_ = true;
  std::string pending_;
};

}  // namespace mlarun

#endif  // MLARUN_TOKENIZER_TOKENIZER_H_
