// Implements pre-tokenization. Each rule runs on each piece the previous rule produced, so a
// regex never sees past its piece (lookaheads included), as in tokenizers' `PreTokenizedString`.
#include "tokenizer/pretokenizer.h"

#include <algorithm>

namespace mlarun::detail {

PreTokenizer::PreTokenizer(const std::vector<SplitSpec>& splits, const ByteLevelSpec& byte_level) {
  for (const SplitSpec& split : splits) {
    Rule rule;
    if (split.is_regex) {
      rule.regex.emplace(split.pattern, split.where);
    } else {
      rule.literal = split.pattern;
    }
    rule.behavior = split.behavior;
    rule.invert = split.invert;
    rules_.push_back(std::move(rule));
  }
  byte_level_rule_ = rules_.size();
  byte_level_ = byte_level.present;
  add_prefix_space_ = byte_level.present && byte_level.add_prefix_space;
  if (byte_level.present && byte_level.use_regex) {
    Rule rule;
    rule.regex.emplace(kGpt2SplitPattern, "ByteLevel pre-tokenizer regex");
    rules_.push_back(std::move(rule));
  }
}

void PreTokenizer::Split(std::string_view text, PreTokenizerScratch* scratch,
                         std::vector<std::string_view>* pieces) const {
  if (scratch->spans_by_rule.size() < rules_.size()) {
    scratch->spans_by_rule.resize(rules_.size());
  }
  if (!text.empty()) {
    SplitFrom(0, text, scratch, pieces);
  }
}

void PreTokenizer::SplitFrom(size_t rule, std::string_view piece, PreTokenizerScratch* scratch,
                             std::vector<std::string_view>* pieces) const {
  if (rule == byte_level_rule_ && add_prefix_space_ && piece.front() != ' ') {
    std::string& prefixed = scratch->owned.emplace_back();
    prefixed.reserve(piece.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(piece);
    piece = prefixed;
  }
  if (rule == rules_.size()) {
    pieces->push_back(piece);
    return;
  }
  const Rule& current = rules_[rule];
  if (current.regex && current.behavior == SplitBehavior::kIsolated && !current.invert) {
    // Fast path for the common case: every match and every gap is a piece. Recursing from the
    // callback is safe because the iteration keeps its own offsets.
    size_t previous = 0;
    current.regex->ForEachMatch(piece, &scratch->regex, [&](size_t start, size_t end) {
      if (previous < start) {
        SplitFrom(rule + 1, piece.substr(previous, start - previous), scratch, pieces);
      }
      if (start < end) {
        SplitFrom(rule + 1, piece.substr(start, end - start), scratch, pieces);
      }
      previous = end;
    });
    if (previous < piece.size()) {
      SplitFrom(rule + 1, piece.substr(previous), scratch, pieces);
    }
    return;
  }
  std::vector<PreTokenizerScratch::Span>& spans = scratch->spans_by_rule[rule];
  FindSpans(rule, piece, scratch, &spans);
  // Apply the delimiter behaviour (tokenizers' `NormalizedString::split`); `is_match` then means
  // "remove this span".
  std::vector<PreTokenizerScratch::Span> merged;
  switch (current.behavior) {
    case SplitBehavior::kRemoved:
      merged = spans;
      break;
    case SplitBehavior::kIsolated:
      for (const auto& span : spans) {
        merged.push_back({span.begin, span.end, false});
      }
      break;
    case SplitBehavior::kContiguous: {
      bool previous_match = false;
      for (const auto& span : spans) {
        if (span.is_match == previous_match && !merged.empty()) {
          merged.back().end = span.end;
        } else {
          merged.push_back({span.begin, span.end, false});
        }
        previous_match = span.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const auto& span : spans) {
        if (span.is_match && !previous_match && !merged.empty()) {
          merged.back().end = span.end;
        } else {
          merged.push_back({span.begin, span.end, false});
        }
        previous_match = span.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->is_match && !previous_match && !merged.empty()) {
          merged.back().begin = it->begin;
        } else {
          merged.push_back({it->begin, it->end, false});
        }
        previous_match = it->is_match;
      }
      std::reverse(merged.begin(), merged.end());
      break;
    }
  }
  for (const auto& span : merged) {
    if (!span.is_match && span.begin < span.end) {
      SplitFrom(rule + 1, piece.substr(span.begin, span.end - span.begin), scratch, pieces);
    }
  }
}

void PreTokenizer::FindSpans(size_t rule, std::string_view piece, PreTokenizerScratch* scratch,
                             std::vector<PreTokenizerScratch::Span>* spans) const {
  const Rule& current = rules_[rule];
  spans->clear();
  size_t previous = 0;
  auto on_match = [&](size_t start, size_t end) {
    if (previous < start) {
      spans->push_back({previous, start, false});
    }
    spans->push_back({start, end, true});
    previous = end;
  };
  if (current.regex) {
    current.regex->ForEachMatch(piece, &scratch->regex, on_match);
  } else if (!current.literal.empty()) {
    for (size_t at = piece.find(current.literal); at != std::string_view::npos;
         at = piece.find(current.literal, at + current.literal.size())) {
      on_match(at, at + current.literal.size());
    }
  }
  if (previous < piece.size()) {
    spans->push_back({previous, piece.size(), false});
  }
  if (current.invert) {
    for (auto& span : *spans) {
      span.is_match = !span.is_match;
    }
  }
}

}  // namespace mlarun::detail
