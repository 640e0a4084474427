// Prometheus text for GET /metrics: one HELP/TYPE header per metric, names prefixed `mlarun_`.
#include "server/metrics.h"

#include <cstdio>

namespace mlarun::server {

namespace {

void Add(std::string* out, const char* name, const char* type, const char* help, double value) {
  char line[64];
  std::snprintf(line, sizeof(line), "%.6g", value);
  *out += std::string("# HELP mlarun_") + name + " " + help + "\n# TYPE mlarun_" + name + " " +
          type + "\nmlarun_" + name + " " + line + "\n";
}

double Rate(double n, double seconds) { return seconds > 0 ? n / seconds : 0.0; }

}  // namespace

std::string RenderMetrics(const EngineStats& s, const HttpCounters& http) {
  std::string out;
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  Add(&out, "http_requests_total", "counter", "HTTP requests received.", d(http.http_requests));
  Add(&out, "http_errors_total", "counter", "HTTP responses with status >= 400.",
      d(http.http_errors));
  Add(&out, "requests_total", "counter", "Generation requests submitted to the engine.",
      d(s.requests_submitted));
  Add(&out, "requests_finished_total", "counter", "Generation requests finished (any reason).",
      d(s.requests_finished));
  Add(&out, "requests_cancelled_total", "counter",
      "Generation requests cancelled (client gone or shutdown).", d(s.requests_cancelled));
  Add(&out, "requests_failed_total", "counter", "Generation requests the engine failed.",
      d(s.requests_failed));
  Add(&out, "preemptions_total", "counter",
      "Sequences preempted for lack of KV blocks (recomputed later).", d(s.preemptions));
  Add(&out, "prompt_tokens_total", "counter", "Prompt tokens of admitted requests (tokens in).",
      d(s.prompt_tokens));
  Add(&out, "completion_tokens_total", "counter", "Generated tokens (tokens out).",
      d(s.completion_tokens));
  Add(&out, "prefill_tokens_total", "counter", "Tokens computed by prefill passes.",
      d(s.prefill_tokens));
  Add(&out, "prefill_seconds_total", "counter", "Time spent in prefill passes.", s.prefill_seconds);
  Add(&out, "prefill_tokens_per_second", "gauge", "Prefill throughput while prefilling.",
      Rate(d(s.prefill_tokens), s.prefill_seconds));
  Add(&out, "decode_tokens_total", "counter", "Tokens computed by decode passes.",
      d(s.decode_tokens));
  Add(&out, "decode_seconds_total", "counter", "Time spent in decode passes.", s.decode_seconds);
  Add(&out, "decode_tokens_per_second", "gauge",
      "Aggregate decode throughput (all sequences) while decoding.",
      Rate(d(s.decode_tokens), s.decode_seconds));
  Add(&out, "engine_steps_total", "counter", "Scheduler steps that ran a forward pass.",
      d(s.steps));
  Add(&out, "queue_length", "gauge", "Requests waiting for admission (queued or preempted).",
      d(s.waiting));
  Add(&out, "running_requests", "gauge", "Requests admitted (prefilling or decoding).",
      d(s.running));
  Add(&out, "kv_block_size_tokens", "gauge", "Tokens per KV block.", d(s.kv_block_size));
  Add(&out, "kv_blocks_total", "gauge", "KV blocks under --kv-budget.", d(s.kv_blocks_total));
  Add(&out, "kv_blocks_used", "gauge", "KV blocks held by requests.", d(s.kv_blocks_used));
  Add(&out, "kv_blocks_cached", "gauge", "KV blocks held only by the prefix cache (reclaimable).",
      d(s.kv_blocks_cached));
  Add(&out, "kv_blocks_free", "gauge", "Free KV blocks.", d(s.kv_blocks_free));
  Add(&out, "prefix_cache_enabled", "gauge", "1 when prefix caching is on.",
      s.prefix_caching ? 1 : 0);
  Add(&out, "prefix_cache_queried_tokens_total", "counter", "Prompt tokens looked up.",
      d(s.prefix.queried_tokens));
  Add(&out, "prefix_cache_hit_tokens_total", "counter", "Prompt tokens served from the cache.",
      d(s.prefix.hit_tokens));
  Add(&out, "prefix_cache_disk_hit_tokens_total", "counter",
      "Prompt tokens served from the disk cache.", d(s.prefix.disk_hit_tokens));
  Add(&out, "prefix_cache_hit_rate", "gauge", "hit_tokens / queried_tokens.",
      Rate(d(s.prefix.hit_tokens), d(s.prefix.queried_tokens)));
  Add(&out, "prefix_cache_blocks", "gauge", "Blocks registered in the prefix cache.",
      d(s.prefix.cached_blocks));
  Add(&out, "prefix_cache_evicted_blocks_total", "counter", "Blocks evicted from memory.",
      d(s.prefix.evicted_blocks));
  Add(&out, "disk_cache_enabled", "gauge", "1 when --prefix-cache-dir is set.",
      s.disk_cache ? 1 : 0);
  Add(&out, "disk_cache_files", "gauge", "Block files in the disk cache.", d(s.disk.files));
  Add(&out, "disk_cache_bytes", "gauge", "Bytes of block files in the disk cache.",
      static_cast<double>(s.disk.bytes));
  Add(&out, "disk_cache_stores_total", "counter", "Blocks written to disk.", d(s.disk.stores));
  Add(&out, "disk_cache_loads_total", "counter", "Blocks read back from disk.", d(s.disk.loads));
  Add(&out, "disk_cache_rejected_total", "counter",
      "Disk blocks ignored as corrupt, truncated or foreign.", d(s.disk.rejected));
  return out;
}

}  // namespace mlarun::server
