// Streaming text with stop strings: whole characters only, stop strings never printed.
#include "runtime/text_stream.h"

#include <gtest/gtest.h>

#include "model/synthetic.h"

namespace mlarun {
namespace {

// A tokenizer from a generated model (BPE trained on the preset corpus).
const Tokenizer& TestTokenizer() {
  static const Tokenizer tokenizer = [] {
    const std::string dir = ::testing::TempDir() + "/text_stream_model_" + std::to_string(getpid());
    WriteSyntheticModel({.preset = "tiny-llama-mqa"}, dir);
    return Tokenizer::FromDirectory(dir);
  }();
  return tokenizer;
}

std::string StreamAll(const std::string& text, std::vector<std::string> stops, bool* stopped,
                      std::vector<std::string>* pieces = nullptr) {
  const Tokenizer& tok = TestTokenizer();
  TextStream stream(tok, std::move(stops));
  std::string out;
  *stopped = false;
  for (int32_t id : tok.Encode(text)) {
    bool s = false;
    const std::string piece = stream.Push(id, &s);
    if (pieces != nullptr) pieces->push_back(piece);
    out += piece;
    if (s) {
      *stopped = true;
      return out;
    }
  }
  return out + stream.Finish();
}

TEST(TextStreamTest, PassesTextThroughWithoutStops) {
  bool stopped = false;
  EXPECT_EQ(StreamAll("The river runs to the sea. 世界 🙂", {}, &stopped),
            "The river runs to the sea. 世界 🙂");
  EXPECT_FALSE(stopped);
}

TEST(TextStreamTest, StopsBeforeTheStopStringAndNeverPrintsIt) {
  bool stopped = false;
  std::vector<std::string> pieces;
  EXPECT_EQ(StreamAll("Questions and answers. What is the capital", {"What is", "zzz"}, &stopped,
                      &pieces),
            "Questions and answers. ");
  EXPECT_TRUE(stopped);
  for (const std::string& p : pieces) EXPECT_EQ(p.find("What"), std::string::npos);
}

TEST(TextStreamTest, HeldBackPrefixIsReleasedWhenRuledOut) {
  bool stopped = false;
  // "the s" could start "the sky"; "the sea" rules it out and everything is printed.
  EXPECT_EQ(StreamAll("the sea and the sun", {"the sky"}, &stopped), "the sea and the sun");
  EXPECT_FALSE(stopped);
}

TEST(TextStreamTest, MultibyteCharactersAreNeverSplit) {
  bool stopped = false;
  std::vector<std::string> pieces;
  StreamAll("é世界🙂ü", {}, &stopped, &pieces);
  for (const std::string& p : pieces) {
    for (size_t i = 0; i < p.size();) {
      const auto c = static_cast<unsigned char>(p[i]);
      const size_t len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
      ASSERT_LE(i + len, p.size()) << "piece ends inside a character";
      i += len;
    }
  }
}

}  // namespace
}  // namespace mlarun
