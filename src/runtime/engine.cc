// Engine facade: a mutex-guarded inbox between request threads and the owner thread, the prefix
// and disk caches, and the stats snapshot.
#include "runtime/engine.h"

#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "runtime/scheduler.h"

namespace mlarun {

std::string_view FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kCancelled:
      return "cancelled";
    case FinishReason::kError:
      return "error";
  }
  return "error";
}

Engine::Engine(const Model& model, Exec& exec, KvCache& cache, const EngineOptions& options)
    : block_size_(cache.pool().block_size()) {
  max_context_ = options.max_context > 0 ? std::min<int64_t>(options.max_context,
                                                             model.config().max_position_embeddings)
                                         : model.config().max_position_embeddings;
  max_sequence_blocks_ = cache.pool().stats().blocks_total;
  if (cache.window() > 0) max_sequence_blocks_ = INT64_MAX;  // bounded policies recycle blocks
  const bool prefix = options.prefix_caching && cache.window() == 0;
  if (prefix && options.disk_cache.has_value()) {
    DiskCacheOptions disk = *options.disk_cache;
    disk.fingerprint = options.fingerprint;
    disk.block_size = block_size_;
    disk.payload_bytes = BlockPayloadBytes(cache.pool().layout(), block_size_);
    if (!disk.log) disk.log = options.log;
    disk_ = std::make_unique<DiskCache>(disk);
  }
  if (prefix) prefix_ = std::make_unique<PrefixCache>(cache, disk_.get(), options.fingerprint);
  scheduler_ =
      std::make_unique<Scheduler>(model, exec, cache, prefix_.get(), options, max_context_);
  stats_.kv_blocks_total = cache.pool().stats().blocks_total;
  stats_.kv_blocks_free = cache.pool().FreeBlocks();
  stats_.kv_block_size = block_size_;
  stats_.prefix_caching = prefix_ != nullptr;
  stats_.disk_cache = disk_ != nullptr;
  cache_ = &cache;
}

Engine::~Engine() {
  // Sequences release their blocks before the prefix cache drops its references.
  scheduler_.reset();
  prefix_.reset();
}

std::string Engine::CheckLimits(int64_t prompt_tokens, int64_t max_tokens) const {
  if (prompt_tokens <= 0) return "the prompt is empty";
  if (prompt_tokens + max_tokens > max_context_) {
    return "this model's maximum context length is " + std::to_string(max_context_) +
           " tokens, but the request asks for " + std::to_string(prompt_tokens + max_tokens) +
           " (" + std::to_string(prompt_tokens) + " in the prompt + " + std::to_string(max_tokens) +
           " max_tokens)";
  }
  const int64_t blocks = (prompt_tokens + max_tokens + block_size_ - 1) / block_size_;
  if (blocks > max_sequence_blocks_) {
    return "the request needs " + std::to_string(prompt_tokens + max_tokens) +
           " tokens of KV cache, more than the server's --kv-budget holds (" +
           std::to_string(max_sequence_blocks_ * block_size_) + " tokens)";
  }
  return "";
}

RequestId Engine::Submit(EngineRequest request) {
  std::lock_guard<std::mutex> lock(mutex_);
  const RequestId id = next_id_++;
  inbox_.emplace_back(id, std::move(request));
  ++submitted_;
  work_.notify_one();
  return id;
}

void Engine::Cancel(RequestId id) {
  std::lock_guard<std::mutex> lock(mutex_);
  cancels_.push_back(id);
  work_.notify_one();
}

void Engine::CancelAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  cancel_all_ = true;
  work_.notify_one();
}

void Engine::Wake() {
  std::lock_guard<std::mutex> lock(mutex_);
  wake_ = true;
  work_.notify_one();
}

void Engine::WaitForWork(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  work_.wait_for(lock, timeout,
                 [&] { return wake_ || cancel_all_ || !inbox_.empty() || !cancels_.empty(); });
  wake_ = false;
}

void Engine::DrainInbox() {
  std::vector<std::pair<RequestId, EngineRequest>> inbox;
  std::vector<RequestId> cancels;
  bool cancel_all = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    inbox.swap(inbox_);
    cancels.swap(cancels_);
    std::swap(cancel_all, cancel_all_);
  }
  const auto now = std::chrono::steady_clock::now();
  for (auto& [id, request] : inbox) scheduler_->Add(id, std::move(request), now);
  for (RequestId id : cancels) scheduler_->Cancel(id);
  if (cancel_all) scheduler_->CancelAll();
}

bool Engine::Step() {
  DrainInbox();
  const bool more = scheduler_->Idle() ? false : scheduler_->Step();
  EngineStats stats;
  scheduler_->FillStats(&stats);
  const BlockPoolStats pool = cache_->pool().stats();
  stats.kv_blocks_total = pool.blocks_total;
  stats.kv_block_size = block_size_;
  stats.kv_blocks_free = cache_->pool().FreeBlocks();
  stats.prefix_caching = prefix_ != nullptr;
  if (prefix_ != nullptr) stats.prefix = prefix_->stats();
  stats.kv_blocks_cached = stats.prefix.evictable_blocks;
  stats.kv_blocks_used = pool.blocks_in_use - stats.kv_blocks_cached;
  stats.disk_cache = disk_ != nullptr;
  if (disk_ != nullptr) stats.disk = disk_->stats();
  std::lock_guard<std::mutex> lock(mutex_);
  stats.requests_submitted = submitted_;
  stats.waiting += static_cast<int64_t>(inbox_.size());
  stats_ = stats;
  return more || !inbox_.empty();
}

void Engine::FlushPrefixCache() {
  if (prefix_ != nullptr) prefix_->FlushToDisk();
  if (disk_ != nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.disk = disk_->stats();
  }
}

EngineStats Engine::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  EngineStats stats = stats_;
  stats.requests_submitted = submitted_;
  return stats;
}

uint64_t FingerprintModel(const std::string& model_dir, const KvCache& cache) {
  namespace fs = std::filesystem;
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  auto add = [&](const void* data, size_t size) { XXH3_64bits_update(state, data, size); };
  auto add_file_part = [&](const fs::path& path, uint64_t offset, uint64_t size) {
    std::ifstream in(path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset));
    std::string buffer(size, '\0');
    in.read(buffer.data(), static_cast<std::streamsize>(size));
    add(buffer.data(), static_cast<size_t>(in.gcount()));
  };
  std::error_code ec;
  const fs::path dir(model_dir);
  // Weights: names, sizes, the headers and samples of the data (hashing gigabytes would delay
  // start-up; different weights differ in every sample). A GGUF file holds its configuration.
  std::vector<fs::path> files;
  if (fs::is_regular_file(dir, ec)) {
    files.push_back(dir);
  } else {
    add_file_part(dir / "config.json", 0, 1 << 20);
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
      if (e.path().extension() == ".safetensors") files.push_back(e.path());
    }
  }
  std::sort(files.begin(), files.end());
  constexpr uint64_t kSample = 64 << 10;
  for (const fs::path& f : files) {
    const std::string name = f.filename().string();
    const uint64_t size = fs::file_size(f, ec);
    add(name.data(), name.size());
    add(&size, sizeof(size));
    for (uint64_t part = 0; part < 8; ++part) {
      const uint64_t offset = size > kSample ? (size - kSample) / 7 * part : 0;
      add_file_part(f, offset, kSample);
    }
  }
  for (const KvRowFormat& f : cache.pool().layout().layers) {
    const int fields[] = {
        static_cast<int>(f.dtype), f.n_head_kv,  f.head_dim_k, f.head_dim_v, f.v_aliases_k,
        f.rope_tail_dim,           f.quant_group};
    add(fields, sizeof(fields));
  }
  const int block_size = cache.pool().block_size();
  add(&block_size, sizeof(block_size));
  const uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

}  // namespace mlarun
