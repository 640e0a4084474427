// Compiles tokenizer.json regexes with PCRE2 (UTF, UCP, MATCH_INVALID_UTF, JIT) and finds matches.
// MATCH_INVALID_UTF makes ill-formed bytes unmatchable instead of an error, so any byte string is
// safe to split.
#include "tokenizer/regex.h"

#include <utility>

#include "tokenizer/tokenizer_error.h"
#include "tokenizer/utf8.h"

namespace mlarun::detail {
namespace {

constexpr size_t kInitialJitStackBytes = size_t{1} << 20;
constexpr size_t kMaxJitStackBytes = size_t{256} << 20;

std::string Pcre2ErrorMessage(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) {
    return "unknown PCRE2 error";
  }
  return std::string(reinterpret_cast<const char*>(buffer));
}

}  // namespace

RegexScratch::RegexScratch()
    : match_data_(pcre2_match_data_create(1, nullptr)),
      match_context_(pcre2_match_context_create(nullptr)) {
  if (match_data_ == nullptr || match_context_ == nullptr) {
    throw std::bad_alloc();
  }
}

RegexScratch::~RegexScratch() {
  pcre2_match_data_free(match_data_);
  pcre2_match_context_free(match_context_);
  pcre2_jit_stack_free(jit_stack_);
}

bool RegexScratch::GrowJitStack() {
  const size_t bytes = jit_stack_bytes_ == 0 ? kInitialJitStackBytes : jit_stack_bytes_ * 4;
  if (bytes > kMaxJitStackBytes) {
    return false;
  }
  pcre2_jit_stack* grown = pcre2_jit_stack_create(size_t{32} * 1024, bytes, nullptr);
  if (grown == nullptr) {
    return false;
  }
  pcre2_jit_stack_assign(match_context_, nullptr, grown);
  pcre2_jit_stack_free(jit_stack_);
  jit_stack_ = grown;
  jit_stack_bytes_ = bytes;
  return true;
}

std::string TranslateOnigurumaPattern(std::string_view pattern) {
  // Oniguruma's Unicode classes (doc/RE): \s is U+0009-000D, U+0085 and General_Category Z;
  // \w is Letter, Mark, Decimal_Number and Connector_Punctuation.
  constexpr std::string_view kSpaceMembers = "\\t-\\r\\x{85}\\p{Z}";
  constexpr std::string_view kWordMembers = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";
  std::string out;
  out.reserve(pattern.size() + 16);
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      const bool is_space = next == 's' || next == 'S';
      if (is_space || next == 'w' || next == 'W') {
        const std::string_view members = is_space ? kSpaceMembers : kWordMembers;
        const bool negated = next == 'S' || next == 'W';
        if (!in_class) {
          out.append(negated ? "[^" : "[").append(members).append("]");
          continue;
        }
        if (!negated) {
          out.append(members);
          continue;
        }
        // A negated class inside a class has no PCRE2 spelling; keep PCRE2's own meaning.
      }
      out += c;
      out += next;
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') {
        out += pattern[++i];
      }
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') {
        out += pattern[++i];
      }
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const size_t close = pattern.find(":]", i + 2);  // POSIX class such as [:alpha:]
      if (close != std::string_view::npos) {
        out.append(pattern.substr(i + 1, close + 2 - (i + 1)));
        i = close + 1;
      }
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

Regex::Regex(std::string_view pattern, const std::string& where) : where_(where) {
  const std::string translated = TranslateOnigurumaPattern(pattern);
  // MULTILINE: in Oniguruma's default (Ruby) syntax '^' and '$' are line anchors (doc/RE).
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_MULTILINE;
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), options,
                        &error_code, &error_offset, nullptr);
  if (code_ == nullptr) {
    throw TokenizerError(where + ": invalid regex at offset " + std::to_string(error_offset) +
                         ": " + Pcre2ErrorMessage(error_code));
  }
  jit_ = pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(code_); }

Regex::Regex(Regex&& other) noexcept
    : code_(std::exchange(other.code_, nullptr)),
      jit_(other.jit_),
      where_(std::move(other.where_)) {}

Regex& Regex::operator=(Regex&& other) noexcept {
  if (this != &other) {
    pcre2_code_free(code_);
    code_ = std::exchange(other.code_, nullptr);
    jit_ = other.jit_;
    where_ = std::move(other.where_);
  }
  return *this;
}

bool Regex::Find(std::string_view subject, size_t from, RegexScratch* scratch, size_t* start,
                 size_t* end) const {
  const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
  for (;;) {
    const int rc = jit_ ? pcre2_jit_match(code_, data, subject.size(), from, 0,
                                          scratch->match_data(), scratch->match_context())
                        : pcre2_match(code_, data, subject.size(), from, 0, scratch->match_data(),
                                      scratch->match_context());
    if (rc >= 0) {  // 0 means "ovector too small", which still holds the whole-match offsets
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch->match_data());
      *start = ovector[0];
      *end = ovector[1];
      return true;
    }
    if (rc == PCRE2_ERROR_NOMATCH) {
      return false;
    }
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && scratch->GrowJitStack()) {
      continue;
    }
    throw TokenizerError(where_ + ": regex match failed: " + Pcre2ErrorMessage(rc));
  }
}

size_t Regex::NextCharLength(std::string_view subject, size_t pos) {
  if (pos >= subject.size()) {
    return 1;
  }
  return static_cast<size_t>(DecodeUtf8At(subject, pos).length);
}

}  // namespace mlarun::detail
