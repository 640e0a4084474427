// Renders chats in the DeepSeek-V2, DeepSeek-V3, Llama 3 and ChatML formats. Each renderer
// restates the logic of the model's published Jinja chat_template (tokenizer_config.json of
// deepseek-ai/DeepSeek-V2-Chat, deepseek-ai/DeepSeek-V3 and meta-llama/Meta-Llama-3-8B-Instruct)
// for plain {role, content} messages.
#include "tokenizer/chat_template.h"

#include "tokenizer/tokenizer_error.h"
#include "tokenizer/utf8.h"

namespace mlarun {
namespace {

constexpr std::string_view kV3User = "<｜User｜>";
constexpr std::string_view kV3Assistant = "<｜Assistant｜>";
constexpr std::string_view kV3OutputsBegin = "<｜tool▁outputs▁begin｜>";
constexpr std::string_view kV3OutputsEnd = "<｜tool▁outputs▁end｜>";
constexpr std::string_view kV3OutputBegin = "<｜tool▁output▁begin｜>";
constexpr std::string_view kV3OutputEnd = "<｜tool▁output▁end｜>";
// The V3 template writes this literally rather than `eos_token`.
constexpr std::string_view kV3EndOfSentence = "<｜end▁of▁sentence｜>";

[[noreturn]] void FailRole(ChatFormat format, size_t index, const std::string& role) {
  throw TokenizerError("chat template " + std::string(ChatFormatName(format)) + ": messages[" +
                       std::to_string(index) + "].role: unsupported role '" + role + "'");
}

// DeepSeek-V3: bos, then every system message joined by "\n\n", then the turns. Tool results
// follow the template's `ns.is_tool` / `ns.is_output_first` state (the latter never resets).
std::string RenderDeepSeekV3(std::span<const ChatMessage> messages,
                             const ChatTemplateOptions& options) {
  std::string out = options.bos_token;
  bool first_system = true;
  for (const ChatMessage& message : messages) {
    if (message.role != "system") {
      continue;
    }
    if (!first_system) {
      out += "\n\n";
    }
    out += message.content;
    first_system = false;
  }
  bool is_tool = false;
  bool is_output_first = true;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    if (message.role == "system") {
      continue;
    }
    if (message.role == "user") {
      is_tool = false;
      out.append(kV3User).append(message.content);
    } else if (message.role == "assistant") {
      out.append(is_tool ? kV3OutputsEnd : kV3Assistant).append(message.content);
      out.append(kV3EndOfSentence);
      is_tool = false;
    } else if (message.role == "tool") {
      is_tool = true;
      if (is_output_first) {
        out.append(kV3OutputsBegin);
        is_output_first = false;
      } else {
        out += "\n";
      }
      out.append(kV3OutputBegin).append(message.content).append(kV3OutputEnd);
    } else {
      FailRole(ChatFormat::kDeepSeekV3, i, message.role);
    }
  }
  if (is_tool) {
    out.append(kV3OutputsEnd);
  }
  if (options.add_generation_prompt && !is_tool) {
    out.append(kV3Assistant);
  }
  return out;
}

// DeepSeek-V2-Chat: bos, "User: {u}\n\n", "Assistant: {a}{eos}", "{system}\n\n" in message order;
// the generation prompt is "Assistant:" with no trailing space.
std::string RenderDeepSeekV2(std::span<const ChatMessage> messages,
                             const ChatTemplateOptions& options) {
  std::string out = options.bos_token;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    if (message.role == "user") {
      out += "User: " + message.content + "\n\n";
    } else if (message.role == "assistant") {
      out += "Assistant: " + message.content + options.eos_token;
    } else if (message.role == "system") {
      out += message.content + "\n\n";
    } else {
      FailRole(ChatFormat::kDeepSeekV2, i, message.role);
    }
  }
  if (options.add_generation_prompt) {
    out += "Assistant:";
  }
  return out;
}

// ChatML: "<|im_start|>{role}\n{content}<|im_end|>\n" per message, no bos.
std::string RenderChatMl(std::span<const ChatMessage> messages,
                         const ChatTemplateOptions& options) {
  std::string out;
  for (const ChatMessage& message : messages) {
    out += "<|im_start|>" + message.role + "\n" + message.content + "<|im_end|>\n";
  }
  if (options.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
  }
  return out;
}

// Python's str.isspace() (what Jinja's `trim` filter strips in transformers): the characters of
// category Zs or bidi class WS, B or S.
bool IsPythonSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Jinja's `trim` (Python's str.strip()); stops at ill-formed UTF-8.
std::string_view Trim(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    const detail::Utf8Step step = detail::DecodeUtf8At(text, begin);
    if (!step.valid || !IsPythonSpace(step.code_point)) {
      break;
    }
    begin += static_cast<size_t>(step.length);
  }
  size_t end = text.size();
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) {
      --start;
    }
    const detail::Utf8Step step = detail::DecodeUtf8At(text, start);
    if (!step.valid || start + static_cast<size_t>(step.length) != end ||
        !IsPythonSpace(step.code_point)) {
      break;
    }
    end = start;
  }
  return text.substr(begin, end - begin);
}

// Llama 3 Instruct: bos before the first message, then per message
// "<|start_header_id|>{role}<|end_header_id|>\n\n{trimmed content}<|eot_id|>"; any role renders.
std::string RenderLlama3(std::span<const ChatMessage> messages,
                         const ChatTemplateOptions& options) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0) {
      out += options.bos_token;
    }
    out.append("<|start_header_id|>").append(messages[i].role).append("<|end_header_id|>\n\n");
    out.append(Trim(messages[i].content)).append("<|eot_id|>");
  }
  if (options.add_generation_prompt) {
    out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  return out;
}

// mlarun's own Jinja sources; whitespace control ("{%-", "-%}") drops the layout whitespace.
constexpr std::string_view kV3Source = R"jinja(
{%- set ns = namespace(system_prompt='', is_first_sp=true, is_tool=false, is_output_first=true) -%}
{%- for message in messages -%}
  {%- if message['role'] == 'system' -%}
    {%- if ns.is_first_sp -%}
      {%- set ns.system_prompt = message['content'] -%}
      {%- set ns.is_first_sp = false -%}
    {%- else -%}
      {%- set ns.system_prompt = ns.system_prompt + '\n\n' + message['content'] -%}
    {%- endif -%}
  {%- endif -%}
{%- endfor -%}
{{- bos_token + ns.system_prompt -}}
{%- for message in messages -%}
  {%- if message['role'] == 'user' -%}
    {%- set ns.is_tool = false -%}
    {{- '<｜User｜>' + message['content'] -}}
  {%- elif message['role'] == 'assistant' -%}
    {%- if ns.is_tool -%}{{- '<｜tool▁outputs▁end｜>' -}}{%- else -%}{{- '<｜Assistant｜>' -}}{%- endif -%}
    {{- message['content'] + '<｜end▁of▁sentence｜>' -}}
    {%- set ns.is_tool = false -%}
  {%- elif message['role'] == 'tool' -%}
    {%- set ns.is_tool = true -%}
    {%- if ns.is_output_first -%}
      {{- '<｜tool▁outputs▁begin｜>' -}}
      {%- set ns.is_output_first = false -%}
    {%- else -%}
      {{- '\n' -}}
    {%- endif -%}
    {{- '<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>' -}}
  {%- endif -%}
{%- endfor -%}
{%- if ns.is_tool -%}{{- '<｜tool▁outputs▁end｜>' -}}{%- endif -%}
{%- if add_generation_prompt and not ns.is_tool -%}{{- '<｜Assistant｜>' -}}{%- endif -%}
)jinja";

constexpr std::string_view kV2Source = R"jinja(
{{- bos_token -}}
{%- for message in messages -%}
  {%- if message['role'] == 'user' -%}
    {{- 'User: ' + message['content'] + '\n\n' -}}
  {%- elif message['role'] == 'assistant' -%}
    {{- 'Assistant: ' + message['content'] + eos_token -}}
  {%- elif message['role'] == 'system' -%}
    {{- message['content'] + '\n\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- 'Assistant:' -}}{%- endif -%}
)jinja";

constexpr std::string_view kChatMlSource = R"jinja(
{%- for message in messages -%}
  {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%}
)jinja";

constexpr std::string_view kLlama3Source = R"jinja(
{%- for message in messages -%}
  {%- if loop.first -%}{{- bos_token -}}{%- endif -%}
  {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%}
)jinja";

constexpr std::string_view kFormatList = "deepseek_v2, deepseek_v3, llama3 and chatml";

}  // namespace

std::string_view ChatTemplateSource(ChatFormat format) {
  // Drop the raw strings' leading newline.
  switch (format) {
    case ChatFormat::kDeepSeekV2:
      return kV2Source.substr(1);
    case ChatFormat::kDeepSeekV3:
      return kV3Source.substr(1);
    case ChatFormat::kChatMl:
      return kChatMlSource.substr(1);
    case ChatFormat::kLlama3:
      return kLlama3Source.substr(1);
  }
  return {};
}

ChatFormatChoice ChooseChatFormat(std::string_view chat_template, std::string_view model_type) {
  auto contains = [&](std::string_view needle) {
    return chat_template.find(needle) != std::string_view::npos;
  };
  ChatFormatChoice choice{.basis = ChatFormatBasis::kTemplate,
                          .has_template = !chat_template.empty()};
  if (contains(kV3User) && contains(kV3Assistant)) {
    choice.format = ChatFormat::kDeepSeekV3;
    return choice;
  }
  if (contains("'Assistant: ' + message['content'] + eos_token") ||
      (contains("'User: '") && contains("'Assistant:'"))) {
    choice.format = ChatFormat::kDeepSeekV2;
    return choice;
  }
  // Llama 3.1 and later use the same header tokens but open with a dated system header
  // ("Cutting Knowledge Date: ..."), which the Llama 3 rendering lacks.
  if (contains("<|start_header_id|>") && contains("<|end_header_id|>") && contains("<|eot_id|>") &&
      !contains("Cutting Knowledge Date")) {
    choice.format = ChatFormat::kLlama3;
    return choice;
  }
  if (chat_template == ChatTemplateSource(ChatFormat::kChatMl)) {
    choice.format = ChatFormat::kChatMl;
    return choice;
  }
  if (model_type == "deepseek_v3" || model_type == "deepseek_v2") {
    choice.format = model_type == "deepseek_v3" ? ChatFormat::kDeepSeekV3 : ChatFormat::kDeepSeekV2;
    choice.basis = ChatFormatBasis::kModelType;
    choice.model_type = std::string(model_type);
    return choice;
  }
  choice.format = ChatFormat::kChatMl;
  choice.basis = ChatFormatBasis::kFallback;
  choice.uses_chatml_markers = contains("<|im_start|>") && contains("<|im_end|>");
  return choice;
}

ChatFormat DetectChatFormat(std::string_view chat_template, std::string_view model_type) {
  return ChooseChatFormat(chat_template, model_type).format;
}

std::string DescribeChatFormatChoice(const ChatFormatChoice& choice) {
  const std::string name(ChatFormatName(choice.format));
  if (choice.recognised()) {
    return "chat format: " + name + " (recognised from the chat template)";
  }
  std::string line = "warning: ";
  line += choice.has_template
              ? "the chat template in tokenizer_config.json is not one mlarun knows (it renders " +
                    std::string(kFormatList) + ")"
              : std::string("the model has no chat template (tokenizer_config.json)");
  if (choice.basis == ChatFormatBasis::kModelType) {
    return line + "; using " + name + ", from config.json's model_type '" + choice.model_type + "'";
  }
  if (choice.uses_chatml_markers) {
    return line + "; it uses ChatML's <|im_start|> and <|im_end|>, so falling back to " + name +
           ", which leaves out whatever else the template adds (such as a default system prompt)";
  }
  return line + "; falling back to " + name +
         ", which this model may not have been trained on: prompts may be wrong";
}

std::string_view ChatFormatName(ChatFormat format) {
  switch (format) {
    case ChatFormat::kDeepSeekV2:
      return "deepseek_v2";
    case ChatFormat::kDeepSeekV3:
      return "deepseek_v3";
    case ChatFormat::kChatMl:
      return "chatml";
    case ChatFormat::kLlama3:
      return "llama3";
  }
  return "unknown";
}

std::string RenderChat(ChatFormat format, std::span<const ChatMessage> messages,
                       const ChatTemplateOptions& options) {
  switch (format) {
    case ChatFormat::kDeepSeekV2:
      return RenderDeepSeekV2(messages, options);
    case ChatFormat::kDeepSeekV3:
      return RenderDeepSeekV3(messages, options);
    case ChatFormat::kChatMl:
      return RenderChatMl(messages, options);
    case ChatFormat::kLlama3:
      return RenderLlama3(messages, options);
  }
  throw TokenizerError("chat template: unknown format");
}

}  // namespace mlarun
