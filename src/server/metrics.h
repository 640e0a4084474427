// Renders the engine's counters and gauges in the Prometheus text exposition format
// (prometheus.io/docs/instrumenting/exposition_formats) for GET /metrics.
#pragma once

#include <cstdint>
#include <string>

#include "runtime/engine.h"

namespace mlarun::server {

struct HttpCounters {
  int64_t http_requests = 0;
  int64_t http_errors = 0;  // 4xx and 5xx responses
};

std::string RenderMetrics(const EngineStats& stats, const HttpCounters& http);

}  // namespace mlarun::server
