// Prefix cache and disk cache on a toy KV layout (no model): hash-chain matching of full blocks,
// sharing and copy-on-write, LRU eviction of unreferenced blocks, and disk round trips that
// reject corrupt and foreign files.
#include "kv/prefix_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

namespace mlarun {
namespace {

constexpr int kBlock = 4;
constexpr int kValues = 8;

KvLayout ToyLayout() {
  KvRowFormat f{.dtype = DType::kF32,
                .n_head_kv = 1,
                .head_dim_k = kValues,
                .head_dim_v = kValues,
                .v_aliases_k = true};
  return KvLayout{.layers = {f, f}};
}

// Fills `n` tokens of `seq` with rows derived from the token ids (same tokens -> same rows).
void Compute(KvCache& cache, int32_t seq, const std::vector<int32_t>& tokens, int64_t n) {
  const int64_t begin = cache.Length(seq);
  ASSERT_TRUE(cache.Reserve(seq, n));
  for (int64_t pos = begin; pos < begin + n; ++pos) {
    for (int layer = 0; layer < 2; ++layer) {
      std::vector<float> row(kValues,
                             static_cast<float>(tokens[static_cast<size_t>(pos)] * 10 + layer));
      cache.WriteRow(seq, layer, pos, row.data());
    }
  }
  cache.Commit(seq, n);
}

float FirstValue(const KvCache& cache, int32_t seq, int64_t pos, int layer) {
  const int32_t block = cache.SequenceBlocks(seq)[static_cast<size_t>(pos / kBlock)];
  float v = 0;
  std::memcpy(&v, cache.pool().Row(layer, block, static_cast<int>(pos % kBlock)), sizeof(v));
  return v;
}

std::vector<int32_t> Iota(int n, int start) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

std::string TempDir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "/prefix_cache_" + std::to_string(getpid()) + "_" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(PrefixCacheTest, ReusesLongestRunOfFullBlocks) {
  KvCache cache(ToyLayout(), {.block_size = kBlock, .budget_bytes = 64 * 1024});
  PrefixCache prefix(cache, nullptr, 7);
  const std::vector<int32_t> tokens = Iota(10, 100);  // 2 full blocks + 2 tokens
  int64_t cached = -1;
  const int32_t a = prefix.StartSequence(tokens, &cached);
  EXPECT_EQ(cached, 0);
  Compute(cache, a, tokens, 10);
  prefix.Insert(a, tokens);
  EXPECT_EQ(prefix.stats().cached_blocks, 2);

  std::vector<int32_t> other = tokens;
  other[9] = 1;  // differs in the partial block only
  other[6] = 1;  // and in the second block
  const int32_t b = prefix.StartSequence(other, &cached);
  EXPECT_EQ(cached, 4);                                               // the first block only
  EXPECT_EQ(cache.SequenceBlocks(b)[0], cache.SequenceBlocks(a)[0]);  // shared, not copied
  EXPECT_EQ(cache.pool().RefCount(cache.SequenceBlocks(a)[0]), 3);    // a, b and the cache
  cache.RemoveSequence(a);
  cache.RemoveSequence(b);
}

TEST(PrefixCacheTest, FullHitCopiesTheLastBlockAndLeavesOneTokenToCompute) {
  KvCache cache(ToyLayout(), {.block_size = kBlock, .budget_bytes = 64 * 1024});
  PrefixCache prefix(cache, nullptr, 7);
  const std::vector<int32_t> tokens = Iota(8, 5);
  int64_t cached = 0;
  const int32_t a = prefix.StartSequence(tokens, &cached);
  Compute(cache, a, tokens, 8);
  prefix.Insert(a, tokens);
  cache.RemoveSequence(a);

  const int32_t b = prefix.StartSequence(tokens, &cached);
  EXPECT_EQ(cached, 7);
  EXPECT_EQ(cache.Length(b), 7);
  const auto blocks = cache.SequenceBlocks(b);
  EXPECT_EQ(cache.pool().RefCount(blocks[0]), 2);  // shared with the cache
  EXPECT_EQ(cache.pool().RefCount(blocks[1]), 1);  // private copy (copy-on-write)
  EXPECT_EQ(FirstValue(cache, b, 6, 1), static_cast<float>(tokens[6] * 10 + 1));
  // Writing the last token into the copy leaves the cached block untouched.
  Compute(cache, b, std::vector<int32_t>{0, 0, 0, 0, 0, 0, 0, 99}, 1);
  const int32_t c = prefix.StartSequence(Iota(9, 5), &cached);
  EXPECT_EQ(cached, 8);
  EXPECT_EQ(FirstValue(cache, c, 7, 0), static_cast<float>(tokens[7] * 10));
  cache.RemoveSequence(b);
  cache.RemoveSequence(c);
}

TEST(PrefixCacheTest, EvictsOnlyUnreferencedBlocksLeastRecentlyUsedFirst) {
  KvCache probe(ToyLayout(), {.block_size = kBlock, .budget_bytes = 64 * 1024});
  KvCache small(ToyLayout(),
                {.block_size = kBlock, .budget_bytes = 6 * probe.pool().stats().bytes_per_block});
  PrefixCache prefix(small, nullptr, 1);
  int64_t cached = 0;
  const std::vector<int32_t> x = Iota(8, 0);
  const std::vector<int32_t> y = Iota(8, 50);
  const int32_t sx = prefix.StartSequence(x, &cached);
  Compute(small, sx, x, 8);
  prefix.Insert(sx, x);
  small.RemoveSequence(sx);
  const int32_t sy = prefix.StartSequence(y, &cached);
  Compute(small, sy, y, 8);
  prefix.Insert(sy, y);  // y stays referenced by sy
  EXPECT_EQ(small.pool().FreeBlocks(), 2);
  EXPECT_EQ(prefix.EvictableBlocks(), 2);
  EXPECT_TRUE(prefix.EnsureFree(3));  // evicts x's tail block first
  EXPECT_EQ(prefix.stats().cached_blocks, 3);
  const int32_t again = prefix.StartSequence(x, &cached);
  EXPECT_EQ(cached, 4);  // x's first block survived
  small.RemoveSequence(again);
  EXPECT_FALSE(prefix.EnsureFree(7));  // y's blocks are in use
  EXPECT_EQ(prefix.stats().cached_blocks, 2);
  small.RemoveSequence(sy);
}

TEST(DiskCacheTest, EvictedBlocksComeBackAfterARestartAndCorruptFilesAreRejected) {
  const std::string dir = TempDir("restart");
  const KvLayout layout = ToyLayout();
  std::vector<std::string> log;
  const DiskCacheOptions options{.dir = dir,
                                 .budget_bytes = 1 << 20,
                                 .fingerprint = 42,
                                 .block_size = kBlock,
                                 .payload_bytes = BlockPayloadBytes(layout, kBlock),
                                 .log = [&](const std::string& line) { log.push_back(line); }};
  const std::vector<int32_t> tokens = Iota(9, 3);
  {
    KvCache cache(layout, {.block_size = kBlock, .budget_bytes = 64 * 1024});
    DiskCache disk(options);
    PrefixCache prefix(cache, &disk, 42);
    int64_t cached = 0;
    const int32_t s = prefix.StartSequence(tokens, &cached);
    Compute(cache, s, tokens, 9);
    prefix.Insert(s, tokens);
    cache.RemoveSequence(s);
    prefix.FlushToDisk();
    EXPECT_EQ(disk.stats().files, 2);
  }
  {
    KvCache cache(layout, {.block_size = kBlock, .budget_bytes = 64 * 1024});
    DiskCache disk(options);
    PrefixCache prefix(cache, &disk, 42);
    int64_t cached = 0;
    const int32_t s = prefix.StartSequence(tokens, &cached);
    EXPECT_EQ(cached, 8);
    EXPECT_EQ(prefix.stats().disk_hit_tokens, 8);
    EXPECT_EQ(FirstValue(cache, s, 5, 1), static_cast<float>(tokens[5] * 10 + 1));
    cache.RemoveSequence(s);
  }
  // Flip one payload byte of one file: it is rejected (and removed), the chain stops there.
  std::string victim;
  for (const auto& e : std::filesystem::directory_iterator(dir)) victim = e.path().string();
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  {
    KvCache cache(layout, {.block_size = kBlock, .budget_bytes = 64 * 1024});
    DiskCache disk(options);
    PrefixCache prefix(cache, &disk, 42);
    int64_t cached = 0;
    const int32_t s = prefix.StartSequence(tokens, &cached);
    EXPECT_LT(cached, 8);
    EXPECT_EQ(disk.stats().rejected, 1);
    EXPECT_FALSE(std::filesystem::exists(victim));
    cache.RemoveSequence(s);
  }
  bool logged = false;
  for (const std::string& line : log) logged |= line.find("checksum") != std::string::npos;
  EXPECT_TRUE(logged);
  // Another model's fingerprint: files are ignored at start-up, with a log line.
  DiskCacheOptions foreign = options;
  foreign.fingerprint = 43;
  log.clear();
  DiskCache other(foreign);
  EXPECT_EQ(other.stats().files, 0);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log[0].find("another model"), std::string::npos);
  // A file of another format version (version 2 stored the RoPE tails of int8 rows in bf16):
  // ignored at start-up like a foreign one.
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);  // u32 version after the 8-byte magic
    const uint32_t old_version = 2;
    f.write(reinterpret_cast<const char*>(&old_version), sizeof(old_version));
  }
  log.clear();
  DiskCache old_format(options);
  EXPECT_EQ(old_format.stats().files, 0);
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log[0].find("format"), std::string::npos);
}

TEST(DiskCacheTest, StaysWithinItsBudget) {
  const std::string dir = TempDir("budget");
  const KvLayout layout = ToyLayout();
  const size_t payload = BlockPayloadBytes(layout, kBlock);
  const uint64_t file_bytes = 56 + kBlock * 4 + payload;
  DiskCache disk({.dir = dir,
                  .budget_bytes = 3 * file_bytes,
                  .fingerprint = 1,
                  .block_size = kBlock,
                  .payload_bytes = payload});
  std::vector<uint8_t> bytes(payload, 1);
  for (uint64_t h = 1; h <= 5; ++h) disk.Store(h, 0, Iota(kBlock, 0), bytes);
  EXPECT_EQ(disk.stats().files, 3);
  EXPECT_LE(disk.stats().bytes, 3 * file_bytes);
  EXPECT_FALSE(disk.Contains(1));
  EXPECT_TRUE(disk.Contains(5));
}

}  // namespace
}  // namespace mlarun
