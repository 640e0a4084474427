// Bounded memory: 20,000 generated tokens with window:256,sinks:4 never hold more blocks than the
// sinks block plus the window's worth (allocator statistics, not time).
#include <gtest/gtest.h>

#include "model/test_models.h"
#include "runtime/generator.h"

namespace mlarun {
namespace {

TEST(LongGenerationTest, WindowPolicyKeepsPeakBlocksBounded) {
  const auto model = Model::Load(testing::MakeTestModel("tiny-v2-lite", DType::kBF16));
  ThreadPool pool(1);
  Exec exec{pool, GetKernelTable(BestIsa())};
  const int block_size = 64;
  KvCache cache(model->MakeKvLayout(DType::kBF16), {.block_size = block_size,
                                                    .budget_bytes = 64 << 20,
                                                    .policy = ParseKvPolicy("window:256,sinks:4")});
  const int32_t seq = cache.AddSequence();
  const std::vector<int32_t> prompt = {1, 2, 3, 4};
  const GenerateResult result =
      Generate(*model, exec, cache, seq, prompt,
               {.max_new_tokens = 20000, .sampling = {.temperature = 1.0f, .seed = 5}});
  EXPECT_EQ(result.tokens.size(), 20000u);
  EXPECT_EQ(cache.Length(seq), 4 + 20000 - 1);
  // One block for the sinks + ceil(256 / 64) + 1 blocks for a window that straddles blocks.
  const int64_t bound = 1 + 256 / block_size + 1;
  EXPECT_LE(cache.pool().stats().peak_blocks_in_use, bound);
  // Rows held: the sinks' block (64 rows) plus the window's blocks, never the whole history.
  EXPECT_LE(cache.UsedBytes(), static_cast<size_t>(bound * block_size) * cache.BytesPerToken());
  EXPECT_LT(cache.UsedBytes(), static_cast<size_t>(cache.Length(seq)) * cache.BytesPerToken() / 10);
}

}  // namespace
}  // namespace mlarun
