// `mlarun tokenize` and `mlarun detokenize`: token ids <-> text with the model's tokenizer only
// (no weights are loaded).
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/common.h"
#include "cli/text_io.h"
#include "core/error.h"

namespace mlarun::cli {

namespace {

struct TokenizeArgs {
  std::string model_dir;
  std::string file;
  bool bos = false;
  bool jsonl = false;
};

// Calls `fn(line, line_number)` for every line of the input (the last one may lack '\n').
template <typename Fn>
void ForEachLine(const std::string& input, Fn fn) {
  std::istringstream in(input);
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) fn(line, ++number);
}

int RunTokenize(const TokenizeArgs& args) {
  const Tokenizer tokenizer = LoadTokenizer(ResolveModelDir(args.model_dir));
  const std::string where = args.file.empty() ? "stdin" : args.file;
  ForEachLine(ReadInput(args.file), [&](const std::string& line, int64_t number) {
    std::string text = line;
    if (args.jsonl) {
      try {
        const nlohmann::json value = nlohmann::json::parse(line);
        if (!value.is_string())
          throw Error(where + ":" + std::to_string(number) + ": expected a JSON string");
        text = value.get<std::string>();
      } catch (const nlohmann::json::parse_error& e) {
        throw Error(where + ":" + std::to_string(number) + ": not a JSON string: " + e.what());
      }
    }
    const nlohmann::json ids = tokenizer.Encode(text, args.bos);
    std::printf("%s\n", ids.dump().c_str());
  });
  return 0;
}

int RunDetokenize(const TokenizeArgs& args) {
  const Tokenizer tokenizer = LoadTokenizer(ResolveModelDir(args.model_dir));
  const std::string where = args.file.empty() ? "stdin" : args.file;
  ForEachLine(ReadInput(args.file), [&](const std::string& line, int64_t number) {
    std::vector<int32_t> ids;
    try {
      const nlohmann::json value = nlohmann::json::parse(line);
      if (!value.is_array())
        throw Error(where + ":" + std::to_string(number) + ": expected a JSON array of ids");
      for (const nlohmann::json& id : value) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
            id.get<int64_t>() >= tokenizer.vocab_size()) {
          throw Error(where + ":" + std::to_string(number) + ": " + id.dump() +
                      " is not a token id in [0, " + std::to_string(tokenizer.vocab_size()) + ")");
        }
        ids.push_back(id.get<int32_t>());
      }
    } catch (const nlohmann::json::parse_error& e) {
      throw Error(where + ":" + std::to_string(number) + ": not a JSON array: " + e.what());
    }
    // Invalid UTF-8 (ids that split a character) is printed with U+FFFD replacements.
    const nlohmann::json text = tokenizer.Decode(ids);
    std::printf("%s\n",
                text.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  });
  return 0;
}

}  // namespace

void RegisterTokenize(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd =
      app.add_subcommand("tokenize", "Print one JSON array of token ids per input line");
  cmd->add_option("--model,-m", args->model_dir,
                  "Model directory (only the tokenizer files are read)");
  cmd->add_option("--file,-f", args->file, "Input file (default: stdin)");
  cmd->add_flag("--bos", args->bos, "Prepend the BOS token");
  cmd->add_flag("--jsonl", args->jsonl,
                "Each input line is a JSON string (texts may contain newlines)");
  cmd->callback([args, exit_code] { *exit_code = RunTokenize(*args); });

  auto dargs = std::make_shared<TokenizeArgs>();
  CLI::App* dcmd =
      app.add_subcommand("detokenize", "Print each input line's JSON id array as a JSON string");
  dcmd->add_option("--model,-m", dargs->model_dir,
                   "Model directory (only the tokenizer files are read)");
  dcmd->add_option("--file,-f", dargs->file, "Input file (default: stdin)");
  dcmd->callback([dargs, exit_code] { *exit_code = RunDetokenize(*dargs); });
}

}  // namespace mlarun::cli
