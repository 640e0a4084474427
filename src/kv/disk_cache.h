// A directory of evicted prefix-cache blocks that survives restarts: one file per block, named by
// the block's hash chain value, carrying a model fingerprint and a checksum over tokens and rows.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace mlarun {

struct DiskCacheOptions {
  std::string dir;                      // created if missing
  uint64_t budget_bytes = 10ull << 30;  // total size of the block files; oldest go first
  uint64_t fingerprint = 0;             // model + KV layout identity; files of another are ignored
  int block_size = 64;                  // tokens per block
  size_t payload_bytes = 0;             // bytes of one block's rows (all layers)
  // Receives one line per notable event (corrupt or foreign file, I/O failure).
  std::function<void(const std::string&)> log;
};

struct DiskCacheStats {
  int64_t files = 0;
  uint64_t bytes = 0;
  int64_t stores = 0;
  int64_t loads = 0;
  int64_t rejected = 0;  // corrupt, truncated or foreign files found on load
};

// Not thread-safe: owned by the engine's scheduler thread.
class DiskCache {
 public:
  // Scans `options.dir` for block files. Throws Error naming --prefix-cache-dir if the directory
  // cannot be created.
  explicit DiskCache(const DiskCacheOptions& options);

  bool Contains(uint64_t hash) const { return index_.count(hash) != 0; }
  // Writes the block file for `hash` unless one exists, then trims the directory to the budget.
  // `tokens` [block_size], `payload` [payload_bytes].
  void Store(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens,
             std::span<const uint8_t> payload);
  // Reads the block file for `hash` into `payload` [payload_bytes]. Returns false (and deletes
  // the file, with a log line) when it is missing, truncated, corrupt or for another model, or
  // when its tokens or parent differ from the expected ones.
  bool Load(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens,
            std::span<uint8_t> payload);

  DiskCacheStats stats() const;
  const DiskCacheOptions& options() const { return options_; }

 private:
  struct FileInfo {
    uint64_t bytes = 0;
    uint64_t last_use = 0;  // larger = more recent
  };
  std::string PathOf(uint64_t hash) const;
  void Forget(uint64_t hash, bool remove_file);
  void Touch(uint64_t hash);
  void TrimToBudget();
  void Log(const std::string& line) const;

  DiskCacheOptions options_;
  std::unordered_map<uint64_t, FileInfo> index_;
  std::map<uint64_t, uint64_t> by_use_;  // last_use -> hash, oldest first
  uint64_t clock_ = 0;
  uint64_t total_bytes_ = 0;
  int64_t stores_ = 0;
  int64_t loads_ = 0;
  int64_t rejected_ = 0;
};

}  // namespace mlarun
