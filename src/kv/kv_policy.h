// Bounded-memory cache policies, parsed from `--kv-policy` strings such as
// "window:512,sinks:4,compress:16". For a query at position i:
//   window:W    raw tokens j with i - W < j <= i;
//   sinks:S     plus the tokens j < S, forever (attention sinks, Xiao et al. 2023);
//   compress:K  out-of-window non-sink tokens j in [S, i - W] form groups of K consecutive tokens;
//               each complete group is one summary row (the mean of its K cache rows) whose score
//               gets + ln(K); the incomplete group's tokens stay visible raw.
// The model's own sliding window (Mistral) combines with the policy's: the smaller one wins.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mlarun {

struct KvPolicy {
  int window = 0;  // 0: unbounded
  int sinks = 0;
  int compress = 0;  // 0: off; else K >= 2 (needs a window)

  bool IsFull() const { return window == 0; }
  // Returns the canonical spelling, e.g. "full" or "window:512,sinks:4".
  std::string ToString() const;
};

// Parses a policy string; throws Error naming `--kv-policy` and the bad part.
KvPolicy ParseKvPolicy(std::string_view text);

// Returns how many cache rows (raw tokens + summaries) the last of `n_tokens` tokens attends to,
// i.e. what the policy must keep, given the effective window (policy and model combined; 0 = none):
//   full:               n
//   window W, sinks S:  min(n, S + W)
//   + compress K:       min(n, S + W) + (m mod K) + floor(m / K),  m = max(0, n - S - W)
// Paged storage rounds up to whole blocks: at most two partially used blocks more.
int64_t PolicyRowsHeld(const KvPolicy& policy, int effective_window, int64_t n_tokens);

}  // namespace mlarun
