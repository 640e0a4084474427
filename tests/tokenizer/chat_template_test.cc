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
  for (const ChatFormat format :
       {ChatFormat::kDeepSeekV2, ChatFormat::kDeepSeekV3, ChatFormat::kChatMl}) {
    EXPECT_EQ(DetectChatFormat(ChatTemplateSource(format)), format) << ChatFormatName(format);
  }
}

}  // namespace
}  // namespace mlarun
