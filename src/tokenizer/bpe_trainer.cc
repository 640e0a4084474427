// Implements the BPE trainer: count pre-tokenized pieces, then repeatedly merge the most frequent
// adjacent pair, keeping pair counts up to date only for the words a merge touches (the classic
// algorithm of Sennrich et al. 2016, "Neural Machine Translation of Rare Words with Subword
// Units").
#include "tokenizer/bpe_trainer.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <set>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_error.h"

namespace mlarun {
namespace {

using OrderedJson = nlohmann::ordered_json;

struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
}

struct Candidate {
  int64_t count;
  int32_t left;
  int32_t right;
  // Highest count first; on ties the smaller (left, right).
  bool operator<(const Candidate& other) const {
    if (count != other.count) {
      return count < other.count;
    }
    if (left != other.left) {
      return left > other.left;
    }
    return right > other.right;
  }
};

// Returns the pieces of `corpus` with their counts, special tokens split out (never learned).
std::vector<Word> CountWords(std::string_view corpus, std::span<const std::string> special_tokens) {
  std::vector<detail::AddedTokenSpec> specials;
  for (const std::string& token : special_tokens) {
    specials.push_back({.content = token, .id = 0});
  }
  const detail::AddedTokenMatcher matcher(specials);
  std::vector<detail::SplitSpec> splits;
  for (const std::string_view pattern : detail::kDeepSeekSplitPatterns) {
    splits.push_back({.pattern = std::string(pattern), .where = "BPE trainer split regex"});
  }
  const detail::PreTokenizer pretokenizer(splits, {.present = true});
  detail::PreTokenizerScratch scratch;
  std::vector<detail::TextSegment> segments;
  matcher.Split(corpus, &scratch.regex, &segments);
  std::map<std::string, int64_t, std::less<>> counts;  // ordered, so word order is deterministic
  std::vector<std::string_view> pieces;
  for (const detail::TextSegment& segment : segments) {
    if (segment.token_id >= 0) {
      continue;
    }
    pieces.clear();
    pretokenizer.Split(corpus.substr(segment.begin, segment.end - segment.begin), &scratch,
                       &pieces);
    for (const std::string_view piece : pieces) {
      ++counts[std::string(piece)];
    }
  }
  std::vector<Word> words;
  words.reserve(counts.size());
  for (const auto& [piece, count] : counts) {
    Word word;
    word.count = count;
    for (const char c : piece) {
      word.symbols.push_back(static_cast<uint8_t>(c));
    }
    words.push_back(std::move(word));
  }
  return words;
}

// The trainer's state: words, pair counts, which words hold a pair, and a lazy max-heap.
class Trainer {
 public:
  explicit Trainer(std::vector<Word> words) : words_(std::move(words)) {
    for (int byte = 0; byte < 256; ++byte) {
      token_bytes_.emplace_back(1, static_cast<char>(byte));
    }
    for (size_t w = 0; w < words_.size(); ++w) {
      AddPairs(w, +1);
    }
    for (const auto& [key, count] : pair_counts_) {
      Push(key);
    }
  }

  // Learns tokens until there are `target` of them; returns the merges as (left, right) ids.
  std::vector<std::pair<int32_t, int32_t>> Learn(size_t target,
                                                 std::span<const std::string> special_tokens) {
    std::set<std::string, std::less<>> banned(special_tokens.begin(), special_tokens.end());
    std::vector<std::pair<int32_t, int32_t>> merges;
    while (token_bytes_.size() < target) {
      if (heap_.empty()) {
        throw TokenizerError("TrainByteLevelBpeJson: the corpus has no pair left to merge after " +
                             std::to_string(token_bytes_.size()) + " tokens; vocab_size asks for " +
                             std::to_string(target) + " (use a larger corpus)");
      }
      const Candidate top = heap_.top();
      heap_.pop();
      const uint64_t key = PairKey(top.left, top.right);
      const auto it = pair_counts_.find(key);
      if (it == pair_counts_.end() || it->second != top.count || top.count <= 0) {
        continue;  // stale
      }
      const std::string merged_bytes = token_bytes_[top.left] + token_bytes_[top.right];
      if (banned.count(merged_bytes) != 0) {
        pair_counts_.erase(it);  // would collide with a special token's text
        continue;
      }
      int32_t merged = 0;
      if (const auto known = token_ids_.find(merged_bytes); known != token_ids_.end()) {
        merged = known->second;  // same bytes reached through another split: reuse the token
      } else {
        merged = static_cast<int32_t>(token_bytes_.size());
        token_bytes_.push_back(merged_bytes);
        token_ids_.emplace(merged_bytes, merged);
      }
      merges.emplace_back(top.left, top.right);
      ApplyMerge(top.left, top.right, merged);
    }
    return merges;
  }

  const std::vector<std::string>& token_bytes() const { return token_bytes_; }

 private:
  void AddPairs(size_t w, int sign) {
    const Word& word = words_[w];
    for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
      const uint64_t key = PairKey(word.symbols[i], word.symbols[i + 1]);
      pair_counts_[key] += sign * word.count;
      if (sign > 0) {
        pair_words_[key].push_back(static_cast<int32_t>(w));
      }
    }
  }

  void Push(uint64_t key) {
    const int64_t count = pair_counts_[key];
    if (count > 0) {
      heap_.push({count, static_cast<int32_t>(key >> 32), static_cast<int32_t>(key & 0xFFFFFFFF)});
    }
  }

  void ApplyMerge(int32_t left, int32_t right, int32_t merged) {
    const uint64_t key = PairKey(left, right);
    std::vector<int32_t> holders = std::move(pair_words_[key]);
    pair_words_.erase(key);
    std::sort(holders.begin(), holders.end());
    holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
    std::vector<uint64_t> touched;
    const int32_t pair[2] = {left, right};
    for (const int32_t w : holders) {
      std::vector<int32_t>& symbols = words_[w].symbols;
      if (std::search(symbols.begin(), symbols.end(), std::begin(pair), std::end(pair)) ==
          symbols.end()) {
        continue;  // a stale holder: an earlier merge already consumed the pair here
      }
      AddPairs(w, -1);
      std::vector<int32_t> rewritten;
      rewritten.reserve(symbols.size());
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          rewritten.push_back(merged);
          ++i;
        } else {
          rewritten.push_back(symbols[i]);
        }
      }
      symbols = std::move(rewritten);
      AddPairs(w, +1);
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        touched.push_back(PairKey(symbols[i], symbols[i + 1]));
      }
    }
    pair_counts_.erase(key);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (const uint64_t touched_key : touched) {
      Push(touched_key);
    }
  }

  std::vector<Word> words_;
  std::vector<std::string> token_bytes_;                // id -> bytes
  std::unordered_map<std::string, int32_t> token_ids_;  // learned bytes -> id
  std::unordered_map<uint64_t, int64_t> pair_counts_;
  std::unordered_map<uint64_t, std::vector<int32_t>> pair_words_;  // may hold stale word indices
  std::priority_queue<Candidate> heap_;
};

OrderedJson AddedTokenJson(int32_t id, const std::string& content) {
  return OrderedJson{{"id", id},        {"content", content}, {"single_word", false},
                     {"lstrip", false}, {"rstrip", false},    {"normalized", false},
                     {"special", true}};
}

}  // namespace

std::string TrainByteLevelBpeJson(std::string_view corpus, int vocab_size,
                                  std::span<const std::string> special_tokens) {
  const auto n_special = static_cast<int>(special_tokens.size());
  if (vocab_size < 256 + n_special) {
    throw TokenizerError("TrainByteLevelBpeJson: vocab_size " + std::to_string(vocab_size) +
                         " is smaller than 256 byte tokens + " + std::to_string(n_special) +
                         " special tokens");
  }
  std::set<std::string, std::less<>> seen;
  for (const std::string& token : special_tokens) {
    if (token.empty() || !seen.insert(token).second) {
      throw TokenizerError("TrainByteLevelBpeJson: special token '" + token +
                           "' is empty or repeated");
    }
  }
  Trainer trainer(CountWords(corpus, special_tokens));
  const auto merges = trainer.Learn(static_cast<size_t>(vocab_size - n_special), special_tokens);
  const std::vector<std::string>& token_bytes = trainer.token_bytes();

  const detail::ByteLevelAlphabet alphabet;
  OrderedJson vocab = OrderedJson::object();
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    vocab[alphabet.Encode(token_bytes[id])] = id;
  }
  OrderedJson merge_list = OrderedJson::array();
  for (const auto& [left, right] : merges) {
    merge_list.push_back({alphabet.Encode(token_bytes[left]), alphabet.Encode(token_bytes[right])});
  }
  OrderedJson added = OrderedJson::array();
  for (int i = 0; i < n_special; ++i) {
    added.push_back(
        AddedTokenJson(static_cast<int32_t>(token_bytes.size()) + i, special_tokens[i]));
  }
  OrderedJson pretokenizers = OrderedJson::array();
  for (const std::string_view pattern : detail::kDeepSeekSplitPatterns) {
    pretokenizers.push_back({{"type", "Split"},
                             {"pattern", {{"Regex", pattern}}},
                             {"behavior", "Isolated"},
                             {"invert", false}});
  }
  pretokenizers.push_back({{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", true},
                           {"use_regex", false}});
  const OrderedJson byte_level = {{"type", "ByteLevel"},
                                  {"add_prefix_space", true},
                                  {"trim_offsets", true},
                                  {"use_regex", true}};
  OrderedJson root = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", pretokenizers}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merge_list}}},
  };
  return root.dump(1);
}

std::string MakeTokenizerConfigJson(std::string_view bos_token, std::string_view eos_token,
                                    ChatFormat format) {
  const OrderedJson config = {
      {"add_bos_token", true},
      {"add_eos_token", false},
      {"bos_token", bos_token},
      {"eos_token", eos_token},
      {"pad_token", eos_token},
      {"clean_up_tokenization_spaces", false},
      {"model_max_length", 131072},
      {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"chat_template", ChatTemplateSource(format)},
  };
  return config.dump(2);
}

}  // namespace mlarun
