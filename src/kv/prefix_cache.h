// Prefix caching over the paged KV cache: full blocks are keyed by a hash chain of their token ids
// (as in vLLM's automatic prefix caching), shared by reference count with every sequence that
// starts with the same tokens, and evicted least-recently-used first once no sequence holds them,
// optionally to a DiskCache from which later hits reload them.
#pragma once

#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/disk_cache.h"
#include "kv/kv_cache.h"

namespace mlarun {

struct PrefixCacheStats {
  int64_t queried_tokens = 0;    // prompt tokens looked up
  int64_t hit_tokens = 0;        // of those, served from the cache (memory or disk)
  int64_t disk_hit_tokens = 0;   // of those, loaded from disk
  int64_t cached_blocks = 0;     // blocks the cache holds now
  int64_t evictable_blocks = 0;  // of those, held by no sequence
  int64_t evicted_blocks = 0;
};

// Not thread-safe: owned by the engine's scheduler thread. Needs the full policy (no window).
class PrefixCache {
 public:
  // `cache` and `disk` (may be null) must outlive this object. `seed` starts every hash chain
  // (a model fingerprint keeps chains of different models apart in a shared directory).
  PrefixCache(KvCache& cache, DiskCache* disk, uint64_t seed);
  // Releases the cache's block references (blocks still used by sequences stay).
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Returns a new KvCache sequence holding the longest cached prefix of `prompt`, and its length
  // in `*cached_tokens`. At least the last prompt token is left to compute (when every block hits,
  // the last block is copied rather than shared). Returns -1 when the pool cannot supply the
  // copied block.
  int32_t StartSequence(std::span<const int32_t> prompt, int64_t* cached_tokens);
  // Registers the full blocks of `seq` whose rows are computed: `tokens` are the sequence's
  // tokens, of which the first KvCache::Length(seq) have rows. Blocks already cached are skipped.
  void Insert(int32_t seq, std::span<const int32_t> tokens);
  // Frees cached blocks that no sequence uses, least recently used first (written to disk when
  // there is one), until the pool has `n_free` free blocks. Returns whether it got there.
  bool EnsureFree(int64_t n_free);
  // Writes every cached block that is not on disk yet (at shutdown).
  void FlushToDisk();

  int64_t EvictableBlocks() const;
  PrefixCacheStats stats() const;

 private:
  struct Entry {
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
    int32_t block = -1;
    std::vector<int32_t> tokens;  // [block_size]
    std::list<uint64_t>::iterator lru;
  };

  uint64_t ChainHash(uint64_t parent, std::span<const int32_t> tokens) const;
  // Moves the entry to the most recently used end.
  void Touch(Entry& entry);
  // Loads block `hash` from disk into a fresh pool block and caches it; returns the entry or null.
  Entry* LoadFromDisk(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);
  void SaveToDisk(const Entry& entry);

  KvCache& cache_;
  BlockPool& pool_;
  DiskCache* disk_;
  uint64_t seed_;
  int block_size_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::list<uint64_t> lru_;      // least recently used first
  std::vector<uint8_t> buffer_;  // [payload bytes] staging for disk I/O
  PrefixCacheStats stats_;
};

// Bytes of one block's rows over all layers, as DiskCache stores them.
size_t BlockPayloadBytes(const KvLayout& layout, int block_size);

}  // namespace mlarun
