// Parsing of --kv-policy strings.
#include "kv/kv_policy.h"

#include <algorithm>
#include <charconv>

#include "core/error.h"

namespace mlarun {

std::string KvPolicy::ToString() const {
  if (window == 0 && sinks == 0) return "full";
  std::string s;
  if (window > 0) s += "window:" + std::to_string(window);
  if (sinks > 0) s += std::string(s.empty() ? "" : ",") + "sinks:" + std::to_string(sinks);
  if (compress > 0) s += ",compress:" + std::to_string(compress);
  return s;
}

int64_t PolicyRowsHeld(const KvPolicy& policy, int effective_window, int64_t n_tokens) {
  if (effective_window == 0) return n_tokens;
  const int64_t raw = std::min<int64_t>(n_tokens, policy.sinks + effective_window);
  if (policy.compress == 0) return raw;
  const int64_t m = std::max<int64_t>(0, n_tokens - policy.sinks - effective_window);
  return raw + m % policy.compress + m / policy.compress;
}

KvPolicy ParseKvPolicy(std::string_view text) {
  KvPolicy policy;
  if (text.empty() || text == "full") return policy;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view part = text.substr(pos, comma - pos);
    const size_t colon = part.find(':');
    const std::string_view name = part.substr(0, colon);
    if (name == "full" && colon == std::string_view::npos) {
      pos = comma + 1;
      continue;
    }
    if (colon == std::string_view::npos) {
      throw Error("--kv-policy: '" + std::string(part) +
                  "' needs a value (expected full, window:W, sinks:S, compress:K)");
    }
    const std::string_view value_text = part.substr(colon + 1);
    int value = 0;
    const auto [end, ec] =
        std::from_chars(value_text.data(), value_text.data() + value_text.size(), value);
    if (ec == std::errc::result_out_of_range) {
      throw Error("--kv-policy: '" + std::string(part) + "' is out of range (at most 2^31 - 1)");
    }
    if (ec != std::errc() || end != value_text.data() + value_text.size()) {
      throw Error("--kv-policy: '" + std::string(part) + "' has a non-integer value");
    }
    if (name == "window") {
      if (value < 1) throw Error("--kv-policy: window must be >= 1, got " + std::to_string(value));
      policy.window = value;
    } else if (name == "sinks") {
      if (value < 0) throw Error("--kv-policy: sinks must be >= 0, got " + std::to_string(value));
      policy.sinks = value;
    } else if (name == "compress") {
      if (value < 2)
        throw Error("--kv-policy: compress must be >= 2, got " + std::to_string(value));
      policy.compress = value;
    } else {
      throw Error("--kv-policy: unknown policy '" + std::string(name) +
                  "' (expected full, window:W, sinks:S, compress:K)");
    }
    pos = comma + 1;
  }
  if (policy.compress > 0 && policy.window == 0) {
    throw Error("--kv-policy: compress:K needs a window:W to compress what leaves it");
  }
  return policy;
}

}  // namespace mlarun
