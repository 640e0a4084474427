// The tokenizer of a GGUF file, both ways: metadata written from a Hugging Face tokenizer.json,
// and the tokenizer.json that a file's metadata describes (tokenizer/gguf_vocab.h does the
// vocabulary work; this joins it to the GGUF keys).
//
// Keys (GGUF specification, "Tokenizer"): tokenizer.ggml.model, .pre, .tokens, .token_type,
// .merges, .bos_token_id, .eos_token_id, .padding_token_id, .unknown_token_id, .add_bos_token,
// .add_eos_token; tokenizer.chat_template; tokenizer.huggingface.json (a whole tokenizer.json,
// written where the pre-tokenizer has no llama.cpp name, and read in preference to the rest).
// mlarun.placeholder_vocabulary (true) marks the stand-in vocabulary written for models without a
// tokenizer (llama.cpp needs one to load a file): such files serve token ids only.
#pragma once

#include <string>
#include <vector>

#include "formats/gguf.h"
#include "model/config.h"
#include "tokenizer/gguf_vocab.h"

namespace mlarun {

// Appends the tokenizer keys for `src_dir`'s tokenizer.json / tokenizer_config.json, or a
// placeholder vocabulary of config.vocab_size tokens where the model has none.
void AddGgufTokenizer(const std::string& src_dir, const ModelConfig& config,
                      std::vector<GgufKeyValue>& metadata);

// Whether the file carries a usable tokenizer (not none, not a placeholder).
bool GgufHasTokenizer(const GgufFile& file);

// The tokenizer.json and tokenizer_config.json the file's metadata describes. Throws Error
// naming the file when it has no tokenizer or an unsupported one.
TokenizerJsonFiles GgufTokenizerFiles(const GgufFile& file);

}  // namespace mlarun
