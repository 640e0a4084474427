// Implements BPE encoding over token ids: pieces start as one symbol per byte (byte-level) or per
// character, and the lowest-ranked adjacent pair is merged until none is left, as in tokenizers'
// models/bpe/word.rs. Short pieces use a linear scan, long ones a heap over a linked list.
#include "tokenizer/bpe.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdio>
#include <cstring>

#include "tokenizer/tokenizer_error.h"
#include "tokenizer/utf8.h"

namespace mlarun::detail {
namespace {

// Pieces up to this many symbols merge by scanning (cheaper than a heap for short words).
constexpr size_t kScanMergeMaxSymbols = 48;
// Longer pieces are rare and mostly unique, so they are not cached.
constexpr size_t kMaxCachedPieceBytes = 128;
constexpr uint64_t kGoldenRatio = 0x9E3779B97F4A7C15ULL;

size_t NextPowerOfTwo(size_t n) {
  size_t power = 16;
  while (power < n) {
    power <<= 1;
  }
  return power;
}

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

uint64_t HashBytes(std::string_view bytes) {
  const char* data = bytes.data();
  size_t left = bytes.size();
  uint64_t hash = 0x243F6A8885A308D3ULL ^ (bytes.size() * kGoldenRatio);
  while (left >= 8) {
    uint64_t word;
    std::memcpy(&word, data, 8);
    hash = (hash ^ word) * 0xFF51AFD7ED558CCDULL;
    hash ^= hash >> 32;
    data += 8;
    left -= 8;
  }
  if (left > 0) {
    uint64_t word = 0;
    std::memcpy(&word, data, left);
    hash = (hash ^ word) * 0xC4CEB9FE1A85EC53ULL;
  }
  hash ^= hash >> 29;
  hash *= 0xBF58476D1CE4E5B9ULL;
  hash ^= hash >> 32;
  return hash;
}

BpeCache::BpeCache(size_t max_entries)
    : slots_(NextPowerOfTwo(max_entries * 2)), max_entries_(max_entries) {}

void BpeCache::Clear() {
  std::fill(slots_.begin(), slots_.end(), Slot{});
  keys_.clear();
  ids_.clear();
  size_ = 0;
}

std::optional<std::span<const int32_t>> BpeCache::Find(std::string_view piece,
                                                       uint64_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t index = hash & mask;; index = (index + 1) & mask) {
    const Slot& slot = slots_[index];
    if (slot.key_length == 0) {
      return std::nullopt;
    }
    if (slot.hash == hash && slot.key_length == piece.size() &&
        std::memcmp(keys_.data() + slot.key_offset, piece.data(), piece.size()) == 0) {
      return std::span<const int32_t>(ids_.data() + slot.ids_offset, slot.ids_length);
    }
  }
}

void BpeCache::Insert(std::string_view piece, uint64_t hash, std::span<const int32_t> ids) {
  if (piece.empty()) {
    return;
  }
  if (size_ >= max_entries_) {
    Clear();
  }
  const size_t mask = slots_.size() - 1;
  size_t index = hash & mask;
  while (slots_[index].key_length != 0) {
    index = (index + 1) & mask;
  }
  slots_[index] =
      Slot{hash, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(piece.size()),
           static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(ids.size())};
  keys_.append(piece);
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  ++size_;
}

BpeModel::BpeModel(const BpeSpec& spec, bool byte_level, const ByteLevelAlphabet& alphabet,
                   const std::string& source)
    : byte_level_(byte_level),
      byte_fallback_(spec.byte_fallback),
      fuse_unk_(spec.fuse_unk),
      ignore_merges_(spec.ignore_merges),
      alphabet_(alphabet) {
  int32_t max_id = -1;
  for (const auto& [token, id] : spec.vocab) {
    max_id = std::max(max_id, id);
  }
  const size_t id_limit = max_id < 0 ? 0 : static_cast<size_t>(max_id) + 1;
  id_to_token_.resize(id_limit);
  has_id_.resize(id_limit, false);
  vocab_.reserve(spec.vocab.size());
  for (const auto& [token, id] : spec.vocab) {
    if (has_id_[id]) {
      std::string message = source;
      message.append(": model.vocab: id ").append(std::to_string(id)).append(" is used by both '");
      message.append(id_to_token_[id]).append("' and '").append(token).append("'");
      throw TokenizerError(message);
    }
    has_id_[id] = true;
    id_to_token_[id] = token;
    vocab_.emplace(token, id);
  }
  if (spec.unk_token) {
    const auto it = vocab_.find(*spec.unk_token);
    if (it == vocab_.end()) {
      throw TokenizerError(source + ": model.unk_token: '" + *spec.unk_token +
                           "' is not in model.vocab");
    }
    unk_id_ = it->second;
  }
  const size_t capacity = NextPowerOfTwo(spec.merges.size() * 2);
  merges_.resize(capacity);
  merge_shift_ = 64 - std::countr_zero(capacity);
  auto merge_error = [&](size_t rank, const std::string& problem) {
    return TokenizerError(source + ": model.merges[" + std::to_string(rank) + "]: " + problem);
  };
  std::string merged;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    const auto left_it = vocab_.find(left);
    if (left_it == vocab_.end()) {
      throw merge_error(rank, "unknown token '" + left + "'");
    }
    const auto right_it = vocab_.find(right);
    if (right_it == vocab_.end()) {
      throw merge_error(rank, "unknown token '" + right + "'");
    }
    merged.assign(left).append(right);
    const auto merged_it = vocab_.find(merged);
    if (merged_it == vocab_.end()) {
      throw merge_error(rank, "merged token '" + merged + "' is not in model.vocab");
    }
    InsertMerge(left_it->second, right_it->second, static_cast<int32_t>(rank), merged_it->second);
  }
  for (int byte = 0; byte < 256; ++byte) {
    const auto byte_it =
        byte_level_ ? vocab_.find(std::string(alphabet_.Utf8Of(byte))) : vocab_.end();
    byte_ids_[byte] = byte_it == vocab_.end() ? -1 : byte_it->second;
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);  // tokenizers' byte_fallback spelling
    const auto fallback_it = vocab_.find(name);
    fallback_ids_[byte] = fallback_it == vocab_.end() ? -1 : fallback_it->second;
  }
}

void BpeModel::InsertMerge(int32_t left, int32_t right, int32_t rank, int32_t merged) {
  const uint64_t key = PairKey(left, right);
  const size_t mask = merges_.size() - 1;
  for (size_t index = (key * kGoldenRatio) >> merge_shift_;; index = (index + 1) & mask) {
    MergeSlot& slot = merges_[index];
    if (slot.key == key || slot.key == ~uint64_t{0}) {
      // A repeated pair keeps the later rank, as tokenizers' HashMap collect does.
      slot = MergeSlot{key, rank, merged};
      return;
    }
  }
}

const BpeModel::MergeSlot* BpeModel::FindMerge(int32_t left, int32_t right) const {
  const uint64_t key = PairKey(left, right);
  const size_t mask = merges_.size() - 1;
  for (size_t index = (key * kGoldenRatio) >> merge_shift_;; index = (index + 1) & mask) {
    const MergeSlot& slot = merges_[index];
    if (slot.key == key) {
      return &slot;
    }
    if (slot.key == ~uint64_t{0}) {
      return nullptr;
    }
  }
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  const auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) {
    return std::nullopt;
  }
  return it->second;
}

void BpeModel::InitialSymbols(std::string_view piece, std::vector<int32_t>* symbols) const {
  bool previous_unknown = false;
  auto push_unknown = [&](std::string_view bytes) {
    if (byte_fallback_) {
      const bool all_known = std::all_of(bytes.begin(), bytes.end(), [&](char c) {
        return fallback_ids_[static_cast<uint8_t>(c)] >= 0;
      });
      if (all_known) {
        for (const char c : bytes) {
          symbols->push_back(fallback_ids_[static_cast<uint8_t>(c)]);
        }
        previous_unknown = false;
        return;
      }
    }
    if (unk_id_ >= 0 && !(fuse_unk_ && previous_unknown)) {
      symbols->push_back(unk_id_);
    }
    previous_unknown = true;  // without an unk token the character is dropped, as tokenizers does
  };
  if (byte_level_) {
    for (size_t i = 0; i < piece.size(); ++i) {
      const int32_t id = byte_ids_[static_cast<uint8_t>(piece[i])];
      if (id >= 0) {
        symbols->push_back(id);
        previous_unknown = false;
      } else {
        push_unknown(piece.substr(i, 1));
      }
    }
    return;
  }
  std::string character;
  for (size_t pos = 0; pos < piece.size();) {
    const size_t length = static_cast<size_t>(DecodeUtf8At(piece, pos).length);
    character.assign(piece.substr(pos, length));
    const auto it = vocab_.find(character);
    if (it != vocab_.end()) {
      symbols->push_back(it->second);
      previous_unknown = false;
    } else {
      push_unknown(piece.substr(pos, length));
    }
    pos += length;
  }
}

void BpeModel::ApplyMerges(std::vector<int32_t>* symbols, BpeScratch* scratch,
                           MergeStrategy strategy) const {
  if (symbols->size() < 2) {
    return;
  }
  if (strategy == MergeStrategy::kAuto) {
    strategy =
        symbols->size() <= kScanMergeMaxSymbols ? MergeStrategy::kScan : MergeStrategy::kHeap;
  }
  if (strategy == MergeStrategy::kScan) {
    MergeByScan(symbols, scratch);
  } else {
    MergeByHeap(symbols, scratch);
  }
}

void BpeModel::MergeByScan(std::vector<int32_t>* symbols, BpeScratch* scratch) const {
  std::vector<int32_t>& s = *symbols;
  std::vector<int32_t>& ranks = scratch->ranks;  // ranks[i]: rank of the pair (s[i], s[i + 1])
  auto rank_of = [&](size_t i) {
    const MergeSlot* slot = FindMerge(s[i], s[i + 1]);
    return slot == nullptr ? INT_MAX : slot->rank;
  };
  ranks.resize(s.size() - 1);
  for (size_t i = 0; i + 1 < s.size(); ++i) {
    ranks[i] = rank_of(i);
  }
  while (!ranks.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < ranks.size(); ++i) {
      if (ranks[i] < ranks[best]) {
        best = i;
      }
    }
    if (ranks[best] == INT_MAX) {
      break;
    }
    s[best] = FindMerge(s[best], s[best + 1])->merged;
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best));
    if (best > 0) {
      ranks[best - 1] = rank_of(best - 1);
    }
    if (best < ranks.size()) {
      ranks[best] = rank_of(best);
    }
  }
}

void BpeModel::MergeByHeap(std::vector<int32_t>* symbols, BpeScratch* scratch) const {
  std::vector<int32_t>& s = *symbols;
  const auto n = static_cast<int32_t>(s.size());
  std::vector<int32_t>& prev = scratch->prev;
  std::vector<int32_t>& next = scratch->next;
  std::vector<BpeScratch::HeapEntry>& heap = scratch->heap;
  prev.resize(n);
  next.resize(n);
  heap.clear();
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  // Min-heap on (rank, pos): the lowest rank first, the leftmost pair on ties.
  auto later = [](const BpeScratch::HeapEntry& a, const BpeScratch::HeapEntry& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  auto push_pair = [&](int32_t pos) {
    if (pos < 0 || next[pos] < 0) {
      return;
    }
    const MergeSlot* slot = FindMerge(s[pos], s[next[pos]]);
    if (slot == nullptr) {
      return;
    }
    heap.push_back({slot->rank, pos, s[pos], s[next[pos]]});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < n; ++i) {
    push_pair(i);
  }
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const BpeScratch::HeapEntry top = heap.back();
    heap.pop_back();
    const int32_t right = next[top.pos];
    if (s[top.pos] != top.left || right < 0 || s[right] != top.right) {
      continue;  // stale
    }
    s[top.pos] = FindMerge(top.left, top.right)->merged;
    s[right] = -1;
    next[top.pos] = next[right];
    if (next[right] >= 0) {
      prev[next[right]] = top.pos;
    }
    push_pair(prev[top.pos]);
    push_pair(top.pos);
  }
  size_t kept = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) {
    s[kept++] = s[i];
  }
  s.resize(kept);
}

void BpeModel::Tokenize(std::string_view piece, BpeCache* cache, BpeScratch* scratch,
                        std::vector<int32_t>* out) const {
  if (piece.empty()) {
    return;
  }
  if (byte_level_ && piece.size() == 1 && byte_ids_[static_cast<uint8_t>(piece[0])] >= 0) {
    out->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);  // one symbol: nothing to merge
    return;
  }
  const bool use_cache = cache != nullptr && piece.size() <= kMaxCachedPieceBytes;
  uint64_t hash = 0;
  if (use_cache) {
    hash = HashBytes(piece);
    if (const auto ids = cache->Find(piece, hash)) {
      out->insert(out->end(), ids->begin(), ids->end());
      return;
    }
  }
  std::vector<int32_t>& symbols = scratch->symbols;
  symbols.clear();
  if (ignore_merges_) {
    // tokenizers' `ignore_merges`: a piece that is itself in the vocab is one token.
    if (byte_level_) {
      scratch->mapped = alphabet_.Encode(piece);
    } else {
      scratch->mapped.assign(piece);
    }
    const auto it = vocab_.find(scratch->mapped);
    if (it != vocab_.end()) {
      symbols.push_back(it->second);
    }
  }
  if (symbols.empty()) {
    InitialSymbols(piece, &symbols);
    ApplyMerges(&symbols, scratch);
  }
  out->insert(out->end(), symbols.begin(), symbols.end());
  if (use_cache) {
    cache->Insert(piece, hash, symbols);
  }
}

}  // namespace mlarun::detail
