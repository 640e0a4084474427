// Declares `Normalizer`, the supported subset of tokenizers' normalizers (a flattened Sequence of
// Replace and Prepend), applied to plain text between added tokens.
#ifndef MLARUN_TOKENIZER_NORMALIZER_H_
#define MLARUN_TOKENIZER_NORMALIZER_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/tokenizer_spec.h"

namespace mlarun::detail {

class Normalizer {
 public:
  Normalizer() = default;
  explicit Normalizer(const std::vector<NormalizerSpec>& specs);

  // True when normalization is the identity (no normalizer, or an empty Sequence).
  bool IsIdentity() const { return steps_.empty(); }

  // Returns `text` after every step, in order.
  std::string Apply(std::string_view text, RegexScratch* scratch) const;

 private:
  struct Step {
    NormalizerSpec spec;
    std::optional<Regex> regex;  // kReplace with a regex pattern
  };
  std::vector<Step> steps_;
};

}  // namespace mlarun::detail

#endif  // MLARUN_TOKENIZER_NORMALIZER_H_
