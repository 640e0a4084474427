// Helpers the tokenizer tests share: reading files and the committed corpus
// (tests/tokenizer/testdata/corpus.jsonl, one JSON string per line, or {"base64": ...} for raw
// bytes that may be ill-formed UTF-8).
#ifndef MLARUN_TESTS_TOKENIZER_CORPUS_UTIL_H_
#define MLARUN_TESTS_TOKENIZER_CORPUS_UTIL_H_

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace mlarun::testing {

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read " + path.string());
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// The non-empty lines of `path`.
inline std::vector<std::string> ReadLines(const std::filesystem::path& path) {
  std::vector<std::string> lines;
  std::istringstream in(ReadFile(path));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) {
      lines.push_back(line);
    }
  }
  return lines;
}

inline std::string Base64Decode(std::string_view text) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    if (c == '=') {
      break;
    }
    const size_t value = kAlphabet.find(c);
    if (value == std::string_view::npos) {
      throw std::runtime_error("bad base64");
    }
    bits = (bits << 6) | static_cast<uint32_t>(value);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  return out;
}

struct CorpusLine {
  std::string text;
  bool raw_bytes = false;  // from {"base64": ...}; may be ill-formed UTF-8
};

inline std::vector<CorpusLine> ReadCorpus(const std::filesystem::path& path) {
  std::vector<CorpusLine> corpus;
  for (const std::string& line : ReadLines(path)) {
    const nlohmann::json value = nlohmann::json::parse(line);
    if (value.is_string()) {
      corpus.push_back({value.get<std::string>(), false});
    } else {
      corpus.push_back({Base64Decode(value.at("base64").get<std::string>()), true});
    }
  }
  return corpus;
}

}  // namespace mlarun::testing

#endif  // MLARUN_TESTS_TOKENIZER_CORPUS_UTIL_H_
