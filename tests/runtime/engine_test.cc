// The serving engine on a tiny generated model: batching invariance (16 concurrent greedy requests
// give exactly the tokens each gives alone), preemption and cancellation under a small KV budget
// without leaks, prefix-cache reuse (copy-on-write of the last block) and the disk cache across a
// restart.
#include "runtime/engine.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "model/test_models.h"
#include "runtime/generator.h"

namespace mlarun {
namespace {

struct Outcome {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::kError;
  RequestUsage usage;
  bool done = false;
};

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = Model::Load(testing::MakeTestModel("tiny-v3", DType::kF32)).release();
  }
  static void TearDownTestSuite() { delete model_; }

  std::unique_ptr<KvCache> MakeCache(size_t budget_bytes, int block_size = 16) {
    return std::make_unique<KvCache>(
        model_->MakeKvLayout(DType::kF32),
        KvCacheOptions{.block_size = block_size, .budget_bytes = budget_bytes});
  }

  // Submits a greedy request whose results land in `out`.
  static RequestId Submit(Engine& engine, const std::vector<int32_t>& prompt, int64_t max_tokens,
                          Outcome* out) {
    EngineRequest r{.prompt = prompt, .max_tokens = max_tokens};
    r.on_token = [out](int32_t t, const TokenLogprobs* /*logprobs*/) {
      out->tokens.push_back(t);
      return true;
    };
    r.on_finish = [out](FinishReason reason, const RequestUsage& usage, const std::string&) {
      out->reason = reason;
      out->usage = usage;
      out->done = true;
    };
    return engine.Submit(std::move(r));
  }

  static void RunToEnd(Engine& engine) {
    for (int i = 0; i < 100000 && engine.Step(); ++i) {
    }
    engine.Step();  // refresh the stats snapshot
  }

  static std::vector<int32_t> RandomPrompt(uint64_t seed, int n) {
    Rng rng(seed);
    std::vector<int32_t> p;
    for (int i = 0; i < n; ++i) p.push_back(static_cast<int32_t>(rng.NextU64() % 500));
    return p;
  }

  static Model* model_;
  ThreadPool pool_{2};
  Exec exec_{pool_, GetKernelTable(BestIsa())};
};

Model* EngineTest::model_ = nullptr;

TEST_F(EngineTest, SixteenConcurrentGreedyRequestsMatchEachAlone) {
  // Naive prefill keeps a sequence's numbers independent of batching and of prefix-cache hits
  // (which move where its prefill starts); the default per-chunk choice keeps them independent
  // of batching (with the cache off, every round prefills the same chunks).
  for (const bool naive_with_prefix_cache : {true, false}) {
    SCOPED_TRACE(naive_with_prefix_cache ? "naive prefill, prefix cache" : "auto, no cache");
    auto cache = MakeCache(64 << 20);
    EngineOptions options{.prefill_chunk = 64, .max_prefill_tokens = 128};
    if (naive_with_prefix_cache) {
      options.prefill_mla = MlaPath::kNaive;
    } else {
      options.prefix_caching = false;
    }
    Engine engine(*model_, exec_, *cache, options);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 16; ++i) prompts.push_back(RandomPrompt(100 + i, 3 + 23 * i));  // 3 .. 348
    std::vector<Outcome> alone(16);
    for (int i = 0; i < 16; ++i) {
      Submit(engine, prompts[i], 12, &alone[i]);
      RunToEnd(engine);
    }
    std::vector<Outcome> together(16);
    for (int i = 0; i < 16; ++i) Submit(engine, prompts[i], 12, &together[i]);
    RunToEnd(engine);
    for (int i = 0; i < 16; ++i) {
      ASSERT_TRUE(together[i].done);
      EXPECT_EQ(together[i].reason, FinishReason::kLength);
      EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
    }
    const EngineStats stats = engine.Stats();
    EXPECT_EQ(stats.kv_blocks_used, 0);
    EXPECT_EQ(stats.running + stats.waiting, 0);
    // With the cache, the second round reused the first round's prefixes.
    EXPECT_EQ(stats.prefix.hit_tokens > 0, naive_with_prefix_cache);
  }
}

// A copy of the test model whose embedding row of `token` is NaN (mapped loads pass weights
// through): any sequence holding that token gets NaN logits, the others are untouched.
std::string ModelWithNanEmbedding(int32_t token) {
  const std::string src = testing::MakeTestModel("tiny-v3", DType::kF32);
  std::string dir = ::testing::TempDir() + "/engine_nan_embedding";
  std::filesystem::remove_all(dir);
  std::filesystem::copy(src, dir, std::filesystem::copy_options::recursive);
  testing::EditTensor(dir, "model.embed_tokens.weight", [&](TensorToWrite& t) {
    const float nan = std::nanf("");
    for (int64_t c = 0; c < t.shape[1]; ++c) {
      std::memcpy(t.data.data() + (token * t.shape[1] + c) * sizeof(float), &nan, sizeof(nan));
    }
  });
  return dir;
}

// A request whose logits turn NaN fails with an error saying so, in the same batch as requests
// that finish normally with the tokens they give alone; no block leaks. The CLI's generation
// loop refuses it too.
TEST_F(EngineTest, ARequestWithNanLogitsFailsAloneTheOthersFinish) {
  constexpr int32_t kBad = 7;
  const auto broken = Model::Load(ModelWithNanEmbedding(kBad));
  std::vector<int32_t> bad_prompt = RandomPrompt(5, 20);
  bad_prompt[10] = kBad;
  std::vector<std::vector<int32_t>> good_prompts = {RandomPrompt(6, 30), RandomPrompt(8, 9)};
  for (auto& p : good_prompts) std::replace(p.begin(), p.end(), kBad, kBad + 1);
  auto cache = MakeCache(16 << 20);
  Engine engine(*broken, exec_, *cache, {.prefix_caching = false});
  std::vector<Outcome> alone(2);
  for (size_t i = 0; i < 2; ++i) {
    Submit(engine, good_prompts[i], 8, &alone[i]);
    RunToEnd(engine);
  }
  std::vector<Outcome> together(3);
  std::string error;
  EngineRequest r{.prompt = bad_prompt, .max_tokens = 8};
  r.on_finish = [&](FinishReason reason, const RequestUsage&, const std::string& e) {
    together[2].reason = reason;
    together[2].done = true;
    error = e;
  };
  engine.Submit(std::move(r));
  for (size_t i = 0; i < 2; ++i) Submit(engine, good_prompts[i], 8, &together[i]);
  RunToEnd(engine);
  ASSERT_TRUE(together[2].done);
  EXPECT_EQ(together[2].reason, FinishReason::kError);
  EXPECT_EQ(error.rfind("the model's logits hold NaN (token ", 0), 0u) << error;
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(together[i].done);
    EXPECT_EQ(together[i].reason, FinishReason::kLength);
    EXPECT_EQ(together[i].tokens, alone[i].tokens);
  }
  EXPECT_EQ(cache->pool().stats().blocks_in_use, 0);
  EXPECT_EQ(engine.Stats().requests_failed, 1);

  auto gen_cache = MakeCache(16 << 20);
  const int32_t seq = gen_cache->AddSequence();
  EXPECT_THROW(Generate(*broken, exec_, *gen_cache, seq, bad_prompt, {.max_new_tokens = 4}), Error);
}

TEST_F(EngineTest, PreemptsUnderATinyBudgetAndFinishesEverythingWithoutLeaks) {
  auto probe = MakeCache(1 << 20);
  const size_t block_bytes = probe->pool().stats().bytes_per_block;
  auto cache = MakeCache(10 * block_bytes);  // 10 blocks of 16 tokens
  Engine engine(*model_, exec_, *cache, {.prefill_chunk = 32, .prefix_caching = false});
  std::vector<Outcome> out(6);
  for (int i = 0; i < 6; ++i) {
    ASSERT_EQ(engine.CheckLimits(40, 40), "");
    Submit(engine, RandomPrompt(7 + i, 40), 40, &out[i]);
  }
  RunToEnd(engine);
  for (const Outcome& o : out) {
    ASSERT_TRUE(o.done);
    EXPECT_EQ(o.reason, FinishReason::kLength);
    EXPECT_EQ(o.tokens.size(), 40u);
  }
  const EngineStats stats = engine.Stats();
  EXPECT_GT(stats.preemptions, 0);
  EXPECT_EQ(cache->pool().stats().blocks_in_use, 0);
  EXPECT_NE(engine.CheckLimits(100, 100), "");  // more than the whole pool: rejected up front
}

TEST_F(EngineTest, CancelAndStopFreeTheirBlocks) {
  auto cache = MakeCache(16 << 20);
  Engine engine(*model_, exec_, *cache, {.prefix_caching = false});
  std::vector<Outcome> out(4);
  std::vector<RequestId> ids;
  for (int i = 0; i < 4; ++i)
    ids.push_back(Submit(engine, RandomPrompt(20 + i, 30), 1000, &out[i]));
  for (int i = 0; i < 5; ++i) engine.Step();
  engine.Cancel(ids[1]);
  engine.Cancel(ids[3]);
  engine.Step();
  EXPECT_TRUE(out[1].done);
  EXPECT_EQ(out[1].reason, FinishReason::kCancelled);
  engine.CancelAll();
  RunToEnd(engine);
  for (const Outcome& o : out) EXPECT_EQ(o.reason, FinishReason::kCancelled);
  EXPECT_EQ(cache->pool().stats().blocks_in_use, 0);

  // on_token returning false stops the request (finish reason stop).
  Outcome stopped;
  EngineRequest r{.prompt = {1, 2, 3}, .max_tokens = 50};
  int seen = 0;
  r.on_token = [&](int32_t, const TokenLogprobs*) { return ++seen < 3; };
  r.on_finish = [&](FinishReason reason, const RequestUsage& usage, const std::string&) {
    stopped.reason = reason;
    stopped.usage = usage;
  };
  engine.Submit(std::move(r));
  RunToEnd(engine);
  EXPECT_EQ(stopped.reason, FinishReason::kStop);
  EXPECT_EQ(stopped.usage.completion_tokens, 3);
  EXPECT_EQ(cache->pool().stats().blocks_in_use, 0);
}

TEST_F(EngineTest, SecondRequestWithTheSamePrefixReusesFullBlocks) {
  auto cache = MakeCache(64 << 20, 64);
  Engine engine(*model_, exec_, *cache, {});
  std::vector<int32_t> prompt = RandomPrompt(3, 1000);
  Outcome first;
  Outcome second;
  Submit(engine, prompt, 4, &first);
  RunToEnd(engine);
  EXPECT_EQ(first.usage.cached_tokens, 0);
  prompt.push_back(7);  // same 1,000-token prefix, one more token
  Submit(engine, prompt, 4, &second);
  RunToEnd(engine);
  EXPECT_EQ(second.usage.cached_tokens, 960);  // 15 full blocks of 64
  EXPECT_EQ(engine.Stats().kv_blocks_used, 0);

  // Exactly 16 full blocks, twice: the last block is copied and its last token recomputed.
  std::vector<int32_t> exact = RandomPrompt(4, 1024);
  Outcome a;
  Outcome b;
  Submit(engine, exact, 6, &a);
  RunToEnd(engine);
  Submit(engine, exact, 6, &b);
  RunToEnd(engine);
  EXPECT_EQ(b.usage.cached_tokens, 1023);
  EXPECT_EQ(a.tokens, b.tokens);
}

TEST_F(EngineTest, DiskCacheServesAPrefixAfterARestart) {
  const std::string dir = ::testing::TempDir() + "/engine_disk_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  const std::vector<int32_t> prompt = RandomPrompt(9, 300);
  const EngineOptions options{.disk_cache = DiskCacheOptions{.dir = dir}, .fingerprint = 1234};
  Outcome fresh;
  {
    auto cache = MakeCache(64 << 20, 64);
    Engine engine(*model_, exec_, *cache, options);
    Submit(engine, prompt, 8, &fresh);
    RunToEnd(engine);
    engine.FlushPrefixCache();
    EXPECT_EQ(engine.Stats().disk.files, 4);
  }
  Outcome restarted;
  {
    auto cache = MakeCache(64 << 20, 64);
    Engine engine(*model_, exec_, *cache, options);
    Submit(engine, prompt, 8, &restarted);
    RunToEnd(engine);
    EXPECT_EQ(engine.Stats().prefix.disk_hit_tokens, 256);
  }
  EXPECT_EQ(restarted.usage.cached_tokens, 256);
  EXPECT_EQ(restarted.tokens, fresh.tokens);  // the rows came back bit for bit
}

// With logprobs, on_token gets each token's log-probability under the raw logits (before the
// repetition penalty and temperature used to sample it) and the top 3: the same numbers as the
// log-softmax of one independent forward pass over prompt + generated tokens.
TEST_F(EngineTest, LogprobsAreTheLogSoftmaxOfTheRawLogits) {
  auto cache = MakeCache(64 << 20);
  Engine engine(*model_, exec_, *cache, {});
  const std::vector<int32_t> prompt = RandomPrompt(7, 20);
  EngineRequest r{.prompt = prompt,
                  .max_tokens = 8,
                  .sampling = {.temperature = 0.9f, .repetition_penalty = 1.5f, .seed = 3},
                  .logprobs = 3};
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  r.on_token = [&](int32_t t, const TokenLogprobs* lp) {
    tokens.push_back(t);
    EXPECT_NE(lp, nullptr);
    if (lp != nullptr) logprobs.push_back(*lp);
    return true;
  };
  r.on_finish = [](FinishReason, const RequestUsage&, const std::string&) {};
  engine.Submit(std::move(r));
  RunToEnd(engine);
  ASSERT_EQ(tokens.size(), 8u);
  ASSERT_EQ(logprobs.size(), 8u);

  // Reference: logits of positions prompt-1 .. end-2 in one pass, log-softmax in double.
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), tokens.begin(), tokens.end() - 1);
  auto ref_cache = MakeCache(64 << 20);
  const int32_t seq = ref_cache->AddSequence();
  ASSERT_TRUE(ref_cache->Reserve(seq, static_cast<int64_t>(all.size())));
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < all.size(); ++i) {
    batch.push_back({.token = all[i],
                     .seq = seq,
                     .pos = static_cast<int64_t>(i),
                     .want_logits = i + 1 >= prompt.size()});
  }
  const int64_t vocab = model_->config().vocab_size;
  std::vector<float> logits(tokens.size() * static_cast<size_t>(vocab));
  model_->Forward(exec_, *ref_cache, batch, {}, logits.data());
  bool some_token_not_top = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const float* row = logits.data() + i * static_cast<size_t>(vocab);
    double max = row[0], sum = 0.0;
    for (int64_t v = 0; v < vocab; ++v) max = std::max(max, static_cast<double>(row[v]));
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - max);
    auto ref = [&](int32_t t) { return row[t] - max - std::log(sum); };
    EXPECT_NEAR(logprobs[i].logprob, ref(tokens[i]), 1e-4) << i;
    ASSERT_EQ(logprobs[i].top.size(), 3u);
    std::vector<double> sorted(row, row + vocab);
    std::partial_sort(sorted.begin(), sorted.begin() + 3, sorted.end(), std::greater<>());
    for (size_t k = 0; k < 3; ++k) {
      const TopLogprob& top = logprobs[i].top[k];
      EXPECT_NEAR(top.logprob, ref(top.token), 1e-4) << i << " " << k;
      EXPECT_NEAR(top.logprob, sorted[k] - max - std::log(sum), 1e-4) << i << " " << k;
    }
    EXPECT_LE(logprobs[i].logprob, logprobs[i].top[0].logprob + 1e-6);
    some_token_not_top = some_token_not_top || tokens[i] != logprobs[i].top[0].token;
  }
  EXPECT_TRUE(some_token_not_top) << "sampling at temperature 0.9 always took the top token";
}

}  // namespace
}  // namespace mlarun
