// Block tables, visibility under each policy, recycling and byte accounting.
#include "kv/kv_cache.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

namespace mlarun {
namespace {

KvLayout OneLayer(int width) {
  KvLayout layout;
  layout.layers.push_back({.dtype = DType::kF32,
                           .n_head_kv = 1,
                           .head_dim_k = width,
                           .head_dim_v = width,
                           .v_aliases_k = true});
  return layout;
}

// Writes token `pos` with value pos in every entry, for `n` tokens, as one forward pass would.
// Returns what the last new token (a query at its own position) sees, with each row's bias,
// taken before Commit as the model does.
std::vector<std::pair<float, float>> Append(KvCache& cache, int32_t seq, int64_t n) {
  EXPECT_TRUE(cache.Reserve(seq, n));
  const int64_t start = cache.Length(seq);
  std::vector<float> row(2);
  for (int64_t p = start; p < start + n; ++p) {
    row.assign(2, static_cast<float>(p));
    cache.WriteRow(seq, 0, p, row.data());
  }
  cache.UpdateSummaries(seq, 0, start + n);
  std::vector<KvSpan> spans;
  cache.VisibleSpans(seq, start + n - 1, &spans);
  const KvRows rows = cache.LayerRows(0);
  std::vector<std::pair<float, float>> visible;
  for (const KvSpan& s : spans) {
    for (int r = 0; r < s.n_rows; ++r) {
      visible.push_back(
          {reinterpret_cast<const float*>(rows.Row(s.block, s.row_begin + r))[0], s.score_bias});
    }
  }
  cache.Commit(seq, n);
  return visible;
}

TEST(KvCacheTest, FullPolicySeesEverythingThroughBlocks) {
  KvCache cache(OneLayer(2), {.block_size = 4, .budget_bytes = 1 << 20});
  const int32_t seq = cache.AddSequence();
  const auto visible = Append(cache, seq, 10);
  ASSERT_EQ(visible.size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(visible[static_cast<size_t>(i)].first, i);
  EXPECT_EQ(cache.UsedBytes(), 10u * 8);
  EXPECT_EQ(cache.pool().stats().blocks_in_use, 3);
  cache.RemoveSequence(seq);
  EXPECT_EQ(cache.pool().stats().blocks_in_use, 0);
}

TEST(KvCacheTest, WindowAndSinksHandComputed) {
  KvCache cache(
      OneLayer(2),
      {.block_size = 4, .budget_bytes = 1 << 20, .policy = ParseKvPolicy("window:3,sinks:2")});
  const int32_t seq = cache.AddSequence();
  // Query 9 sees sinks 0, 1 and the window 7, 8, 9.
  std::vector<float> seen;
  for (auto [v, b] : Append(cache, seq, 10)) seen.push_back(v);
  EXPECT_EQ(seen, (std::vector<float>{0, 1, 7, 8, 9}));
  // Later queries see the sinks and positions >= 8: block 1 (positions 4..7) was recycled,
  // block 0 (sinks) and block 2 remain.
  EXPECT_EQ(cache.pool().stats().blocks_in_use, 2);
}

TEST(KvCacheTest, CompressSummariesHandComputed) {
  // window 2, sinks 1, compress 3: query at 9 has out-of-window tokens 1..7 (m = 7): groups
  // [1,2,3] and [4,5,6] are summaries (means 2 and 5, bias ln 3); token 7 stays raw.
  KvCache cache(OneLayer(2), {.block_size = 4,
                              .budget_bytes = 1 << 20,
                              .policy = ParseKvPolicy("window:2,sinks:1,compress:3")});
  const int32_t seq = cache.AddSequence();
  const auto visible = Append(cache, seq, 10);
  const std::vector<std::pair<float, float>> expected = {
      {2.0f, std::log(3.0f)}, {5.0f, std::log(3.0f)}, {0, 0}, {7, 0}, {8, 0}, {9, 0}};
  EXPECT_EQ(visible, expected);
}

TEST(KvCacheTest, WindowGreaterThanLengthEqualsFull) {
  KvCache full(OneLayer(2), {.block_size = 4, .budget_bytes = 1 << 20});
  KvCache windowed(
      OneLayer(2),
      {.block_size = 4, .budget_bytes = 1 << 20, .policy = ParseKvPolicy("window:50")});
  const int32_t a = full.AddSequence();
  const int32_t b = windowed.AddSequence();
  for (int64_t pos = 0; pos < 30; ++pos) EXPECT_EQ(Append(full, a, 1), Append(windowed, b, 1));
}

TEST(KvCacheTest, WindowMemoryStaysBoundedOverLongRuns) {
  KvCache cache(
      OneLayer(2),
      {.block_size = 16, .budget_bytes = 1 << 20, .policy = ParseKvPolicy("window:64,sinks:4")});
  const int32_t seq = cache.AddSequence();
  for (int i = 0; i < 4999; ++i) Append(cache, seq, 1);
  EXPECT_EQ(Append(cache, seq, 1).size(), 4u + 64u);
  // Sinks block + ceil(64 / 16) + 1 window blocks.
  EXPECT_LE(cache.pool().stats().peak_blocks_in_use, 1 + 64 / 16 + 1);
}

TEST(KvCacheTest, VisibleRowsMatchThePolicyFormula) {
  for (const char* text : {"full", "window:7", "window:7,sinks:3", "window:5,sinks:2,compress:3",
                           "window:4,compress:2"}) {
    const KvPolicy policy = ParseKvPolicy(text);
    KvCache cache(OneLayer(2), {.block_size = 4, .budget_bytes = 1 << 20, .policy = policy});
    const int32_t seq = cache.AddSequence();
    for (int64_t n = 1; n <= 60; ++n) {
      EXPECT_EQ(static_cast<int64_t>(Append(cache, seq, 1).size()),
                PolicyRowsHeld(policy, policy.window, n))
          << text << " n=" << n;
    }
  }
}

TEST(KvCacheTest, ReserveFailsCleanlyWhenThePoolIsFull) {
  // 2 blocks of 4 rows of 8 bytes (64-byte aligned regions): budget for exactly 2 blocks.
  KvCache cache(OneLayer(2), {.block_size = 4, .budget_bytes = 128});
  const int32_t seq = cache.AddSequence();
  EXPECT_TRUE(cache.Reserve(seq, 8));
  EXPECT_FALSE(cache.Reserve(seq, 9));
  EXPECT_EQ(cache.pool().stats().blocks_in_use, 2);
}

}  // namespace
}  // namespace mlarun
