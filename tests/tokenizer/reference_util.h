// Helpers of the end-to-end tokenizer tests (tokenizer_reference_test): the MLARUN_* variables
// that tests/tokenizer/reference_e2e.sh sets, running the Node reference scripts of
// tools/tokenizer_ref, and comparing mlarun's ids on the corpus with Hugging Face tokenizers'.
#ifndef MLARUN_TESTS_TOKENIZER_REFERENCE_UTIL_H_
#define MLARUN_TESTS_TOKENIZER_REFERENCE_UTIL_H_

#include <gtest/gtest.h>
#include <sys/wait.h>  // WIFEXITED, WEXITSTATUS

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/corpus_util.h"
#include "tokenizer/tokenizer.h"

namespace mlarun::testing {

// Returns a required environment variable; the driver script sets all of them.
inline std::string RequireEnv(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    throw std::runtime_error(std::string(name) +
                             " is not set: run this test through `ctest -R TokenizerReferenceE2E`");
  }
  return value;
}

inline void WriteFile(const std::filesystem::path& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
  if (!out) {
    throw std::runtime_error("cannot write " + path.string());
  }
}

inline std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) {
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return quoted + "'";
}

// Runs `node TOOLS/script args...`; throws with the command line if it fails.
inline void RunNode(const std::string& script, const std::vector<std::string>& args) {
  // Built with append: GCC 12 gives a false -Wrestrict on `"literal" + std::string`.
  std::string command = "node";
  command.append(" ").append(ShellQuote(RequireEnv("MLARUN_TOKENIZER_REF_TOOLS") + "/" + script));
  for (const std::string& arg : args) {
    command.append(" ").append(ShellQuote(arg));
  }
  const int status = std::system(command.c_str());
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("reference command failed: " + command);
  }
}

inline std::string JsonText(std::string_view text) {
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Formats ids with their decoded pieces: [id "piece", ...].
inline std::string Describe(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) {
      out += ", ";
    }
    out += std::to_string(ids[i]) + " " + JsonText(tokenizer.TokenToPiece(ids[i]));
  }
  return out + "]";
}

// Encodes the corpus as the reference saw it: raw-byte lines with ill-formed UTF-8 replaced, which
// is what a JavaScript string gives Hugging Face tokenizers.
inline std::vector<int32_t> EncodeLikeReference(const Tokenizer& tokenizer,
                                                const CorpusLine& line) {
  return tokenizer.Encode(line.text,
                          EncodeOptions{.invalid_utf8 = line.raw_bytes ? InvalidUtf8::kReplace
                                                                       : InvalidUtf8::kKeepBytes});
}

// Encodes the corpus with `tokenizer_json` through the reference and compares line by line.
// Returns the number of identical lines; reports the first mismatch in full.
inline size_t CompareWithReference(const std::string& name, const Tokenizer& tokenizer,
                                   const std::filesystem::path& tokenizer_json,
                                   const std::filesystem::path& corpus_path,
                                   const std::vector<CorpusLine>& corpus) {
  const std::filesystem::path reference_path =
      std::filesystem::path(RequireEnv("MLARUN_TOKENIZER_WORK_DIR")) /
      (name + ".reference_ids.jsonl");
  RunNode("encode.js", {RequireEnv("MLARUN_NPM_DIR"), tokenizer_json.string(), corpus_path.string(),
                        reference_path.string()});
  const std::vector<std::string> reference = ReadLines(reference_path);
  EXPECT_EQ(reference.size(), corpus.size()) << name;
  size_t identical = 0;
  size_t tokens = 0;
  bool reported = false;
  for (size_t i = 0; i < std::min(reference.size(), corpus.size()); ++i) {
    const std::vector<int32_t> expected =
        nlohmann::json::parse(reference[i]).get<std::vector<int32_t>>();
    const std::vector<int32_t> actual = EncodeLikeReference(tokenizer, corpus[i]);
    tokens += expected.size();
    if (actual == expected) {
      ++identical;
      continue;
    }
    if (!reported) {
      size_t first_difference = 0;
      while (first_difference < std::min(actual.size(), expected.size()) &&
             actual[first_difference] == expected[first_difference]) {
        ++first_difference;
      }
      ADD_FAILURE() << name << ": corpus line " << i + 1 << " differs at token " << first_difference
                    << "\n  text:    " << JsonText(corpus[i].text)
                    << "\n  hf:      " << Describe(tokenizer, expected)
                    << "\n  mlarun:  " << Describe(tokenizer, actual);
      reported = true;
    }
  }
  std::cout << "[ reference ] " << name << ": " << identical << "/" << corpus.size()
            << " lines identical to Hugging Face tokenizers (" << tokens << " tokens)\n";
  return identical;
}

}  // namespace mlarun::testing

#endif  // MLARUN_TESTS_TOKENIZER_REFERENCE_UTIL_H_
