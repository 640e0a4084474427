// Declares a small deterministic byte-level BPE trainer that writes Hugging Face tokenizer.json
// and tokenizer_config.json files, for the generated test models.
#ifndef MLARUN_TOKENIZER_BPE_TRAINER_H_
#define MLARUN_TOKENIZER_BPE_TRAINER_H_

#include <span>
#include <string>
#include <string_view>

#include "tokenizer/chat_template.h"  // ChatFormat

namespace mlarun {

// Trains byte-level BPE on `corpus` and returns a complete tokenizer.json: DeepSeek-V3's Split
// pre-tokenizers then ByteLevel, ids 0-255 for the 256 byte tokens, then the learned tokens, then
// `special_tokens` as special added tokens, and a ByteLevel decoder. The most frequent adjacent
// pair (counted over pre-tokenized pieces) is merged first; ties go to the smaller (left id,
// right id). Deterministic. `vocab_size()` of the result is exactly `vocab_size`.
// Throws `TokenizerError` if `vocab_size` < 256 + special tokens, a special token is empty or
// repeated, or the corpus runs out of pairs to merge before reaching `vocab_size`.
std::string TrainByteLevelBpeJson(std::string_view corpus, int vocab_size,
                                  std::span<const std::string> special_tokens);

// Returns a tokenizer_config.json with `bos_token`, `eos_token` (also used as pad),
// `add_bos_token: true` and `ChatTemplateSource(format)` as chat_template.
std::string MakeTokenizerConfigJson(std::string_view bos_token, std::string_view eos_token,
                                    ChatFormat format = ChatFormat::kDeepSeekV3);

}  // namespace mlarun

#endif  // MLARUN_TOKENIZER_BPE_TRAINER_H_
