// Single-sequence generation: chunked prefill of a prompt, then token-by-token decode with a
// sampler, over a KvCache sequence. Used by `mlarun generate`, `chat` and `perplexity`.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "runtime/sampler.h"

namespace mlarun {

struct GenerateOptions {
  int max_new_tokens = 32;
  SamplerOptions sampling;
  int prefill_chunk = 512;  // tokens per prefill forward pass (bounds activation memory)
  MlaPath mla_path = MlaPath::kAuto;
  std::vector<int32_t> stop_ids;        // EOS and other stop tokens
  ExpertStats* expert_stats = nullptr;  // accumulated when set
  // Called after every generated token; return false to stop early.
  std::function<bool(int32_t token)> on_token;
  // Called after each prefill chunk with (tokens done, total).
  std::function<void(int64_t, int64_t)> on_prefill_progress;
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated tokens (stop token included if hit)
  std::string finish_reason;    // "stop" or "length"
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
};

// Prefills `prompt` into `seq` (continuing what it holds) and returns the logits [vocab] of the
// last prompt token. Throws Error if the cache cannot hold the tokens.
std::vector<float> Prefill(const Model& model, Exec& exec, KvCache& cache, int32_t seq,
                           std::span<const int32_t> prompt, const GenerateOptions& options);

// Prefills `prompt`, then samples up to `max_new_tokens` tokens.
GenerateResult Generate(const Model& model, Exec& exec, KvCache& cache, int32_t seq,
                        std::span<const int32_t> prompt, const GenerateOptions& options);

// Reserves cache room or throws Error naming --kv-budget.
void ReserveOrThrow(KvCache& cache, int32_t seq, int64_t n_tokens);

}  // namespace mlarun
