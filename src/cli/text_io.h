// Text helpers for the CLI: loading a model directory's tokenizer and checking UTF-8 input.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "model/config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mlarun::cli {

// Loads tokenizer.json (+ tokenizer_config.json) from `model_dir`, or the tokenizer a GGUF file's
// metadata describes; throws Error naming the files.
Tokenizer LoadTokenizer(const std::string& model_dir);
// The chat format for the tokenizer's template (ChooseChatFormat); prints on stderr which one and
// why when the template is not one mlarun recognises.
ChatFormat ChosenChatFormat(const Tokenizer& tokenizer, const ModelConfig& config);
// Returns true if `text` is well-formed UTF-8; otherwise sets `*bad_offset` to the first bad byte.
bool IsValidUtf8(std::string_view text, size_t* bad_offset);
// Reads all of a file (or stdin for "-" / empty); throws Error naming the file.
std::string ReadInput(const std::string& path);

}  // namespace mlarun::cli
