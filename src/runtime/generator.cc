// Prefill + decode loop with timing.
#include "runtime/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace mlarun {

namespace {
double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

void ReserveOrThrow(KvCache& cache, int32_t seq, int64_t n_tokens) {
  if (!cache.Reserve(seq, n_tokens)) {
    const BlockPoolStats st = cache.pool().stats();
    throw Error("--kv-budget: the KV cache is full (" + std::to_string(st.blocks_in_use) + " of " +
                std::to_string(st.blocks_total) + " blocks of " +
                std::to_string(st.bytes_per_block) + " bytes in use) at " +
                std::to_string(cache.Length(seq)) +
                " tokens; raise --kv-budget or use a bounded --kv-policy");
  }
}

std::vector<float> Prefill(const Model& model, Exec& exec, KvCache& cache, int32_t seq,
                           std::span<const int32_t> prompt, const GenerateOptions& options) {
  const int64_t vocab = model.config().vocab_size;
  std::vector<float> logits(static_cast<size_t>(vocab));
  const int64_t n = static_cast<int64_t>(prompt.size());
  const int64_t chunk = std::max(1, options.prefill_chunk);
  std::vector<BatchToken> batch;
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t end = std::min(n, begin + chunk);
    const int64_t start_pos = cache.Length(seq);
    batch.clear();
    for (int64_t i = begin; i < end; ++i) {
      batch.push_back({.token = prompt[static_cast<size_t>(i)],
                       .seq = seq,
                       .pos = start_pos + (i - begin),
                       .want_logits = i == n - 1});
    }
    ReserveOrThrow(cache, seq, end - begin);
    model.Forward(exec, cache, batch,
                  {.mla_path = options.mla_path, .expert_stats = options.expert_stats},
                  logits.data());
    if (options.on_prefill_progress) options.on_prefill_progress(end, n);
  }
  return logits;
}

GenerateResult Generate(const Model& model, Exec& exec, KvCache& cache, int32_t seq,
                        std::span<const int32_t> prompt, const GenerateOptions& options) {
  if (prompt.empty()) throw Error("the prompt is empty");
  GenerateResult result;
  result.prompt_tokens = static_cast<int64_t>(prompt.size());
  Sampler sampler(options.sampling);
  std::vector<int32_t> history(prompt.begin(), prompt.end());

  auto start = std::chrono::steady_clock::now();
  std::vector<float> logits = Prefill(model, exec, cache, seq, prompt, options);
  result.prefill_seconds = SecondsSince(start);

  start = std::chrono::steady_clock::now();
  result.finish_reason = "length";
  for (int i = 0; i < options.max_new_tokens; ++i) {
    const int32_t token = sampler.Sample(logits, history);
    result.tokens.push_back(token);
    history.push_back(token);
    const bool stop = std::find(options.stop_ids.begin(), options.stop_ids.end(), token) !=
                      options.stop_ids.end();
    if (options.on_token && !options.on_token(token)) {
      result.finish_reason = "stop";
      break;
    }
    if (stop) {
      result.finish_reason = "stop";
      break;
    }
    if (i + 1 == options.max_new_tokens) break;
    ReserveOrThrow(cache, seq, 1);
    const BatchToken next{
        .token = token, .seq = seq, .pos = cache.Length(seq), .want_logits = true};
    model.Forward(exec, cache, std::span<const BatchToken>(&next, 1),
                  {.mla_path = options.mla_path, .expert_stats = options.expert_stats},
                  logits.data());
  }
  result.decode_seconds = SecondsSince(start);
  return result;
}

}  // namespace mlarun
