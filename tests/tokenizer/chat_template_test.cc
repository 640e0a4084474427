// Unit tests for the chat-template renderer: exact prompts for known conversations in each
// format (written out by hand from the published templates) and format detection.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>

#include <vector>

#include "tokenizer/tokenizer_error.h"

namespace mlarun {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};

TEST(TokenizerChatTemplateTest, RendersDeepSeekV3) {
  EXPECT_EQ(RenderChat(ChatFormat::kDeepSeekV3, kConversation),
            "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi<｜Assistant｜>Hello.<｜end▁of▁sentence｜>"
            "<｜User｜>Bye<｜Assistant｜>");
  EXPECT_EQ(RenderChat(ChatFormat::kDeepSeekV3, kConversation, {.add_generation_prompt = false}),
            "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi<｜Assistant｜>Hello.<｜end▁of▁sentence｜>"
            "<｜User｜>Bye");
  // System messages are gathered up front, joined by a blank line.
  const std::vector<ChatMessage> two_systems = {{"system", "A."}, {"user", "x"}, {"system", "B."}};
  EXPECT_EQ(RenderChat(ChatFormat::kDeepSeekV3, two_systems),
            "<｜begin▁of▁sentence｜>A.\n\nB.<｜User｜>x<｜Assistant｜>");
}

TEST(TokenizerChatTemplateTest, RendersDeepSeekV3ToolOutputs) {
  const std::vector<ChatMessage> chat = {{"user", "Weather?"},
                                         {"tool", "{\"temp\": 21}"},
                                         {"tool", "{\"rain\": false}"},
                                         {"assistant", "21, dry."}};
  EXPECT_EQ(
      RenderChat(ChatFormat::kDeepSeekV3, chat),
      "<｜begin▁of▁sentence｜><｜User｜>Weather?<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>"
      "{\"temp\": 21}<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>{\"rain\": false}"
      "<｜tool▁output▁end｜><｜tool▁outputs▁end｜>21, dry.<｜end▁of▁sentence｜><｜Assistant｜>");
  // Ending on a tool result closes the outputs and adds no generation prompt.
  const std::vector<ChatMessage> open_tool = {{"user", "Run"}, {"tool", "done"}};
  EXPECT_EQ(
      RenderChat(ChatFormat::kDeepSeekV3, open_tool),
      "<｜begin▁of▁sentence｜><｜User｜>Run<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>done"
      "<｜tool▁output▁end｜><｜tool▁outputs▁end｜>");
}

TEST(TokenizerChatTemplateTest, RendersDeepSeekV2) {
  EXPECT_EQ(RenderChat(ChatFormat::kDeepSeekV2, kConversation),
            "<｜begin▁of▁sentence｜>Be brief.\n\nUser: Hi\n\nAssistant: Hello.<｜end▁of▁sentence｜>"
            "User: Bye\n\nAssistant:");
  EXPECT_EQ(RenderChat(ChatFormat::kDeepSeekV2, {{{"user", "x"}}},
                       {.add_generation_prompt = false, .bos_token = "<s>", .eos_token = "</s>"}),
            "<s>User: x\n\n");
}

TEST(TokenizerChatTemplateTest, RendersChatMl) {
  EXPECT_EQ(RenderChat(ChatFormat::kChatMl, kConversation),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(TokenizerChatTemplateTest, RendersLlama3) {
  const ChatTemplateOptions options{.bos_token = "<|begin_of_text|>"};
  EXPECT_EQ(RenderChat(ChatFormat::kLlama3, kConversation, options),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(RenderChat(ChatFormat::kLlama3, {{{"user", "x"}}},
                       {.add_generation_prompt = false, .bos_token = "<|begin_of_text|>"}),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nx<|eot_id|>");
  // The template trims each content (Jinja's `trim`, Python's str.strip(): U+3000 and U+0085 are
  // whitespace, U+FEFF is not); any role renders; bos comes with the first message only.
  EXPECT_EQ(RenderChat(ChatFormat::kLlama3, {{{"ipython", " \t\n 42 \u3000\u0085"}}}, options),
            "<|begin_of_text|><|start_header_id|>ipython<|end_header_id|>\n\n42<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(RenderChat(ChatFormat::kLlama3, {{{"user", "\uFEFFa b\n"}}},
                       {.add_generation_prompt = false, .bos_token = ""}),
            "<|start_header_id|>user<|end_header_id|>\n\n\uFEFFa b<|eot_id|>");
  EXPECT_EQ(RenderChat(ChatFormat::kLlama3, {}, options),
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(TokenizerChatTemplateTest, RejectsRolesTheFormatCannotRender) {
  const std::vector<ChatMessage> chat = {{"user", "x"}, {"tool", "y"}};
  EXPECT_THROW(RenderChat(ChatFormat::kDeepSeekV2, chat), TokenizerError);
  const std::vector<ChatMessage> odd = {{"developer", "x"}};
  try {
    RenderChat(ChatFormat::kDeepSeekV3, odd);
    FAIL() << "no error";
  } catch (const TokenizerError& e) {
    EXPECT_STREQ(e.what(),
                 "chat template deepseek_v3: messages[0].role: unsupported role 'developer'");
  }
}

TEST(TokenizerChatTemplateTest, DetectsFormatsFromTemplatesThenModelType) {
  // Fragments of the published templates.
  EXPECT_EQ(DetectChatFormat("{{'<｜User｜>' + message['content']}}{{'<｜Assistant｜>'}}"),
            ChatFormat::kDeepSeekV3);
  EXPECT_EQ(DetectChatFormat("{{ 'Assistant: ' + message['content'] + eos_token }}"),
            ChatFormat::kDeepSeekV2);
  EXPECT_EQ(DetectChatFormat("", "deepseek_v3"), ChatFormat::kDeepSeekV3);
  EXPECT_EQ(DetectChatFormat("{% unknown %}", "deepseek_v2"), ChatFormat::kDeepSeekV2);
  EXPECT_EQ(DetectChatFormat("", "llama"), ChatFormat::kChatMl);
  for (const ChatFormat format : {ChatFormat::kDeepSeekV2, ChatFormat::kDeepSeekV3,
                                  ChatFormat::kChatMl, ChatFormat::kLlama3}) {
    EXPECT_EQ(DetectChatFormat(ChatTemplateSource(format)), format) << ChatFormatName(format);
  }
}

// meta-llama/Meta-Llama-3-8B-Instruct's chat_template (tokenizer_config.json).
constexpr std::string_view kLlama3Template =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% "
    "endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

TEST(TokenizerChatTemplateTest, DetectsLlama3ButNotLlama31) {
  EXPECT_EQ(DetectChatFormat(kLlama3Template), ChatFormat::kLlama3);
  EXPECT_EQ(ChatFormatName(ChatFormat::kLlama3), "llama3");
  // Llama 3.1 and later open with a dated system header, which the Llama 3 rendering lacks.
  const std::string llama31 =
      std::string(kLlama3Template) + "{{- \"Cutting Knowledge Date: December 2023\\n\" }}";
  const ChatFormatChoice choice = ChooseChatFormat(llama31, "llama");
  EXPECT_EQ(choice.format, ChatFormat::kChatMl);
  EXPECT_FALSE(choice.recognised());
}

TEST(TokenizerChatTemplateTest, ReportsHowTheFormatWasChosen) {
  ChatFormatChoice choice = ChooseChatFormat(kLlama3Template, "llama");
  EXPECT_EQ(choice.format, ChatFormat::kLlama3);
  EXPECT_EQ(choice.basis, ChatFormatBasis::kTemplate);
  EXPECT_TRUE(choice.recognised());
  EXPECT_EQ(DescribeChatFormatChoice(choice),
            "chat format: llama3 (recognised from the chat template)");

  choice = ChooseChatFormat("{{ messages }}", "deepseek_v2");
  EXPECT_EQ(choice.format, ChatFormat::kDeepSeekV2);
  EXPECT_EQ(choice.basis, ChatFormatBasis::kModelType);
  EXPECT_FALSE(choice.recognised());
  EXPECT_EQ(DescribeChatFormatChoice(choice),
            "warning: the chat template in tokenizer_config.json is not one mlarun knows (it "
            "renders deepseek_v2, deepseek_v3, llama3 and chatml); using deepseek_v2, from "
            "config.json's model_type 'deepseek_v2'");

  choice = ChooseChatFormat("", "deepseek_v3");
  EXPECT_EQ(choice.format, ChatFormat::kDeepSeekV3);
  EXPECT_FALSE(choice.has_template);
  EXPECT_EQ(DescribeChatFormatChoice(choice),
            "warning: the model has no chat template (tokenizer_config.json); using deepseek_v3, "
            "from config.json's model_type 'deepseek_v3'");

  choice = ChooseChatFormat("{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}",
                            "llama");
  EXPECT_EQ(choice.format, ChatFormat::kChatMl);
  EXPECT_EQ(choice.basis, ChatFormatBasis::kFallback);
  EXPECT_EQ(DescribeChatFormatChoice(choice),
            "warning: the chat template in tokenizer_config.json is not one mlarun knows (it "
            "renders deepseek_v2, deepseek_v3, llama3 and chatml); falling back to chatml, which "
            "this model may not have been trained on: prompts may be wrong");

  // Qwen2.5's template: ChatML markers plus a default system prompt.
  choice = ChooseChatFormat(
      "{%- if messages[0]['role'] == 'system' %}...{%- else %}{{- '<|im_start|>system\\nYou are "
      "Qwen.<|im_end|>\\n' }}{%- endif %}{{- '<|im_start|>' + message.role }}",
      "qwen2");
  EXPECT_EQ(choice.format, ChatFormat::kChatMl);
  EXPECT_FALSE(choice.recognised());
  EXPECT_TRUE(choice.uses_chatml_markers);
  EXPECT_EQ(DescribeChatFormatChoice(choice),
            "warning: the chat template in tokenizer_config.json is not one mlarun knows (it "
            "renders deepseek_v2, deepseek_v3, llama3 and chatml); it uses ChatML's <|im_start|> "
            "and <|im_end|>, so falling back to chatml, which leaves out whatever else the "
            "template adds (such as a default system prompt)");

  choice = ChooseChatFormat("");
  EXPECT_EQ(DescribeChatFormatChoice(choice),
            "warning: the model has no chat template (tokenizer_config.json); falling back to "
            "chatml, which this model may not have been trained on: prompts may be wrong");
  // ChatML's own template is recognised, so choosing it that way is no fallback.
  choice = ChooseChatFormat(ChatTemplateSource(ChatFormat::kChatMl));
  EXPECT_TRUE(choice.recognised());
  EXPECT_EQ(DescribeChatFormatChoice(choice),
            "chat format: chatml (recognised from the chat template)");
}

}  // namespace
}  // namespace mlarun
