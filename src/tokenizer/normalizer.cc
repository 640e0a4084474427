// Implements the Replace (every non-overlapping match) and Prepend (only to non-empty text)
// normalizers with the semantics of tokenizers' normalizers/replace.rs and prepend.rs.
#include "tokenizer/normalizer.h"

namespace mlarun::detail {

Normalizer::Normalizer(const std::vector<NormalizerSpec>& specs) {
  for (const NormalizerSpec& spec : specs) {
    Step step{spec, std::nullopt};
    if (spec.kind == NormalizerSpec::Kind::kReplace && spec.is_regex) {
      step.regex.emplace(spec.pattern, spec.where);
    }
    steps_.push_back(std::move(step));
  }
}

std::string Normalizer::Apply(std::string_view text, RegexScratch* scratch) const {
  std::string current(text);
  for (const Step& step : steps_) {
    if (step.spec.kind == NormalizerSpec::Kind::kPrepend) {
      if (!current.empty()) {
        current.insert(0, step.spec.content);
      }
      continue;
    }
    std::string replaced;
    size_t copied = 0;
    auto replace = [&](size_t start, size_t end) {
      replaced.append(current, copied, start - copied);
      replaced.append(step.spec.content);
      copied = end;
    };
    if (step.regex) {
      step.regex->ForEachMatch(current, scratch, replace);
    } else if (!step.spec.pattern.empty()) {
      for (size_t at = current.find(step.spec.pattern); at != std::string::npos;
           at = current.find(step.spec.pattern, at + step.spec.pattern.size())) {
        replace(at, at + step.spec.pattern.size());
      }
    }
    replaced.append(current, copied, std::string::npos);
    current = std::move(replaced);
  }
  return current;
}

}  // namespace mlarun::detail
