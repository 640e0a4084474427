// Block tables and policy bookkeeping. Positions are logical (true) token positions; logical block
// b holds positions [b * block_size, (b + 1) * block_size).
#include "kv/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/check.h"
#include "core/error.h"

namespace mlarun {

KvCache::KvCache(const KvLayout& layout, const KvCacheOptions& options)
    : pool_(layout, {.block_size = options.block_size, .budget_bytes = options.budget_bytes}),
      policy_(options.policy),
      block_size_(options.block_size) {
  window_ = policy_.window;
  if (options.model_window > 0) {
    window_ = window_ == 0 ? options.model_window : std::min(window_, options.model_window);
  }
}

KvCache::Sequence& KvCache::Get(int32_t seq) {
  if (seq < 0 || static_cast<size_t>(seq) >= sequences_.size() ||
      !sequences_[static_cast<size_t>(seq)].active) {
    throw Error("KV cache: invalid sequence handle " + std::to_string(seq));
  }
  return sequences_[static_cast<size_t>(seq)];
}

const KvCache::Sequence& KvCache::Get(int32_t seq) const {
  return const_cast<KvCache*>(this)->Get(seq);
}

int32_t KvCache::AddSequence() {
  for (size_t i = 0; i < sequences_.size(); ++i) {
    if (!sequences_[i].active) {
      sequences_[i] = Sequence{.active = true};
      return static_cast<int32_t>(i);
    }
  }
  sequences_.push_back(Sequence{.active = true});
  return static_cast<int32_t>(sequences_.size() - 1);
}

void KvCache::RemoveSequence(int32_t seq) {
  Sequence& s = Get(seq);
  for (int32_t b : s.blocks) {
    if (b >= 0) pool_.Release(b);
  }
  for (int32_t b : s.summary_blocks) pool_.Release(b);
  s = Sequence{};
}

int64_t KvCache::Length(int32_t seq) const { return Get(seq).length; }

int32_t KvCache::ForkSequence(int32_t source, int64_t n_tokens) {
  const Sequence& src = Get(source);
  MLARUN_CHECK(n_tokens >= 0 && n_tokens <= src.length);
  // Copy the table: AddSequenceFromBlocks may grow `sequences_` and move `src`.
  const std::vector<int32_t> blocks = src.blocks;
  return AddSequenceFromBlocks(blocks, n_tokens);
}

int32_t KvCache::AddSequenceFromBlocks(std::span<const int32_t> blocks, int64_t n_tokens) {
  if (window_ != 0) throw Error("KV cache: shared prefixes need the full policy");
  const int64_t n_blocks = (n_tokens + block_size_ - 1) / block_size_;
  MLARUN_CHECK(n_tokens >= 0 && n_blocks <= static_cast<int64_t>(blocks.size()));
  const bool partial = n_tokens % block_size_ != 0;
  if (partial && pool_.FreeBlocks() == 0) return -1;
  const int32_t seq = AddSequence();
  Sequence& dst = Get(seq);
  const int64_t full_blocks = n_tokens / block_size_;
  for (int64_t b = 0; b < full_blocks; ++b) {
    const int32_t block = blocks[static_cast<size_t>(b)];
    pool_.Retain(block);
    dst.blocks.push_back(block);
  }
  if (partial) {
    const int32_t copy = pool_.Allocate();
    const int32_t from = blocks[static_cast<size_t>(full_blocks)];
    const int rows = static_cast<int>(n_tokens % block_size_);
    for (size_t layer = 0; layer < pool_.layout().layers.size(); ++layer) {
      const int l = static_cast<int>(layer);
      std::memcpy(pool_.Row(l, copy, 0), pool_.Row(l, from, 0),
                  static_cast<size_t>(rows) * pool_.layout().layers[layer].RowBytes());
    }
    dst.blocks.push_back(copy);
  }
  dst.length = n_tokens;
  return seq;
}

int64_t KvCache::CompleteGroups(int64_t pos) const {
  if (policy_.compress == 0 || window_ == 0) return 0;
  const int64_t out_of_window = pos - window_ + 1 - policy_.sinks;
  return out_of_window > 0 ? out_of_window / policy_.compress : 0;
}

int64_t KvCache::FirstNeededPosition(const Sequence& s, int64_t next_pos) const {
  if (window_ == 0) return 0;
  const int64_t window_start = std::max<int64_t>(0, next_pos - window_ + 1);
  if (policy_.compress == 0) return window_start;
  // Tokens of groups not yet summarised must stay until their summary is computed.
  return std::min(window_start, policy_.sinks + s.n_summaries * policy_.compress);
}

bool KvCache::Reserve(int32_t seq, int64_t n_new) {
  Sequence& s = Get(seq);
  const int64_t end = s.length + n_new;
  const int64_t raw_needed = (end + block_size_ - 1) / block_size_;
  const int64_t new_raw = std::max<int64_t>(0, raw_needed - static_cast<int64_t>(s.blocks.size()));
  const int64_t summaries = n_new > 0 ? CompleteGroups(end - 1) : 0;
  const int64_t summary_needed = (summaries + block_size_ - 1) / block_size_;
  const int64_t new_summary =
      std::max<int64_t>(0, summary_needed - static_cast<int64_t>(s.summary_blocks.size()));
  if (new_raw + new_summary > pool_.FreeBlocks()) return false;
  for (int64_t i = 0; i < new_raw; ++i) s.blocks.push_back(pool_.Allocate());
  for (int64_t i = 0; i < new_summary; ++i) s.summary_blocks.push_back(pool_.Allocate());
  return true;
}

void KvCache::WriteRow(int32_t seq, int layer, int64_t pos, const float* values) {
  Sequence& s = Get(seq);
  const int32_t block = s.blocks.at(static_cast<size_t>(pos / block_size_));
  if (block < 0)
    throw Error("KV cache: write to a recycled block at position " + std::to_string(pos));
  EncodeKvRow(pool_.layout().layers[static_cast<size_t>(layer)], values,
              pool_.Row(layer, block, static_cast<int>(pos % block_size_)));
}

void KvCache::UpdateSummaries(int32_t seq, int layer, int64_t n_written) {
  Sequence& s = Get(seq);
  const int64_t groups = n_written > 0 ? CompleteGroups(n_written - 1) : 0;
  if (groups <= s.n_summaries) return;
  const KvRowFormat& format = pool_.layout().layers[static_cast<size_t>(layer)];
  const int n_values = format.ValuesPerRow();
  std::vector<float> row(static_cast<size_t>(n_values));
  std::vector<float> sum(static_cast<size_t>(n_values));
  const int k = policy_.compress;
  for (int64_t g = s.n_summaries; g < groups; ++g) {
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int i = 0; i < k; ++i) {
      const int64_t pos = policy_.sinks + g * k + i;
      const int32_t block = s.blocks[static_cast<size_t>(pos / block_size_)];
      DecodeKvRow(format, pool_.Row(layer, block, static_cast<int>(pos % block_size_)), row.data());
      for (int v = 0; v < n_values; ++v) sum[static_cast<size_t>(v)] += row[static_cast<size_t>(v)];
    }
    for (float& v : sum) v /= static_cast<float>(k);
    EncodeKvRow(format, sum.data(),
                pool_.Row(layer, s.summary_blocks[static_cast<size_t>(g / block_size_)],
                          static_cast<int>(g % block_size_)));
  }
}

void KvCache::AppendRange(const Sequence& s, int64_t begin, int64_t end,
                          std::vector<KvSpan>* out) const {
  for (int64_t pos = begin; pos < end;) {
    const int64_t logical = pos / block_size_;
    const int64_t block_end = std::min(end, (logical + 1) * block_size_);
    MLARUN_CHECK(s.blocks[static_cast<size_t>(logical)] >= 0);  // recycled rows are never visible
    out->push_back({.block = s.blocks[static_cast<size_t>(logical)],
                    .row_begin = static_cast<int32_t>(pos % block_size_),
                    .n_rows = static_cast<int32_t>(block_end - pos),
                    .score_bias = 0.0f});
    pos = block_end;
  }
}

void KvCache::VisibleSpans(int32_t seq, int64_t pos, std::vector<KvSpan>* out) const {
  const Sequence& s = Get(seq);
  if (window_ == 0) {
    AppendRange(s, 0, pos + 1, out);
    return;
  }
  const int64_t groups = CompleteGroups(pos);
  if (groups > 0) {
    // Summary g sits in row g % block_size of summary block g / block_size.
    const float bias = std::log(static_cast<float>(policy_.compress));
    for (int64_t g = 0; g < groups;) {
      const int64_t block_end = std::min(groups, (g / block_size_ + 1) * block_size_);
      out->push_back({.block = s.summary_blocks[static_cast<size_t>(g / block_size_)],
                      .row_begin = static_cast<int32_t>(g % block_size_),
                      .n_rows = static_cast<int32_t>(block_end - g),
                      .score_bias = bias});
      g = block_end;
    }
  }
  int64_t low = std::max<int64_t>(0, pos - window_ + 1);
  if (policy_.compress > 0 && low > policy_.sinks) {
    low = policy_.sinks + groups * policy_.compress;  // the incomplete group stays raw
  }
  const int64_t sinks_end = std::min<int64_t>(policy_.sinks, pos + 1);
  if (sinks_end >= low) {
    AppendRange(s, 0, pos + 1, out);
  } else {
    AppendRange(s, 0, sinks_end, out);
    AppendRange(s, low, pos + 1, out);
  }
}

void KvCache::Commit(int32_t seq, int64_t n) {
  Sequence& s = Get(seq);
  s.length += n;
  s.n_summaries = CompleteGroups(s.length - 1);
  const int64_t first_needed = FirstNeededPosition(s, s.length);
  for (size_t b = 0; b < s.blocks.size(); ++b) {
    const int64_t begin = static_cast<int64_t>(b) * block_size_;
    const int64_t end = begin + block_size_;
    if (end > first_needed) break;
    if (s.blocks[b] >= 0 && begin >= policy_.sinks) {
      pool_.Release(s.blocks[b]);
      s.blocks[b] = -1;
    }
  }
}

size_t KvCache::UsedBytes() const {
  int64_t rows = 0;
  for (const Sequence& s : sequences_) {
    if (!s.active) continue;
    for (size_t b = 0; b < s.blocks.size(); ++b) {
      if (s.blocks[b] < 0) continue;
      const int64_t begin = static_cast<int64_t>(b) * block_size_;
      rows += std::clamp<int64_t>(s.length - begin, 0, block_size_);
    }
    rows += s.n_summaries;
  }
  return static_cast<size_t>(rows) * BytesPerToken();
}

size_t KvCache::AllocatedBytes() const {
  const BlockPoolStats st = pool_.stats();
  return static_cast<size_t>(st.blocks_in_use) * st.bytes_per_block;
}

}  // namespace mlarun
