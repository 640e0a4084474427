// Builds the GPT-2 byte-level alphabet once per tokenizer and converts between bytes and their
// printable stand-ins.
#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace mlarun::detail {
namespace {

bool StandsForItself(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

}  // namespace

ByteLevelAlphabet::ByteLevelAlphabet() {
  code_point_to_byte_.fill(-1);
  char32_t next_shifted = 0x100;
  for (int byte = 0; byte < 256; ++byte) {
    const char32_t code_point =
        StandsForItself(byte) ? static_cast<char32_t>(byte) : next_shifted++;
    byte_to_code_point_[byte] = code_point;
    code_point_to_byte_[code_point] = static_cast<int16_t>(byte);
    AppendUtf8(code_point, &byte_utf8_[byte]);
  }
}

std::optional<uint8_t> ByteLevelAlphabet::ByteOf(char32_t code_point) const {
  if (code_point >= code_point_to_byte_.size() || code_point_to_byte_[code_point] < 0) {
    return std::nullopt;
  }
  return static_cast<uint8_t>(code_point_to_byte_[code_point]);
}

std::string ByteLevelAlphabet::Encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) {
    out.append(byte_utf8_[static_cast<uint8_t>(c)]);
  }
  return out;
}

std::optional<std::string> ByteLevelAlphabet::Decode(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Step step = DecodeUtf8At(text, pos);
    if (!step.valid) {
      return std::nullopt;
    }
    const std::optional<uint8_t> byte = ByteOf(step.code_point);
    if (!byte) {
      return std::nullopt;
    }
    out.push_back(static_cast<char>(*byte));
    pos += step.length;
  }
  return out;
}

}  // namespace mlarun::detail
