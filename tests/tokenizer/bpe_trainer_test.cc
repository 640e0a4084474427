// Unit tests for the byte-level BPE trainer: exact vocab size, determinism, round trips, special
// tokens, frequency order, and the errors it reports.
#include "tokenizer/bpe_trainer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace mlarun {
namespace {

constexpr std::string_view kCorpus =
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs.\n"
    "A tokenizer splits text into tokens, and the tokens map to ids.\n"
    "def tokenize(text):\n    return [vocab[piece] for piece in text.split()]\n"
    "数字 12345 and 678, 深度求索 and 深度学习. Ünïcödé café naïve.\n"
    "the the the then there these those them they their theory thermal\n";

const std::vector<std::string> kSpecials = {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"};

TEST(TokenizerBpeTrainerTest, VocabSizeIsExactAndTextRoundTrips) {
  for (const int vocab_size : {258, 300, 400}) {
    const std::string json = TrainByteLevelBpeJson(kCorpus, vocab_size, kSpecials);
    const Tokenizer tokenizer =
        Tokenizer::FromJson(json, MakeTokenizerConfigJson(kSpecials[0], kSpecials[1]));
    EXPECT_EQ(tokenizer.vocab_size(), vocab_size);
    EXPECT_EQ(tokenizer.bos_id(), vocab_size - 2);
    EXPECT_EQ(tokenizer.eos_id(), vocab_size - 1);
    EXPECT_TRUE(tokenizer.IsSpecial(vocab_size - 1));
    for (const std::string_view text :
         {kCorpus, std::string_view("unseen words: zebra quokka 9876543210 ∑ 🙂\r\n\t end")}) {
      EXPECT_EQ(tokenizer.Decode(tokenizer.Encode(text)), text) << "vocab " << vocab_size;
    }
    const std::vector<int32_t> ids = tokenizer.Encode("<｜begin▁of▁sentence｜>the fox");
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), tokenizer.bos_id());
  }
}

TEST(TokenizerBpeTrainerTest, IsDeterministicAndPutsSpecialTokensLast) {
  const std::string first = TrainByteLevelBpeJson(kCorpus, 320, kSpecials);
  EXPECT_EQ(first, TrainByteLevelBpeJson(kCorpus, 320, kSpecials));
  const nlohmann::json json = nlohmann::json::parse(first);
  const nlohmann::json& merges = json["model"]["merges"];
  ASSERT_EQ(merges.size(), 320u - 256u - 2u);
  EXPECT_EQ(json["added_tokens"][0]["content"], kSpecials[0]);
  EXPECT_EQ(json["added_tokens"][0]["id"], 318);
  // A frequent word becomes a single token.
  const Tokenizer tokenizer = Tokenizer::FromJson(first);
  EXPECT_EQ(tokenizer.Encode(" the").size(), 1u);
}

TEST(TokenizerBpeTrainerTest, MergesTheMostFrequentPairFirstAndBreaksTiesByIds) {
  // Pieces: "ab", " ab", " ab", " cd". Counts: a+b 3, then Ġ+ab 2, then Ġ+c and c+d tie at 1 and
  // Ġ+c wins because ' ' (32) < 'c' (99).
  const nlohmann::json json = nlohmann::json::parse(TrainByteLevelBpeJson("ab ab ab cd", 259, {}));
  EXPECT_EQ(json["model"]["merges"],
            nlohmann::json::parse(R"([["a", "b"], ["Ġ", "ab"], ["Ġ", "c"]])"));
  EXPECT_EQ(json["model"]["vocab"]["ab"], 256);
  EXPECT_EQ(json["model"]["vocab"]["Ġab"], 257);
  EXPECT_EQ(json["model"]["vocab"]["Ġc"], 258);
}

TEST(TokenizerBpeTrainerTest, ReportsImpossibleRequests) {
  EXPECT_THROW(TrainByteLevelBpeJson(kCorpus, 257, kSpecials), TokenizerError);
  EXPECT_THROW(TrainByteLevelBpeJson("ab ab", 400, {}), TokenizerError);  // runs out of pairs
  const std::vector<std::string> repeated = {"<s>", "<s>"};
  EXPECT_THROW(TrainByteLevelBpeJson(kCorpus, 300, repeated), TokenizerError);
}

TEST(TokenizerBpeTrainerTest, ConfigCarriesTokensAndARecognisedTemplate) {
  const nlohmann::json config =
      nlohmann::json::parse(MakeTokenizerConfigJson("<s>", "</s>", ChatFormat::kDeepSeekV2));
  EXPECT_EQ(config["bos_token"], "<s>");
  EXPECT_EQ(config["eos_token"], "</s>");
  EXPECT_EQ(config["add_bos_token"], true);
  EXPECT_EQ(DetectChatFormat(config["chat_template"].get<std::string>()), ChatFormat::kDeepSeekV2);
}

}  // namespace
}  // namespace mlarun
