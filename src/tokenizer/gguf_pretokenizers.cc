// The llama.cpp BPE pre-tokenizers (src/llama-vocab.cpp: the names `llama_vocab::impl::load`
// accepts for tokenizer.ggml.pre, and the regexes of `llm_tokenizer_bpe`), as tokenizer.json
// Split regexes, and how a tokenizer.json's pre_tokenizer is matched to one of them.
#include "tokenizer/gguf_pretokenizers.h"

#include <optional>
#include <utility>

#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"  // kGpt2SplitPattern
#include "tokenizer/regex.h"

namespace mlarun::detail {
namespace {

// The pre-tokenizer regexes, spelled as in the models' own tokenizer.json files. llama.cpp
// (src/llama-vocab.cpp, `llm_tokenizer_bpe`) keeps that original spelling in a comment where it
// had to adapt a regex to its engine ("(?i:'s|...)" became "(?:'[sS]|...)"); PCRE2 takes the
// original, so the ids equal Hugging Face tokenizers'.

// LLAMA_VOCAB_PRE_TYPE_LLAMA3: "original regex from tokenizer.json" in llama-vocab.cpp, and the
// Split regex of meta-llama/Meta-Llama-3-8B's tokenizer.json.
constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// LLAMA_VOCAB_PRE_TYPE_QWEN2: "original regex from tokenizer.json" in llama-vocab.cpp (Llama 3's
// with single digits), the Split regex of Qwen2 / Qwen2.5's tokenizer.json.
constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// LLAMA_VOCAB_PRE_TYPE_GPT2 in llama-vocab.cpp: GPT-2's regex without the final "|\s+" of
// tokenizers' ByteLevel regex (`kGpt2SplitPattern`). Text that "\s+" alone would match stays an
// unmatched gap, which both keep as a piece of its own, so the two split alike.
constexpr std::string_view kLlamaCppGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM and _DEEPSEEK_CODER in llama-vocab.cpp. Written with escapes:
// the letter class holds U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126 and U+212A, which Unicode
// normalization would silently turn into other code points.
constexpr std::string_view kDeepSeekLlmLetters =
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293"
    "\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C"
    "\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5"
    "\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77"
    "\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59"
    "\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC"
    "\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107"
    "\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139"
    "\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE"
    "\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E"
    "\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F"
    "\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2"
    "\U000118A0-\U000118DF\U0001E900-\U0001E943]+";
constexpr std::string_view kDeepSeekLlmPunctuation =
    "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+";
constexpr std::string_view kDeepSeekLlmCjk = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";
// LLAMA_VOCAB_PRE_TYPE_DEEPSEEK3_LLM in llama-vocab.cpp, which are deepseek-ai/DeepSeek-V3's
// tokenizer.json Split regexes to the byte (with CR and LF as characters, not escapes).
constexpr std::string_view kDeepSeekV3Patterns[] = {
    "\\p{N}{1,3}",
    "[\u4E00-\u9FA5\u3040-\u309F\u30A0-\u30FF]+",
    "[!\"#$%&'()*+,\\-./"
    ":;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};

// llama.cpp's other names for the same regexes (llama-vocab.cpp), and "gpt2", the model key's
// spelling, which llama.cpp itself does not take as a pre-tokenizer name.
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"llama3", "llama-bpe"},
    {"llama-v3", "llama-bpe"},
    {"deepseek-r1-qwen", "qwen2"},
    {"gpt2", "gpt-2"},
};

// `patterns` spelled alike where they mean the same: a tab, line feed or carriage return as the
// escape rather than the character (DeepSeek-V3's file has the characters, mlarun's trainer the
// escapes), and llama.cpp's GPT-2 regex as tokenizers' (the two split alike).
std::vector<std::string> Normalized(std::vector<std::string> patterns) {
  for (std::string& pattern : patterns) {
    if (pattern == kLlamaCppGpt2Pattern) {
      pattern = kGpt2SplitPattern;
    }
    std::string out;
    size_t backslashes = 0;  // run of backslashes just before: odd means the character is escaped
    for (const char c : pattern) {
      const bool escaped = backslashes % 2 == 1;
      if (!escaped && (c == '\t' || c == '\n' || c == '\r')) {
        out += c == '\t' ? "\\t" : c == '\n' ? "\\n" : "\\r";
      } else {
        out += c;
      }
      backslashes = c == '\\' ? backslashes + 1 : 0;
    }
    pattern = std::move(out);
  }
  return patterns;
}

std::vector<std::string> DefPatterns(const GgufPreTokenizer& def) {
  return def.byte_level_regex ? std::vector<std::string>{std::string(kGpt2SplitPattern)}
                              : Normalized(def.patterns);
}

// True when some merge joins two parts that are all digits (category N), so splitting digits one
// by one and in runs gives different ids.
bool MergesJoinDigits(const std::vector<std::string>& merges) {
  const ByteLevelAlphabet alphabet;
  const Regex digits(R"(\p{N}+)", "digit check");
  RegexScratch scratch;
  auto all_digits = [&](std::string_view token) {
    const std::optional<std::string> text = alphabet.Decode(token);
    bool whole = false;
    if (text && !text->empty()) {
      digits.ForEachMatch(*text, &scratch, [&](size_t begin, size_t end) {
        whole = whole || (begin == 0 && end == text->size());
      });
    }
    return whole;
  };
  for (const std::string& merge : merges) {
    const size_t space = merge.find(' ', 1);
    if (space != std::string::npos && all_digits(std::string_view(merge).substr(0, space)) &&
        all_digits(std::string_view(merge).substr(space + 1))) {
      return true;
    }
  }
  return false;
}

}  // namespace

const std::vector<GgufPreTokenizer>& GgufPreTokenizers() {
  static const auto* defs = new std::vector<GgufPreTokenizer>{
      // LLAMA_VOCAB_PRE_TYPE_DEFAULT: llama.cpp's regexes (no model's tokenizer.json has them).
      {.name = "default",
       .patterns = {R"([\p{P}\$\+<=>\^~\|]+)", std::string(kLlamaCppGpt2Pattern), R"(\p{N}+)",
                    "[0-9][0-9][0-9]"}},
      {.name = "gpt-2", .byte_level_regex = true},
      {.name = "llama-bpe",
       .patterns = {std::string(kLlama3Pattern)},
       .ignore_merges = true,
       .add_bos = true},
      // Digits are the last step: tokenizers' Digits pre-tokenizer in the models' files.
      {.name = "deepseek-llm",
       .patterns = {"[\r\n]", std::string(kDeepSeekLlmLetters),
                    std::string(kDeepSeekLlmPunctuation), R"(\s+$)", std::string(kDeepSeekLlmCjk),
                    R"(\p{N}+)"}},
      {.name = "deepseek-coder",
       .patterns = {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", std::string(kDeepSeekLlmCjk),
                    R"(\p{N})"}},
      {.name = "deepseek-v3",
       .patterns = {std::string(kDeepSeekV3Patterns[0]), std::string(kDeepSeekV3Patterns[1]),
                    std::string(kDeepSeekV3Patterns[2])}},
      {.name = "qwen2", .patterns = {std::string(kQwen2Pattern)}},
  };
  return *defs;
}

const GgufPreTokenizer* FindGgufPreTokenizer(std::string_view name) {
  for (const auto& [alias, canonical] : kAliases) {
    if (name == alias) {
      name = canonical;
    }
  }
  for (const GgufPreTokenizer& def : GgufPreTokenizers()) {
    if (def.name == name) {
      return &def;
    }
  }
  return nullptr;
}

std::vector<std::string_view> GgufPreTokenizerNames() {
  std::vector<std::string_view> names;
  for (const GgufPreTokenizer& pre : GgufPreTokenizers()) {
    names.push_back(pre.name);
  }
  for (const auto& [alias, canonical] : kAliases) {
    names.push_back(alias);
  }
  return names;
}

const GgufPreTokenizer* MatchGgufPreTokenizer(std::vector<std::string> patterns,
                                              const std::vector<std::string>& merges,
                                              std::string* difference) {
  patterns = Normalized(std::move(patterns));
  for (const GgufPreTokenizer& pre : GgufPreTokenizers()) {
    if (patterns == DefPatterns(pre)) {
      return &pre;
    }
  }
  // deepseek-llm's own tokenizer.json splits digits one by one (Digits individual_digits) where
  // llama.cpp splits runs; the ids agree as long as no merge joins digits.
  const GgufPreTokenizer* deepseek_llm = FindGgufPreTokenizer("deepseek-llm");
  std::vector<std::string> single_digits = DefPatterns(*deepseek_llm);
  single_digits.back() = R"(\p{N})";
  if (patterns != single_digits) {
    return nullptr;
  }
  if (MergesJoinDigits(merges)) {
    *difference =
        "pre_tokenizer: digits are split one by one, but llama.cpp's 'deepseek-llm' splits digit "
        "runs and some merges join digits";
  }
  return deepseek_llm;
}

}  // namespace mlarun::detail
