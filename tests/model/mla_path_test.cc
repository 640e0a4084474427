// MlaPath::kAuto: the cost rule (NaiveMlaIsCheaper) against hand-computed crossovers, and the
// forward pass taking, per sequence, bitwise the path the rule picks.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/test_models.h"
#include "runtime/generator.h"

namespace mlarun {
namespace {

// DeepSeek-V2 / V3 attention dims (V2-Lite's 16 heads; the rule scales with the head count).
ModelConfig V2LiteAttention() {
  ModelConfig c;
  c.num_attention_heads = 16;
  c.kv_lora_rank = 512;
  c.qk_nope_head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 128;
  return c;
}

// n new tokens after `depth` cached ones under the full causal policy.
MlaChunkShape Causal(int64_t depth, int64_t n) {
  return {
      .new_tokens = n, .expanded_rows = depth + n, .attended_rows = n * depth + n * (n + 1) / 2};
}

TEST(NaiveMlaIsCheaperTest, CrossoversForDeepSeekV2Dims) {
  const ModelConfig c = V2LiteAttention();
  // By hand: absorbed - naive = 12,288 * attended - 2,097,152 * depth multiply-adds per layer.
  // depth 4,096: 167 new tokens attend to 698,060 rows (8.578e9 < 8.590e9: absorbed), 168 to
  // 702,324 (8.630e9: naive).
  EXPECT_FALSE(NaiveMlaIsCheaper(c, Causal(4096, 167)));
  EXPECT_TRUE(NaiveMlaIsCheaper(c, Causal(4096, 168)));
  // depth 1,024: 158 -> 174,343 rows (2.1423e9 < 2.1475e9), 159 -> 175,536 (2.1570e9).
  EXPECT_FALSE(NaiveMlaIsCheaper(c, Causal(1024, 158)));
  EXPECT_TRUE(NaiveMlaIsCheaper(c, Causal(1024, 159)));
  // A fresh prompt: nothing to re-expand, so naive whatever its length; decode at depth >= 1
  // attends over the latent.
  EXPECT_TRUE(NaiveMlaIsCheaper(c, Causal(0, 1)));
  EXPECT_TRUE(NaiveMlaIsCheaper(c, Causal(0, 512)));
  EXPECT_FALSE(NaiveMlaIsCheaper(c, Causal(1, 1)));
  EXPECT_FALSE(NaiveMlaIsCheaper(c, Causal(4096, 32)));
  // A window of 256 rows: the naive path expands only 256 + 31 rows for 32 queries, 8,192
  // attended rows: 6.02e8 + 4.19e7 against 6.71e7 + 1.43e8 multiply-adds: absorbed still.
  EXPECT_FALSE(NaiveMlaIsCheaper(
      c, {.new_tokens = 32, .expanded_rows = 256 + 31, .attended_rows = int64_t{32} * 256}));
}

class MlaAutoPathTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = Model::Load(testing::MakeTestModel("tiny-v2-lite", DType::kF32)).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }

  // Logits [sum of new_tokens, vocab] of one pass over `new_tokens[s]` tokens of each of the
  // sequences, after a context of `depth` tokens each prefilled naive (the same cache rows for
  // every path under test). A sequence's tokens depend only on its length, so they are the same
  // alone and beside another.
  static std::vector<float> ChunkLogits(const std::vector<int64_t>& new_tokens, int64_t depth,
                                        MlaPath path) {
    ThreadPool pool(2);
    Exec exec{pool, GetKernelTable(BestIsa())};
    KvCache cache(model_->MakeKvLayout(DType::kF32), {.block_size = 16, .budget_bytes = 64 << 20});
    std::vector<BatchToken> batch;
    for (size_t s = 0; s < new_tokens.size(); ++s) {
      const int32_t seq = cache.AddSequence();
      std::vector<int32_t> ids;
      for (int64_t i = 0; i < depth + new_tokens[s]; ++i) {
        ids.push_back(static_cast<int32_t>((i * 37 + 11 + new_tokens[s]) % 500));
      }
      Prefill(*model_, exec, cache, seq, std::span<const int32_t>(ids).first(depth),
              {.mla_path = MlaPath::kNaive});
      ReserveOrThrow(cache, seq, new_tokens[s]);
      for (int64_t i = depth; i < depth + new_tokens[s]; ++i) {
        batch.push_back(
            {.token = ids[static_cast<size_t>(i)], .seq = seq, .pos = i, .want_logits = true});
      }
    }
    std::vector<float> logits(batch.size() * static_cast<size_t>(model_->config().vocab_size));
    model_->Forward(exec, cache, batch, {.mla_path = path}, logits.data());
    return logits;
  }

  static Model* model_;
};

Model* MlaAutoPathTest::model_ = nullptr;

TEST_F(MlaAutoPathTest, EachSequenceTakesThePathTheRulePicksBitwise) {
  // tiny-v2-lite (4 heads, latent 32, head dims 16 / 8 / 16): after 64 tokens, naive is cheaper
  // from 27 new tokens on (4,096 (64 + n) + 160 P <= 4,096 n + 288 P).
  constexpr int64_t kDepth = 64;
  const ModelConfig& c = model_->config();
  ASSERT_FALSE(NaiveMlaIsCheaper(c, Causal(kDepth, 26)));
  ASSERT_TRUE(NaiveMlaIsCheaper(c, Causal(kDepth, 27)));
  for (const int64_t n : {8, 48}) {
    const std::vector<float> naive = ChunkLogits({n}, kDepth, MlaPath::kNaive);
    const std::vector<float> absorbed = ChunkLogits({n}, kDepth, MlaPath::kAbsorbed);
    ASSERT_NE(naive, absorbed) << "the two paths must round differently for this test to see";
    const std::vector<float> automatic = ChunkLogits({n}, kDepth, MlaPath::kAuto);
    EXPECT_EQ(automatic, n == 8 ? absorbed : naive) << n << " new tokens";
  }
  // Both in one pass: each sequence keeps its own path, so its logits are those it has alone.
  const std::vector<float> short_alone = ChunkLogits({8}, kDepth, MlaPath::kAuto);
  const std::vector<float> long_alone = ChunkLogits({48}, kDepth, MlaPath::kAuto);
  const std::vector<float> together = ChunkLogits({8, 48}, kDepth, MlaPath::kAuto);
  std::vector<float> expected = short_alone;
  expected.insert(expected.end(), long_alone.begin(), long_alone.end());
  EXPECT_EQ(together, expected);
}

}  // namespace
}  // namespace mlarun
