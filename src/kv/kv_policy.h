// Bounded-memory cache policies, parsed from `--kv-policy` strings such as
// "window:512,sinks:4,compress:16". For a query at position i:
//   window:W    raw tokens j with i - W < j <= i;
//   sinks:S     plus the tokens j < S, forever (attention sinks, Xiao et al. 2023);
//   compress:K  out-of-window non-sink tokens j in [S, i - W] form groups of K consecutive tokens;
//               each complete group is one summary row (the mean of its K cache rows) whose score
//               gets + ln(K); the incomplete group's tokens stay visible raw.
// The model's own sliding window (Mistral) combines with the policy's: the smaller one wins.
#pragma once

#include <string>
#include <string_view>

namespace mlarun {

struct KvPolicy {
  int window = 0;    // 0: unbounded
  int sinks = 0;
  int compress = 0;  // 0: off; else K >= 2 (needs a window)

  bool IsFull() const { return window == 0; }
  // Returns the canonical spelling, e.g. "full" or "window:512,sinks:4".
  std::string ToString() const;
};

// Parses a policy string; throws Error naming `--kv-policy` and the bad part.
KvPolicy ParseKvPolicy(std::string_view text);

}  // namespace mlarun
