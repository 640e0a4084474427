// Block files of the disk prefix cache. Layout of `<hash as 16 hex digits>.kvb` (little-endian):
//   char[8] "MLAKVB1\n" | u32 version | u32 block_size | u64 fingerprint | u64 hash |
//   u64 parent_hash | u64 payload_bytes | u64 checksum | i32 tokens[block_size] | payload
// checksum = XXH3-64 (xxHash, github.com/Cyan4973/xxHash) over the token bytes then the payload.
// Files are written to a temporary name and renamed, so a crash never leaves a half-written block
// under a valid name; anything that still fails to verify is deleted when it is read.
#include "kv/disk_cache.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/error.h"

namespace mlarun {

namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'M', 'L', 'A', 'K', 'V', 'B', '1', '\n'};
// 2: int8 rows hold their values excess-128 (kv_row.h); version-1 files would be misread.
// 3: int8 rows hold their RoPE tails as int8 in two groups (600-byte MLA rows), not bf16.
constexpr uint32_t kVersion = 3;
constexpr const char* kExtension = ".kvb";

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t block_size;
  uint64_t fingerprint;
  uint64_t hash;
  uint64_t parent_hash;
  uint64_t payload_bytes;
  uint64_t checksum;
};
static_assert(sizeof(FileHeader) == 56);

uint64_t Checksum(std::span<const int32_t> tokens, std::span<const uint8_t> payload) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, tokens.data(), tokens.size_bytes());
  XXH3_64bits_update(state, payload.data(), payload.size());
  const uint64_t sum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return sum;
}

std::string Hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// Parses "<16 hex digits>.kvb"; returns false for any other name.
bool ParseFileName(const std::string& name, uint64_t* hash) {
  if (name.size() != 16 + std::strlen(kExtension) || !name.ends_with(kExtension)) return false;
  uint64_t value = 0;
  for (size_t i = 0; i < 16; ++i) {
    const char c = name[i];
    int digit = 0;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      return false;
    }
    value = value << 4 | static_cast<uint64_t>(digit);
  }
  *hash = value;
  return true;
}

}  // namespace

DiskCache::DiskCache(const DiskCacheOptions& options) : options_(options) {
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec || !fs::is_directory(options_.dir)) {
    throw Error("--prefix-cache-dir: cannot create directory '" + options_.dir + "'");
  }
  // Index our files, oldest first, so trimming removes the least recently written ones.
  std::multimap<fs::file_time_type, std::pair<uint64_t, uint64_t>> found;
  int64_t foreign = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(options_.dir, ec)) {
    uint64_t hash = 0;
    if (!entry.is_regular_file() || !ParseFileName(entry.path().filename().string(), &hash)) {
      continue;
    }
    FileHeader header{};
    std::ifstream in(entry.path(), std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(&header), sizeof(header)) ||
        std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0 || header.version != kVersion ||
        header.fingerprint != options_.fingerprint || header.hash != hash ||
        header.block_size != static_cast<uint32_t>(options_.block_size)) {
      ++foreign;
      continue;
    }
    found.emplace(entry.last_write_time(ec), std::make_pair(hash, entry.file_size(ec)));
  }
  for (const auto& [time, file] : found) {
    index_[file.first] = {.bytes = file.second, .last_use = ++clock_};
    by_use_[clock_] = file.first;
    total_bytes_ += file.second;
  }
  if (foreign > 0) {
    Log("prefix cache: ignoring " + std::to_string(foreign) + " block file(s) in " + options_.dir +
        " of another model, KV layout or format, or with a damaged header");
  }
  TrimToBudget();
}

std::string DiskCache::PathOf(uint64_t hash) const {
  return (fs::path(options_.dir) / (Hex(hash) + kExtension)).string();
}

void DiskCache::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

void DiskCache::Touch(uint64_t hash) {
  FileInfo& info = index_.at(hash);
  by_use_.erase(info.last_use);
  info.last_use = ++clock_;
  by_use_[info.last_use] = hash;
}

void DiskCache::Forget(uint64_t hash, bool remove_file) {
  const auto it = index_.find(hash);
  if (it != index_.end()) {
    total_bytes_ -= it->second.bytes;
    by_use_.erase(it->second.last_use);
    index_.erase(it);
  }
  if (remove_file) {
    std::error_code ec;
    fs::remove(PathOf(hash), ec);
  }
}

void DiskCache::TrimToBudget() {
  while (total_bytes_ > options_.budget_bytes && !by_use_.empty()) {
    Forget(by_use_.begin()->second, /*remove_file=*/true);
  }
}

void DiskCache::Store(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens,
                      std::span<const uint8_t> payload) {
  if (Contains(hash)) {
    Touch(hash);
    return;
  }
  const uint64_t file_bytes = sizeof(FileHeader) + tokens.size_bytes() + payload.size();
  if (file_bytes > options_.budget_bytes) return;
  FileHeader header{};
  std::memcpy(header.magic, kMagic, sizeof(kMagic));
  header.version = kVersion;
  header.block_size = static_cast<uint32_t>(tokens.size());
  header.fingerprint = options_.fingerprint;
  header.hash = hash;
  header.parent_hash = parent_hash;
  header.payload_bytes = payload.size();
  header.checksum = Checksum(tokens, payload);
  const std::string path = PathOf(hash);
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&header), sizeof(header));
    out.write(reinterpret_cast<const char*>(tokens.data()),
              static_cast<std::streamsize>(tokens.size_bytes()));
    out.write(reinterpret_cast<const char*>(payload.data()),
              static_cast<std::streamsize>(payload.size()));
    if (!out.flush()) {
      Log("prefix cache: cannot write " + temp + " (disk full?); block not saved");
      std::error_code ec;
      fs::remove(temp, ec);
      return;
    }
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    Log("prefix cache: cannot rename " + temp + ": " + ec.message());
    fs::remove(temp, ec);
    return;
  }
  index_[hash] = {.bytes = file_bytes, .last_use = ++clock_};
  by_use_[clock_] = hash;
  total_bytes_ += file_bytes;
  ++stores_;
  TrimToBudget();
}

bool DiskCache::Load(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens,
                     std::span<uint8_t> payload) {
  if (!Contains(hash)) return false;
  const std::string path = PathOf(hash);
  auto reject = [&](const std::string& why) {
    Log("prefix cache: ignoring " + path + ": " + why);
    Forget(hash, /*remove_file=*/true);
    ++rejected_;
    return false;
  };
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    Forget(hash, /*remove_file=*/false);
    return false;
  }
  FileHeader header{};
  if (!in.read(reinterpret_cast<char*>(&header), sizeof(header))) return reject("truncated header");
  if (std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0 || header.version != kVersion) {
    return reject("not an mlarun KV block file");
  }
  if (header.fingerprint != options_.fingerprint) return reject("written for another model");
  if (header.hash != hash || header.parent_hash != parent_hash ||
      header.block_size != tokens.size() || header.payload_bytes != payload.size()) {
    return reject("header does not match the expected block");
  }
  std::vector<int32_t> stored(tokens.size());
  if (!in.read(reinterpret_cast<char*>(stored.data()),
               static_cast<std::streamsize>(tokens.size_bytes())) ||
      !in.read(reinterpret_cast<char*>(payload.data()),
               static_cast<std::streamsize>(payload.size()))) {
    return reject("truncated");
  }
  if (Checksum(stored, std::span<const uint8_t>(payload.data(), payload.size())) !=
      header.checksum) {
    return reject("checksum mismatch (corrupt)");
  }
  if (!std::equal(stored.begin(), stored.end(), tokens.begin())) {
    return reject("tokens differ (hash collision)");
  }
  Touch(hash);
  ++loads_;
  return true;
}

DiskCacheStats DiskCache::stats() const {
  return {.files = static_cast<int64_t>(index_.size()),
          .bytes = total_bytes_,
          .stores = stores_,
          .loads = loads_,
          .rejected = rejected_};
}

}  // namespace mlarun
