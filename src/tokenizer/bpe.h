// Declares `BpeModel`, the byte-pair-encoding model of a tokenizer.json (vocab + ranked merges),
// and `BpeCache`, the bounded piece -> ids cache that makes repeated words cheap.
#ifndef MLARUN_TOKENIZER_BPE_H_
#define MLARUN_TOKENIZER_BPE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer_spec.h"

namespace mlarun::detail {

// Returns a 64-bit hash of `bytes` (multiply-xorshift over 8-byte words; not cryptographic).
uint64_t HashBytes(std::string_view bytes);

// Maps a piece (raw bytes) to its token ids. Bounded: it empties itself when full. Not
// thread-safe; the owner serializes access.
class BpeCache {
 public:
  explicit BpeCache(size_t max_entries = size_t{1} << 16);

  // Returns the cached ids of `piece`, or nullopt. The span is valid until the next `Insert`.
  std::optional<std::span<const int32_t>> Find(std::string_view piece, uint64_t hash) const;
  void Insert(std::string_view piece, uint64_t hash, std::span<const int32_t> ids);
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t key_length = 0;  // 0 marks an empty slot (empty pieces are never cached)
    uint32_t ids_offset = 0;
    uint32_t ids_length = 0;
  };
  void Clear();

  std::vector<Slot> slots_;  // open addressing, linear probing; size is a power of two
  size_t max_entries_;
  size_t size_ = 0;
  std::string keys_;          // concatenated piece bytes
  std::vector<int32_t> ids_;  // concatenated ids
};

// Per-call buffers for `BpeModel::Tokenize`.
struct BpeScratch {
  std::vector<int32_t> symbols;
  std::vector<int32_t> ranks;
  std::vector<int32_t> prev;
  std::vector<int32_t> next;
  struct HeapEntry {
    int32_t rank;
    int32_t pos;
    int32_t left;  // ids the pair had when pushed; a stale entry no longer matches
    int32_t right;
  };
  std::vector<HeapEntry> heap;
  std::string mapped;  // byte-level text for the `ignore_merges` lookup
};

// How `ApplyMerges` finds the next pair; both give identical results (tested).
enum class MergeStrategy { kAuto, kScan, kHeap };

class BpeModel {
 public:
  // Builds the vocab and merge table. `byte_level` says pieces arrive as raw bytes that the vocab
  // spells in the GPT-2 byte alphabet. Throws `TokenizerError` naming `source` for unknown tokens
  // in merges, duplicate ids and a missing unk token.
  BpeModel(const BpeSpec& spec, bool byte_level, const ByteLevelAlphabet& alphabet,
           const std::string& source);

  // Appends the ids of `piece` to `out`, consulting and filling `cache` when it is non-null.
  void Tokenize(std::string_view piece, BpeCache* cache, BpeScratch* scratch,
                std::vector<int32_t>* out) const;

  // Merges `symbols` in place by rank (lowest rank first, leftmost on ties), as tokenizers'
  // `Word::merge_all` does without dropout.
  void ApplyMerges(std::vector<int32_t>* symbols, BpeScratch* scratch,
                   MergeStrategy strategy = MergeStrategy::kAuto) const;

  // Returns the id of `token` as written in the vocab, or nullopt.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The number of ids the vocab spans (largest id + 1).
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }
  // The vocab string of `id` ("" for an id that is not in the vocab).
  const std::string& IdToToken(int32_t id) const { return id_to_token_[id]; }
  bool HasId(int32_t id) const { return id >= 0 && id < id_limit() && has_id_[id]; }

 private:
  struct MergeSlot {
    uint64_t key = ~uint64_t{0};  // (left << 32) | right; all ones marks an empty slot
    int32_t rank = 0;
    int32_t merged = 0;
  };
  const MergeSlot* FindMerge(int32_t left, int32_t right) const;
  void InsertMerge(int32_t left, int32_t right, int32_t rank, int32_t merged);
  void InitialSymbols(std::string_view piece, std::vector<int32_t>* symbols) const;
  void MergeByScan(std::vector<int32_t>* symbols, BpeScratch* scratch) const;
  void MergeByHeap(std::vector<int32_t>* symbols, BpeScratch* scratch) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> has_id_;
  std::vector<MergeSlot> merges_;  // open addressing, linear probing; size is a power of two
  int merge_shift_ = 64;
  std::array<int32_t, 256> byte_ids_{};      // byte-level: id of each byte's token, -1 if none
  std::array<int32_t, 256> fallback_ids_{};  // byte_fallback: id of "<0xXX>", -1 if none
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  int32_t unk_id_ = -1;
  ByteLevelAlphabet alphabet_;
};

}  // namespace mlarun::detail

#endif  // MLARUN_TOKENIZER_BPE_H_
