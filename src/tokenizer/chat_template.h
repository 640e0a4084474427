// Declares the chat-template renderer: no Jinja engine, but exact re-implementations of the
// DeepSeek-V2, DeepSeek-V3 and Llama 3 chat templates (recognised from tokenizer_config.json or a
// model type) and a ChatML fallback.
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
  // "<|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>" (Meta-Llama-3-*-Instruct; not
  // Llama 3.1 and later, whose template adds a dated system header)
  kLlama3,
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

// What decided the format `ChooseChatFormat` returns.
enum class ChatFormatBasis {
  kTemplate,   // the chat_template is one mlarun recognises
  kModelType,  // the template is empty or not recognised; config.json's model_type decided
  kFallback,   // neither: ChatML, which the model may never have seen
};

struct ChatFormatChoice {
  ChatFormat format = ChatFormat::kChatMl;
  ChatFormatBasis basis = ChatFormatBasis::kFallback;
  bool has_template = false;  // the chat_template was not empty
  std::string model_type;     // the model_type that decided, for kModelType
  // For kFallback: the template has ChatML's markers (e.g. Qwen's, which adds a default system
  // prompt), so ChatML is close but not exact.
  bool uses_chatml_markers = false;

  // True when `format` is what the model's own chat_template renders.
  bool recognised() const { return basis == ChatFormatBasis::kTemplate; }
};

// Returns the format `chat_template` (tokenizer_config.json's Jinja source) implements, and what
// decided it. Recognised: the DeepSeek-V2, DeepSeek-V3 and Llama 3 templates (by their markers),
// and mlarun's own ChatML template (`ChatTemplateSource`). When the template is empty or not
// recognised, falls back to `model_type` (config.json's "deepseek_v2" or "deepseek_v3"), then to
// ChatML.
ChatFormatChoice ChooseChatFormat(std::string_view chat_template, std::string_view model_type = {});

// `ChooseChatFormat(chat_template, model_type).format`.
ChatFormat DetectChatFormat(std::string_view chat_template, std::string_view model_type = {});

// Returns one line for the user: which format is used and why. It starts with "warning: " when
// the model's own template was not recognised (`!choice.recognised()`), e.g.
// "warning: the chat template in tokenizer_config.json is not one mlarun knows (it renders
// deepseek_v2, deepseek_v3, llama3 and chatml); falling back to chatml, which this model may not
// have been trained on: prompts may be wrong".
std::string DescribeChatFormatChoice(const ChatFormatChoice& choice);

// Returns mlarun's own Jinja source for `format` (for generated tokenizer_config.json files): for
// {role, content} messages it renders exactly what `RenderChat` does, and `DetectChatFormat`
// recognises it.
std::string_view ChatTemplateSource(ChatFormat format);

// Returns "deepseek_v2", "deepseek_v3", "chatml" or "llama3".
std::string_view ChatFormatName(ChatFormat format);

// Returns the prompt `messages` render to, byte for byte what the format's Jinja template gives.
// Throws `TokenizerError` for a role the format has no rendering for.
std::string RenderChat(ChatFormat format, std::span<const ChatMessage> messages,
                       const ChatTemplateOptions& options = {});

}  // namespace mlarun

#endif  // MLARUN_TOKENIZER_CHAT_TEMPLATE_H_
