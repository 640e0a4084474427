// Declares the chat-template renderer: no Jinja engine, but exact re-implementations of the
// DeepSeek-V2 and DeepSeek-V3 chat templates (recognised from tokenizer_config.json or a model
// type) and a ChatML fallback.
#ifndef MLARUN_TOKENIZER_CHAT_TEMPLATE_H_
#define MLARUN_TOKENIZER_CHAT_TEMPLATE_H_

#include <span>
#include <string>
#include <string_view>

namespace mlarun {

enum class ChatFormat {
  kDeepSeekV2,  // "User: ...\n\nAssistant: ..." (DeepSeek-V2-Chat, DeepSeek-LLM-Chat)
  kDeepSeekV3,  // "<｜User｜>...<｜Assistant｜>..." (DeepSeek-V3, R1)
  kChatMl,      // "<|im_start|>role\n...<|im_end|>\n", the generic fallback
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or (V3 only) "tool"
  std::string content;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;                  // end with the assistant prefix
  std::string bos_token = "<｜begin▁of▁sentence｜>";  // DeepSeek's; pass the tokenizer's own
  std::string eos_token = "<｜end▁of▁sentence｜>";    // V2 only: V3's template spells it out
};

// Returns the format `chat_template` (tokenizer_config.json's Jinja source) implements. When it
// is empty or not recognised, falls back to `model_type` (config.json's "deepseek_v2" or
// "deepseek_v3"), then to ChatML.
ChatFormat DetectChatFormat(std::string_view chat_template, std::string_view model_type = {});

// Returns mlarun's own Jinja source for `format` (for generated tokenizer_config.json files): for
// {role, content} messages it renders exactly what `RenderChat` does, and `DetectChatFormat`
// recognises it.
std::string_view ChatTemplateSource(ChatFormat format);

// Returns "deepseek_v2", "deepseek_v3" or "chatml".
std::string_view ChatFormatName(ChatFormat format);

// Returns the prompt `messages` render to, byte for byte what the format's Jinja template gives.
// Throws `TokenizerError` for a role the format has no rendering for.
std::string RenderChat(ChatFormat format, std::span<const ChatMessage> messages,
                       const ChatTemplateOptions& options = {});

}  // namespace mlarun

#endif  // MLARUN_TOKENIZER_CHAT_TEMPLATE_H_
