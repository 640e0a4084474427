// Hash-chained prefix blocks: hash_i = XXH3-64(tokens of block i, seed = hash_{i-1}), hash_{-1} =
// the seed. Entries also keep their tokens, so a hash collision can never map a prompt onto
// another prompt's rows. Lookups touch a chain from its last block back to its first, so the
// first blocks (shared by most prompts) are evicted last and a chain is never cut in the middle
// before its tail.
#include "kv/prefix_cache.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace mlarun {

size_t BlockPayloadBytes(const KvLayout& layout, int block_size) {
  size_t bytes = 0;
  for (const KvRowFormat& f : layout.layers)
    bytes += f.RowBytes() * static_cast<size_t>(block_size);
  return bytes;
}

PrefixCache::PrefixCache(KvCache& cache, DiskCache* disk, uint64_t seed)
    : cache_(cache),
      pool_(cache.mutable_pool()),
      disk_(disk),
      seed_(seed),
      block_size_(cache.pool().block_size()) {
  MLARUN_CHECK(cache.window() == 0);
  if (disk_ != nullptr) buffer_.resize(BlockPayloadBytes(pool_.layout(), block_size_));
}

PrefixCache::~PrefixCache() {
  for (auto& [hash, entry] : entries_) pool_.Release(entry.block);
}

uint64_t PrefixCache::ChainHash(uint64_t parent, std::span<const int32_t> tokens) const {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

void PrefixCache::Touch(Entry& entry) { lru_.splice(lru_.end(), lru_, entry.lru); }

int32_t PrefixCache::StartSequence(std::span<const int32_t> prompt, int64_t* cached_tokens) {
  const int64_t n_full = static_cast<int64_t>(prompt.size()) / block_size_;
  std::vector<Entry*> chain;
  uint64_t parent = seed_;
  for (int64_t b = 0; b < n_full; ++b) {
    const auto tokens =
        prompt.subspan(static_cast<size_t>(b * block_size_), static_cast<size_t>(block_size_));
    const uint64_t hash = ChainHash(parent, tokens);
    Entry* entry = nullptr;
    if (auto it = entries_.find(hash);
        it != entries_.end() &&
        std::equal(tokens.begin(), tokens.end(), it->second.tokens.begin())) {
      entry = &it->second;
    } else if (disk_ != nullptr && disk_->Contains(hash)) {
      // Hold the chain so far while a block is made free for the load.
      for (Entry* e : chain) pool_.Retain(e->block);
      const bool room = EnsureFree(1);
      for (Entry* e : chain) pool_.Release(e->block);
      if (room) entry = LoadFromDisk(hash, parent, tokens);
      if (entry != nullptr) stats_.disk_hit_tokens += block_size_;
    }
    if (entry == nullptr) break;
    chain.push_back(entry);
    parent = hash;
  }
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) Touch(**it);

  const int64_t matched = static_cast<int64_t>(chain.size()) * block_size_;
  const int64_t reuse = std::min<int64_t>(matched, static_cast<int64_t>(prompt.size()) - 1);
  std::vector<int32_t> blocks;
  blocks.reserve(chain.size());
  for (const Entry* e : chain) blocks.push_back(e->block);
  int32_t seq = -1;
  if (reuse > 0) {
    // A copied last block needs one free block; free one without touching the chain.
    if (reuse % block_size_ != 0 && pool_.FreeBlocks() == 0) {
      for (Entry* e : chain) pool_.Retain(e->block);
      EnsureFree(1);
      for (Entry* e : chain) pool_.Release(e->block);
    }
    seq = cache_.AddSequenceFromBlocks(blocks, reuse);
  } else {
    seq = cache_.AddSequence();
  }
  *cached_tokens = seq >= 0 ? std::max<int64_t>(reuse, 0) : 0;
  stats_.queried_tokens += static_cast<int64_t>(prompt.size());
  stats_.hit_tokens += *cached_tokens;
  return seq;
}

void PrefixCache::Insert(int32_t seq, std::span<const int32_t> tokens) {
  const std::span<const int32_t> blocks = cache_.SequenceBlocks(seq);
  const int64_t n_full =
      std::min<int64_t>(cache_.Length(seq), static_cast<int64_t>(tokens.size())) / block_size_;
  uint64_t parent = seed_;
  std::vector<uint64_t> chain;
  for (int64_t b = 0; b < n_full; ++b) {
    const auto block_tokens =
        tokens.subspan(static_cast<size_t>(b * block_size_), static_cast<size_t>(block_size_));
    const uint64_t hash = ChainHash(parent, block_tokens);
    if (entries_.find(hash) == entries_.end()) {
      const int32_t block = blocks[static_cast<size_t>(b)];
      MLARUN_CHECK(block >= 0);
      pool_.Retain(block);
      lru_.push_back(hash);
      entries_.emplace(hash, Entry{.hash = hash,
                                   .parent_hash = parent,
                                   .block = block,
                                   .tokens = {block_tokens.begin(), block_tokens.end()},
                                   .lru = std::prev(lru_.end())});
    }
    chain.push_back(hash);
    parent = hash;
  }
  // Tail first, so a chain is evicted from its end.
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) Touch(entries_.at(*it));
}

bool PrefixCache::EnsureFree(int64_t n_free) {
  for (auto it = lru_.begin(); it != lru_.end() && pool_.FreeBlocks() < n_free;) {
    Entry& entry = entries_.at(*it);
    if (pool_.RefCount(entry.block) != 1) {
      ++it;
      continue;
    }
    if (disk_ != nullptr) SaveToDisk(entry);
    pool_.Release(entry.block);
    ++stats_.evicted_blocks;
    const uint64_t hash = *it;
    it = lru_.erase(it);
    entries_.erase(hash);
  }
  return pool_.FreeBlocks() >= n_free;
}

void PrefixCache::SaveToDisk(const Entry& entry) {
  if (disk_->Contains(entry.hash)) return;
  uint8_t* out = buffer_.data();
  for (size_t layer = 0; layer < pool_.layout().layers.size(); ++layer) {
    const size_t bytes = pool_.layout().layers[layer].RowBytes() * static_cast<size_t>(block_size_);
    std::memcpy(out, pool_.Row(static_cast<int>(layer), entry.block, 0), bytes);
    out += bytes;
  }
  disk_->Store(entry.hash, entry.parent_hash, entry.tokens, buffer_);
}

PrefixCache::Entry* PrefixCache::LoadFromDisk(uint64_t hash, uint64_t parent,
                                              std::span<const int32_t> tokens) {
  if (!disk_->Load(hash, parent, tokens, buffer_)) return nullptr;
  const int32_t block = pool_.Allocate();
  if (block < 0) return nullptr;
  const uint8_t* in = buffer_.data();
  for (size_t layer = 0; layer < pool_.layout().layers.size(); ++layer) {
    const size_t bytes = pool_.layout().layers[layer].RowBytes() * static_cast<size_t>(block_size_);
    std::memcpy(pool_.Row(static_cast<int>(layer), block, 0), in, bytes);
    in += bytes;
  }
  lru_.push_back(hash);
  auto [it, inserted] = entries_.emplace(hash, Entry{.hash = hash,
                                                     .parent_hash = parent,
                                                     .block = block,
                                                     .tokens = {tokens.begin(), tokens.end()},
                                                     .lru = std::prev(lru_.end())});
  MLARUN_CHECK(inserted);
  return &it->second;
}

void PrefixCache::FlushToDisk() {
  if (disk_ == nullptr) return;
  // Most recently used last, so the directory's own LRU order matches.
  for (uint64_t hash : lru_) SaveToDisk(entries_.at(hash));
}

int64_t PrefixCache::EvictableBlocks() const {
  int64_t n = 0;
  for (const auto& [hash, entry] : entries_) n += pool_.RefCount(entry.block) == 1 ? 1 : 0;
  return n;
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s = stats_;
  s.cached_blocks = static_cast<int64_t>(entries_.size());
  s.evictable_blocks = EvictableBlocks();
  return s;
}

}  // namespace mlarun
