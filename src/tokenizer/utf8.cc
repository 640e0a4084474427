// Implements the UTF-8 helpers: well-formedness follows Unicode 15 Table 3-7 ("Well-Formed UTF-8
// Byte Sequences"), and replacement follows the maximal-subpart practice of section 3.9.
#include "tokenizer/utf8.h"

namespace mlarun::detail {
namespace {

bool InRange(unsigned char byte, unsigned char low, unsigned char high) {
  return byte >= low && byte <= high;
}

}  // namespace

Utf8Step DecodeUtf8At(std::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  Utf8Step step;
  if (lead < 0x80) {
    step.length = 1;
    step.valid = true;
    step.code_point = lead;
    return step;
  }
  int need = 0;  // continuation bytes after the lead
  unsigned char second_low = 0x80;
  unsigned char second_high = 0xBF;
  char32_t code_point = 0;
  if (InRange(lead, 0xC2, 0xDF)) {
    need = 1;
    code_point = lead & 0x1F;
  } else if (InRange(lead, 0xE0, 0xEF)) {
    need = 2;
    code_point = lead & 0x0F;
    if (lead == 0xE0) {
      second_low = 0xA0;  // no overlongs
    }
    if (lead == 0xED) {
      second_high = 0x9F;  // no surrogates
    }
  } else if (InRange(lead, 0xF0, 0xF4)) {
    need = 3;
    code_point = lead & 0x07;
    if (lead == 0xF0) {
      second_low = 0x90;  // no overlongs
    }
    if (lead == 0xF4) {
      second_high = 0x8F;  // <= U+10FFFF
    }
  } else {
    step.length = 1;  // 80..C1, F5..FF can never start a sequence
    return step;
  }
  int consumed = 1;
  for (int i = 0; i < need; ++i) {
    if (pos + consumed >= text.size()) {
      step.length = consumed;
      step.truncated = true;
      return step;
    }
    const auto byte = static_cast<unsigned char>(text[pos + consumed]);
    const unsigned char low = i == 0 ? second_low : 0x80;
    const unsigned char high = i == 0 ? second_high : 0xBF;
    if (!InRange(byte, low, high)) {
      step.length = consumed;
      return step;
    }
    code_point = (code_point << 6) | (byte & 0x3F);
    ++consumed;
  }
  step.length = consumed;
  step.valid = true;
  step.code_point = code_point;
  return step;
}

bool IsValidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Utf8Step step = DecodeUtf8At(text, pos);
    if (!step.valid) {
      return false;
    }
    pos += step.length;
  }
  return true;
}

std::string ReplaceInvalidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const Utf8Step step = DecodeUtf8At(text, pos);
    if (step.valid) {
      out.append(text.substr(pos, step.length));
    } else {
      out.append(kReplacementChar);
    }
    pos += step.length;
  }
  return out;
}

size_t EmittablePrefixLength(std::string_view text) {
  // Only the last three bytes can hold a truncated sequence; find where it starts, if anywhere.
  const size_t first = text.size() > 3 ? text.size() - 3 : 0;
  for (size_t pos = first; pos < text.size(); ++pos) {
    if ((static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) {
      continue;  // continuation byte
    }
    const Utf8Step step = DecodeUtf8At(text, pos);
    if (step.truncated) {
      return pos;
    }
  }
  return text.size();
}

void AppendUtf8(char32_t code_point, std::string* out) {
  if (code_point < 0x80) {
    out->push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

}  // namespace mlarun::detail
