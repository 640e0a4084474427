// The serving engine facade: requests are submitted from any thread, one owner thread calls
// Step() to run continuous batching over the shared KV cache, and each request's tokens and end
// come back through its own callbacks (routed by request id). See docs/server.md.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/kernel_table.h"
#include "kv/disk_cache.h"
#include "kv/kv_cache.h"
#include "kv/prefix_cache.h"
#include "model/model.h"
#include "runtime/sampler.h"

namespace mlarun {

using RequestId = uint64_t;

enum class FinishReason {
  kStop,       // a stop token, or `on_token` asked to stop (e.g. a stop string)
  kLength,     // max_tokens or the context length reached
  kCancelled,  // Cancel() / CancelAll()
  kError,      // the engine could not run the request (message in `error`)
};
std::string_view FinishReasonName(FinishReason reason);

struct RequestUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // sampled tokens, a final stop token included
  int64_t cached_tokens = 0;      // prompt tokens served by the prefix cache at first admission
  int64_t preemptions = 0;
  double queue_seconds = 0.0;        // submit -> first admission
  double first_token_seconds = 0.0;  // submit -> first sampled token
  double total_seconds = 0.0;        // submit -> finish
};

struct EngineRequest {
  std::vector<int32_t> prompt;  // non-empty, ids < vocab
  int64_t max_tokens = 16;
  SamplerOptions sampling;
  std::vector<int32_t> stop_ids;  // sampling one finishes the request (kStop); not passed on
  // >= 0: on_token also gets the token's log-probability and the `logprobs` most likely tokens'
  // (ComputeLogprobs, from the raw logits); < 0: it gets null.
  int logprobs = -1;
  // Called on the engine thread for every other sampled token; returning false finishes the
  // request with kStop.
  std::function<bool(int32_t token, const TokenLogprobs* logprobs)> on_token;
  // Called on the engine thread exactly once, last.
  std::function<void(FinishReason reason, const RequestUsage& usage, const std::string& error)>
      on_finish;
};

struct EngineOptions {
  // Prefill chunks end at multiples of `prefill_chunk` positions (and at the prompt's end), so a
  // sequence's chunks never depend on what else is running.
  int prefill_chunk = 256;
  int max_prefill_tokens = 512;  // per step, whole chunks only (at least one chunk)
  // MLA path of prefill chunks. kAuto picks per chunk the one with fewer multiply-adds (after a
  // prefix-cache hit or deep in a conversation, a short chunk attends over the latent instead of
  // re-expanding the whole context), from the chunk's own length and depth only, so batching
  // never changes a sequence's numbers. kNaive keeps them bitwise independent of cache hits too
  // (a hit moves where prefill starts, and with it the path of the tokens after it).
  MlaPath prefill_mla = MlaPath::kAuto;
  int max_running = 64;        // sequences admitted at once
  int64_t max_context = 0;     // tokens per sequence; 0: the model's max_position_embeddings
  bool prefix_caching = true;  // needs the full KV policy; ignored otherwise
  std::optional<DiskCacheOptions> disk_cache;  // with prefix caching; fingerprint etc. filled in
  uint64_t fingerprint = 0;  // model identity (FingerprintModel), seeds the prefix hash chain
  std::function<void(const std::string&)> log;  // one line per event worth logging
};

struct EngineStats {
  int64_t requests_submitted = 0;
  int64_t requests_finished = 0;  // any reason
  int64_t requests_cancelled = 0;
  int64_t requests_failed = 0;
  int64_t preemptions = 0;
  int64_t prompt_tokens = 0;      // of finished and running requests, at admission
  int64_t completion_tokens = 0;  // sampled
  int64_t prefill_tokens = 0;     // computed by prefill passes (cache hits excluded)
  int64_t decode_tokens = 0;      // computed by decode passes
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
  int64_t steps = 0;
  int64_t waiting = 0;  // queued or preempted
  int64_t running = 0;  // admitted
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;    // held by requests
  int64_t kv_blocks_cached = 0;  // held only by the prefix cache (reclaimable)
  int64_t kv_blocks_free = 0;
  int kv_block_size = 0;
  bool prefix_caching = false;
  PrefixCacheStats prefix;
  bool disk_cache = false;
  DiskCacheStats disk;
};

class Scheduler;

class Engine {
 public:
  // `model`, `exec` and `cache` must outlive the engine; only the owner thread (the one calling
  // Step) may use them while it runs. Throws Error for bad options (e.g. the disk cache dir).
  Engine(const Model& model, Exec& exec, KvCache& cache, const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Returns "" when a request with `prompt_tokens` and `max_tokens` fits the context length and
  // the KV budget, else a one-line reason. Thread-safe.
  std::string CheckLimits(int64_t prompt_tokens, int64_t max_tokens) const;
  // Queues `request`; returns its id. Thread-safe. PRECONDITION: CheckLimits passed.
  RequestId Submit(EngineRequest request);
  // Finishes the request with kCancelled at the next step (no-op once finished). Thread-safe.
  void Cancel(RequestId id);
  // Cancels every queued and running request. Thread-safe.
  void CancelAll();

  // Runs one scheduling step (admit, one decode pass over all running sequences, prefill chunks)
  // on the owner thread. Returns whether requests remain queued or running.
  bool Step();
  // Blocks the owner thread until a request or cancel arrives, Wake() is called, or `timeout`.
  void WaitForWork(std::chrono::milliseconds timeout);
  // Wakes WaitForWork. Thread-safe.
  void Wake();
  // Writes the prefix cache's blocks to the disk cache (owner thread; at shutdown).
  void FlushPrefixCache();

  // A snapshot taken at the end of the last step. Thread-safe.
  EngineStats Stats() const;
  int64_t max_context() const { return max_context_; }
  // Tokens one request can hold in the KV cache (prompt + output); INT64_MAX for bounded policies.
  int64_t max_sequence_tokens() const {
    return max_sequence_blocks_ == INT64_MAX ? INT64_MAX : max_sequence_blocks_ * block_size_;
  }

 private:
  void DrainInbox();

  std::unique_ptr<DiskCache> disk_;
  std::unique_ptr<PrefixCache> prefix_;
  std::unique_ptr<Scheduler> scheduler_;
  KvCache* cache_ = nullptr;
  int64_t max_context_ = 0;
  int64_t max_sequence_blocks_ = 0;
  int block_size_ = 0;

  mutable std::mutex mutex_;  // guards the fields below
  std::condition_variable work_;
  std::vector<std::pair<RequestId, EngineRequest>> inbox_;
  std::vector<RequestId> cancels_;
  bool cancel_all_ = false;
  bool wake_ = false;
  RequestId next_id_ = 1;
  int64_t submitted_ = 0;
  EngineStats stats_;
};

// Returns a 64-bit identity of the model in `model_dir` (config.json and the names, sizes and
// sampled contents of its safetensors files; or those of the GGUF file `model_dir` names)
// combined with the KV layout and block size, for disk cache files.
uint64_t FingerprintModel(const std::string& model_dir, const KvCache& cache);

}  // namespace mlarun
