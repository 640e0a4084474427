// Declares the GPT-2 byte-level alphabet: the reversible map from the 256 byte values to 256
// printable code points that byte-level BPE vocabularies are written in.
#ifndef MLARUN_TOKENIZER_BYTE_LEVEL_H_
#define MLARUN_TOKENIZER_BYTE_LEVEL_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mlarun::detail {

// The map of openai/gpt-2 `encoder.py` `bytes_to_unicode()` (also Hugging Face tokenizers'
// `pre_tokenizers/byte_level.rs`): bytes 0x21-0x7E, 0xA1-0xAC and 0xAE-0xFF stand for themselves;
// the other 68 bytes map, in increasing order, to U+0100, U+0101, ... so that no byte is shown as
// whitespace or a control character (space 0x20 becomes U+0120 'Ġ', newline 0x0A U+010A 'Ċ').
class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();

  // Returns the code point that stands for `byte`.
  char32_t CodePointOf(uint8_t byte) const { return byte_to_code_point_[byte]; }

  // Returns the UTF-8 encoding of the code point that stands for `byte` (1 or 2 bytes).
  std::string_view Utf8Of(uint8_t byte) const { return byte_utf8_[byte]; }

  // Returns the byte that `code_point` stands for, or nullopt if it is not in the alphabet.
  std::optional<uint8_t> ByteOf(char32_t code_point) const;

  // Returns `bytes` written in the alphabet (every byte becomes one code point).
  std::string Encode(std::string_view bytes) const;

  // Returns the bytes `text` stands for, or nullopt if `text` is not valid UTF-8 or contains a
  // code point outside the alphabet (Hugging Face's ByteLevel decoder then keeps the token as is).
  std::optional<std::string> Decode(std::string_view text) const;

 private:
  std::array<char32_t, 256> byte_to_code_point_{};
  std::array<std::string, 256> byte_utf8_;
  std::array<int16_t, 324> code_point_to_byte_{};  // -1 where not in the alphabet; max is U+0143
};

}  // namespace mlarun::detail

#endif  // MLARUN_TOKENIZER_BYTE_LEVEL_H_
