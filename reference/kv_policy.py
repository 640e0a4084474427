"""KV-cache policies of mlarun: full, sliding window, attention sinks, compression.

Sources:
  * Sliding-window attention: Beltagy et al., "Longformer" (arXiv 2004.05150) and
    Jiang et al., "Mistral 7B" (arXiv 2310.06825): query i sees i - W < s <= i.
  * Attention sinks: Xiao et al., "Efficient Streaming Language Models with
    Attention Sinks" (StreamingLLM, arXiv 2309.17453): the first S tokens stay
    visible forever.
  * Compression (mlarun's own policy, semantics fixed by the project brief):
    out-of-window, non-sink tokens s in [S, i - W] are grouped from S in complete
    groups of K; each group is one summary entry whose cache row is the mean of
    the K rows, and whose attention logit gets + ln(K) after the softmax scale
    (so a group of K identical rows weighs exactly like the K raw rows). The
    incomplete tail of at most K-1 tokens stays visible raw.

Two independent implementations live here so they can check each other:
  * `visible_entries` / `gather_entries`: the visible set written directly from
    the definition, for a full-sequence (prefill) forward pass;
  * `BoundedCache`: an explicit streaming cache for token-by-token decoding,
    holding at most S sink rows, one summary row per complete group, K-1 pending
    rows and W window rows.
"""

import collections
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class KVPolicy:
    window: int = None      # W, None = unbounded (full attention)
    sinks: int = 0          # S
    compress: int = None    # K, None = no compression

    def describe(self):
        if self.window is None:
            return "full"
        parts = [f"window:{self.window}"]
        if self.sinks:
            parts.append(f"sinks:{self.sinks}")
        if self.compress:
            parts.append(f"compress:{self.compress}")
        return ",".join(parts)


FULL = KVPolicy()


def parse_kv_policy(text):
    """Parse 'window:512,sinks:4,compress:16' (any subset, any order).
    None, '' and 'full' mean full attention. Raises ValueError naming the option."""
    if text is None or text.strip() in ("", "full"):
        return FULL
    values = {}
    for item in text.split(","):
        item = item.strip()
        name, sep, value = item.partition(":")
        name = name.strip()
        if name not in ("window", "sinks", "compress"):
            raise ValueError(f"kv-policy: unknown option {name!r} in {text!r} "
                             "(expected window:W, sinks:S, compress:K)")
        if not sep:
            raise ValueError(f"kv-policy: option {name!r} needs a value, e.g. {name}:4")
        if name in values:
            raise ValueError(f"kv-policy: option {name!r} given twice in {text!r}")
        try:
            values[name] = int(value.strip())
        except ValueError:
            raise ValueError(f"kv-policy: option {name!r} has non-integer value {value!r}") from None
    window, sinks, compress = values.get("window"), values.get("sinks", 0), values.get("compress")
    if window is not None and window < 1:
        raise ValueError(f"kv-policy: window must be >= 1, got window:{window}")
    if sinks < 0:
        raise ValueError(f"kv-policy: sinks must be >= 0, got sinks:{sinks}")
    if compress is not None and compress < 2:
        raise ValueError(f"kv-policy: compress must be >= 2, got compress:{compress}")
    if compress is not None and window is None:
        raise ValueError("kv-policy: compress requires window (e.g. window:512,compress:16)")
    return KVPolicy(window=window, sinks=sinks, compress=compress)


def with_model_window(policy, model_window):
    """Combine the policy with a model's own sliding window (Mistral/Qwen2):
    the effective window is min(W, W_cfg)."""
    if model_window is None:
        return policy
    window = model_window if policy.window is None else min(policy.window, model_window)
    return KVPolicy(window=window, sinks=policy.sinks, compress=policy.compress)


def visible_entries(i, policy):
    """For a query at position i: (raw positions, summary group start positions).
    Written straight from the definition."""
    if policy.window is None:
        return list(range(i + 1)), []
    window, sinks, group = policy.window, policy.sinks, policy.compress
    first_in_window = max(0, i - window + 1)
    sink_positions = [s for s in range(min(sinks, i + 1)) if s < first_in_window]
    out_of_window = list(range(sinks, i - window + 1))        # s in [S, i - W]
    group_starts, leftovers = [], []
    if group:
        n_groups = len(out_of_window) // group
        group_starts = [sinks + g * group for g in range(n_groups)]
        leftovers = out_of_window[n_groups * group:]
    window_positions = list(range(first_in_window, i + 1))
    return sink_positions + leftovers + window_positions, group_starts


def gather_entries(rows, i, policy):
    """rows [n_tokens, *row_shape] (cache rows of positions 0..n-1).
    Returns (entry_rows [n_entries, *row_shape], entry_bias [n_entries])."""
    raw, group_starts = visible_entries(i, policy)
    parts = [rows[raw]]
    bias = [np.zeros(len(raw))]
    if group_starts:
        k = policy.compress
        parts.append(np.stack([rows[s:s + k].mean(axis=0) for s in group_starts]))
        bias.append(np.full(len(group_starts), math.log(k)))
    return np.concatenate(parts, axis=0), np.concatenate(bias)


class BoundedCache:
    """Streaming cache for one layer; rows must be appended for positions
    0, 1, 2, ... in order, each before the query at that position attends."""

    def __init__(self, policy):
        self.policy = policy
        self.sink_rows = []                    # rows of positions < S
        self.summary_rows = []                 # means of complete groups of K
        self.pending_rows = []                 # out-of-window tail (< K rows)
        self.window = collections.deque()      # (position, row) inside the window
        self.next_position = 0

    def append(self, position, row):
        if position != self.next_position:
            raise ValueError(f"cache expects position {self.next_position}, got {position}")
        self.next_position += 1
        window, sinks, group = self.policy.window, self.policy.sinks, self.policy.compress
        if window is not None and position < sinks:
            self.sink_rows.append(row)
            return
        self.window.append((position, row))
        if window is None:
            return
        while self.window and self.window[0][0] <= position - window:
            _, old_row = self.window.popleft()
            if group is None:
                continue                       # plain eviction
            self.pending_rows.append(old_row)
            if len(self.pending_rows) == group:
                self.summary_rows.append(np.mean(np.stack(self.pending_rows), axis=0))
                self.pending_rows = []

    def n_rows(self):
        return len(self.sink_rows) + len(self.summary_rows) + len(self.pending_rows) + len(self.window)

    def entries(self):
        raw = self.sink_rows + self.pending_rows + [row for _, row in self.window]
        rows = raw + self.summary_rows
        bias = [0.0] * len(raw)
        if self.summary_rows:
            bias += [math.log(self.policy.compress)] * len(self.summary_rows)
        return np.stack(rows), np.array(bias, dtype=np.float64)
