// Tokenizer loading with CLI-style errors and a strict UTF-8 validator (RFC 3629: no overlongs,
// no surrogates, nothing above U+10FFFF).
#include "cli/text_io.h"

#include <filesystem>
#include <iostream>
#include <iterator>

#include "core/error.h"
#include "core/mapped_file.h"
#include "model/gguf_model.h"
#include "model/gguf_tokenizer.h"
#include "tokenizer/tokenizer_error.h"

namespace mlarun::cli {

Tokenizer LoadTokenizer(const std::string& model_dir) {
  if (IsGgufFile(model_dir)) {
    const TokenizerJsonFiles files = GgufTokenizerFiles(GgufFile::Open(model_dir));
    try {
      return Tokenizer::FromJson(files.tokenizer_json, files.config_json, model_dir);
    } catch (const TokenizerError& e) {
      throw Error(e.what());
    }
  }
  if (!std::filesystem::exists(model_dir + "/tokenizer.json")) {
    throw Error(model_dir +
                "/tokenizer.json: missing (text commands need the model's tokenizer; "
                "use --prompt-ids for raw token ids)");
  }
  try {
    return Tokenizer::FromDirectory(model_dir);
  } catch (const TokenizerError& e) {
    throw Error(e.what());
  }
}

ChatFormat ChosenChatFormat(const Tokenizer& tokenizer, const ModelConfig& config) {
  const ChatFormatChoice choice = ChooseChatFormat(tokenizer.chat_template(), config.model_type);
  if (!choice.recognised()) std::cerr << DescribeChatFormatChoice(choice) << "\n";
  return choice.format;
}

bool IsValidUtf8(std::string_view text, size_t* bad_offset) {
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      *bad_offset = i;
      return false;
    }
    if (i + len > text.size()) {
      *bad_offset = i;
      return false;
    }
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0) != 0x80) {
        *bad_offset = i;
        return false;
      }
      cp = (cp << 6) | (cc & 0x3f);
    }
    const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

std::string ReadInput(const std::string& path) {
  if (path.empty() || path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  return ReadFileToString(path);
}

}  // namespace mlarun::cli
