// Declares `Regex`, a PCRE2 (UTF + UCP, JIT-compiled) pattern that iterates over matches the way
// Hugging Face tokenizers' Oniguruma-based `SysRegex` does, and the per-call `RegexScratch`.
#ifndef MLARUN_TOKENIZER_REGEX_H_
#define MLARUN_TOKENIZER_REGEX_H_

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace mlarun::detail {

// Per-thread matching state (match data, and a JIT stack grown on demand). Not thread-safe; create
// one per `Encode` call.
class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;

  pcre2_match_data* match_data() { return match_data_; }
  pcre2_match_context* match_context() { return match_context_; }
  // Replaces the JIT stack by a larger one; returns false when it cannot grow any further.
  bool GrowJitStack();

 private:
  pcre2_match_data* match_data_ = nullptr;
  pcre2_match_context* match_context_ = nullptr;
  pcre2_jit_stack* jit_stack_ = nullptr;
  size_t jit_stack_bytes_ = 0;
};

// Rewrites the shorthand classes whose Unicode meaning differs between Oniguruma (which Hugging
// Face tokenizers uses) and PCRE2 with UCP: Oniguruma's \s adds U+0085 and lacks U+180E, and its
// \w adds marks and connector punctuation but not letter-like numbers (Oniguruma doc/RE;
// pcre2pattern(3) "Generic character types"). `\s`, `\S`, `\w`, `\W` become explicit property
// classes; a negated one inside a class keeps PCRE2's meaning.
std::string TranslateOnigurumaPattern(std::string_view pattern);

// A compiled regular expression. Thread-safe for matching (all mutable state is in the scratch).
class Regex {
 public:
  // Compiles `pattern` (Oniguruma syntax as used in tokenizer.json). Throws `TokenizerError`
  // naming `where` if PCRE2 rejects it.
  Regex(std::string_view pattern, const std::string& where);
  ~Regex();
  Regex(Regex&& other) noexcept;
  Regex& operator=(Regex&& other) noexcept;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls `on_match(start, end)` for each match in `subject`, left to right, as Oniguruma's
  // `find_iter` (onig crate) does: after an empty match that ends where the previous match ended,
  // the search resumes one character later. Offsets are byte offsets into `subject`.
  template <typename OnMatch>
  void ForEachMatch(std::string_view subject, RegexScratch* scratch, OnMatch&& on_match) const {
    size_t search_from = 0;
    size_t last_end = std::string_view::npos;
    size_t start = 0;
    size_t end = 0;
    while (search_from <= subject.size() && Find(subject, search_from, scratch, &start, &end)) {
      if (start == end && end == last_end) {
        search_from += NextCharLength(subject, search_from);
        continue;
      }
      on_match(start, end);
      search_from = end;
      last_end = end;
    }
  }

 private:
  // Finds the first match at or after `from`; returns false if there is none.
  bool Find(std::string_view subject, size_t from, RegexScratch* scratch, size_t* start,
            size_t* end) const;
  static size_t NextCharLength(std::string_view subject, size_t pos);

  pcre2_code* code_ = nullptr;
  bool jit_ = false;
  std::string where_;  // for error messages
};

}  // namespace mlarun::detail

#endif  // MLARUN_TOKENIZER_REGEX_H_
