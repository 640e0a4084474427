// Converts between GGUF tokenizer metadata and Hugging Face tokenizer.json files. The facts on the
// GGUF side come from llama.cpp: the keys and token types from gguf-py (gguf/constants.py), how
// they are read from src/llama-vocab.cpp (`llama_vocab::impl::load`: pre-tokenizer names, which
// names set `ignore_merges` and `add_bos`, "left right" merges split at the first space after the
// first byte, duplicate tokens rejected), the pre-tokenizer regexes from the same file
// (`llm_tokenizer_bpe`), and how a tokenizer.json becomes keys from convert_hf_to_gguf.py
// (`get_vocab_base`: "[PAD<id>]" unused fillers, control / user-defined added tokens).
#include "tokenizer/gguf_vocab.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "tokenizer/gguf_pretokenizers.h"
#include "tokenizer/pretokenizer.h"  // kGpt2SplitPattern
#include "tokenizer/tokenizer_spec.h"
#include "tokenizer/utf8.h"

namespace mlarun {
namespace {

using Json = nlohmann::json;

std::string SupportedList() {
  std::string out;
  for (const std::string_view name : SupportedGgufPreTokenizers()) {
    out.append(out.empty() ? "" : ", ").append(name);
  }
  return out;
}

// A token in single quotes for an error message, with JSON escapes so that control characters
// stay visible and the message stays on one line.
std::string Quote(std::string_view text) {
  const std::string json =
      Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
  return "'" + json.substr(1, json.size() - 2) + "'";
}

class GgufReader {
 public:
  explicit GgufReader(const GgufVocab& v) : v_(v) {}

  [[noreturn]] void Fail(const std::string& key, const std::string& problem) const {
    throw TokenizerError(v_.source + ": " + key + ": " + problem);
  }

  // The id of a token that tokenizer.json has (not unused, not empty), or -1.
  int32_t Find(std::string_view token) const {
    const auto it = ids_.find(std::string(token));
    return it == ids_.end() || !in_vocab_[it->second] ? -1 : it->second;
  }

  GgufTokenType TypeOf(size_t id) const {
    return v_.token_types.empty() ? GgufTokenType::kNormal
                                  : static_cast<GgufTokenType>(v_.token_types[id]);
  }

  void CheckTokens() {
    if (v_.tokens.empty()) {
      Fail("tokenizer.ggml.tokens", "empty");
    }
    if (v_.tokens.size() > static_cast<size_t>(INT32_MAX)) {
      Fail("tokenizer.ggml.tokens", "more than 2^31 - 1 tokens");
    }
    if (!v_.token_types.empty() && v_.token_types.size() != v_.tokens.size()) {
      Fail("tokenizer.ggml.token_type", std::to_string(v_.token_types.size()) + " types for " +
                                            std::to_string(v_.tokens.size()) +
                                            " tokens (tokenizer.ggml.tokens)");
    }
    in_vocab_.assign(v_.tokens.size(), false);
    for (size_t id = 0; id < v_.tokens.size(); ++id) {
      const std::string& token = v_.tokens[id];
      const std::string key = "tokenizer.ggml.tokens[" + std::to_string(id) + "]";
      if (!v_.token_types.empty() && (v_.token_types[id] < 0 || v_.token_types[id] > 6)) {
        Fail("tokenizer.ggml.token_type[" + std::to_string(id) + "]",
             "unknown type " + std::to_string(v_.token_types[id]) +
                 " (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte)");
      }
      if (!detail::IsValidUtf8(token)) {
        Fail(key, "not valid UTF-8");
      }
      if (token.empty()) {
        continue;  // llama.cpp renames it "[EMPTY_<id>]"; here it is a gap that decodes to nothing
      }
      const auto [it, inserted] = ids_.emplace(token, static_cast<int32_t>(id));
      if (!inserted) {
        Fail(key,
             Quote(token) + " repeats tokenizer.ggml.tokens[" + std::to_string(it->second) + "]");
      }
      in_vocab_[id] = TypeOf(id) != GgufTokenType::kUnused;
    }
  }

  // The "left right" halves of merge `i`, split at the first space after the first byte, as
  // llama.cpp does (so a left part may be " " itself).
  std::pair<std::string, std::string> Merge(size_t i) const {
    const std::string& merge = v_.merges[i];
    const std::string key = "tokenizer.ggml.merges[" + std::to_string(i) + "]";
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos) {
      Fail(key, "expected \"left right\", got " + Quote(merge));
    }
    std::pair<std::string, std::string> parts(merge.substr(0, space), merge.substr(space + 1));
    for (const std::string* part : {&parts.first, &parts.second}) {
      if (Find(*part) < 0) {
        Fail(key, Quote(merge) + ": " + Quote(*part) +
                      " is not a token of tokenizer.ggml.tokens (or is unused)");
      }
    }
    if (Find(parts.first + parts.second) < 0) {
      Fail(key, Quote(merge) + ": the merged token " + Quote(parts.first + parts.second) +
                    " is not a token of tokenizer.ggml.tokens (or is unused)");
    }
    return parts;
  }

  // The token of a special-token id key, or "" when the key is absent.
  std::string SpecialToken(const std::optional<int64_t>& id, const char* key) const {
    if (!id) {
      return {};
    }
    const std::string name = std::string("tokenizer.ggml.") + key;
    if (*id < 0 || *id >= static_cast<int64_t>(v_.tokens.size())) {
      Fail(name, std::to_string(*id) + " is out of range (" + std::to_string(v_.tokens.size()) +
                     " tokens)");
    }
    if (!in_vocab_[*id]) {
      Fail(name, std::to_string(*id) + " is an unused or empty token");
    }
    return v_.tokens[*id];
  }

  bool InVocab(size_t id) const { return in_vocab_[id]; }

 private:
  const GgufVocab& v_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<bool> in_vocab_;  // neither unused nor empty
};

// Checks that tokenizer.huggingface.json gives its tokens the ids tokenizer.ggml.tokens does.
void CheckHuggingFaceJson(const GgufVocab& v) {
  const std::string name = v.source + ": tokenizer.huggingface.json";
  Json root;
  try {
    root = Json::parse(v.huggingface_json);
  } catch (const Json::parse_error& e) {
    throw TokenizerError(name + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
  }
  auto check = [&](const std::string& token, const Json& id, const std::string& where) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() >= static_cast<int64_t>(v.tokens.size()) ||
        v.tokens[id.get<int64_t>()] != token) {
      throw TokenizerError(name + ": " + where + ": " + Quote(token) + " has id " + id.dump() +
                           ", which is not its id in tokenizer.ggml.tokens");
    }
  };
  std::unordered_set<int64_t> added;  // ids of added tokens: their vocab key may differ
  const Json* added_tokens = nullptr;
  if (root.contains("added_tokens") && root["added_tokens"].is_array()) {
    added_tokens = &root["added_tokens"];
    for (const Json& token : *added_tokens) {
      if (token.is_object() && token.contains("id") && token["id"].is_number_integer()) {
        added.insert(token["id"].get<int64_t>());
      }
    }
  }
  if (!root.contains("model") || !root["model"].is_object() || !root["model"].contains("vocab") ||
      !root["model"]["vocab"].is_object()) {
    throw TokenizerError(name + ": model.vocab: missing");
  }
  for (const auto& [token, id] : root["model"]["vocab"].items()) {
    if (!(id.is_number_integer() && added.count(id.get<int64_t>()) != 0)) {
      check(token, id, "model.vocab");
    }
  }
  for (size_t i = 0; added_tokens != nullptr && i < added_tokens->size(); ++i) {
    const Json& token = (*added_tokens)[i];
    if (token.is_object() && token.contains("content") && token["content"].is_string() &&
        token.contains("id")) {
      check(token["content"].get<std::string>(), token["id"],
            "added_tokens[" + std::to_string(i) + "]");
    }
  }
}

Json ConfigJson(const GgufVocab& v, const GgufReader& reader, const detail::GgufPreTokenizer* def) {
  Json config = Json::object();
  const std::pair<const std::optional<int64_t>*, const char*> specials[] = {
      {&v.bos_id, "bos_token"},
      {&v.eos_id, "eos_token"},
      {&v.pad_id, "pad_token"},
      {&v.unk_id, "unk_token"}};
  static constexpr const char* kKeys[] = {"bos_token_id", "eos_token_id", "padding_token_id",
                                          "unknown_token_id"};
  for (size_t i = 0; i < std::size(specials); ++i) {
    const std::string token = reader.SpecialToken(*specials[i].first, kKeys[i]);
    if (!token.empty()) {
      config[specials[i].second] = token;
    }
  }
  config["add_bos_token"] = v.add_bos.value_or(def != nullptr && def->add_bos);
  config["add_eos_token"] = v.add_eos.value_or(false);
  if (!v.chat_template.empty()) {
    if (!detail::IsValidUtf8(v.chat_template)) {
      reader.Fail("tokenizer.chat_template", "not valid UTF-8");
    }
    config["chat_template"] = v.chat_template;
  }
  return config;
}

Json PreTokenizerJson(const detail::GgufPreTokenizer& def) {
  Json byte_level = {{"type", "ByteLevel"},
                     {"add_prefix_space", false},
                     {"trim_offsets", true},
                     {"use_regex", def.byte_level_regex}};
  if (def.patterns.empty()) {
    return byte_level;
  }
  Json steps = Json::array();
  for (const std::string& pattern : def.patterns) {
    steps.push_back({{"type", "Split"},
                     {"pattern", {{"Regex", pattern}}},
                     {"behavior", "Isolated"},
                     {"invert", false}});
  }
  steps.push_back(std::move(byte_level));
  return {{"type", "Sequence"}, {"pretokenizers", std::move(steps)}};
}

// --- tokenizer.json -> GGUF ---------------------------------------------------------------------

// Reads the parts of a tokenizer.json that GGUF holds, naming the field in every error.
class JsonReader {
 public:
  explicit JsonReader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void Fail(const std::string& path, const std::string& problem) const {
    throw TokenizerError(source_ + ": " + path + ": " + problem);
  }
  Json Parse(std::string_view text) const {
    try {
      return Json::parse(text.begin(), text.end());
    } catch (const Json::parse_error& e) {
      throw TokenizerError(source_ + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
    }
  }
  // `object[key]` as a bool; absent or null gives `fallback`.
  bool Bool(const Json& object, const std::string& path, const char* key, bool fallback) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
      return fallback;
    }
    if (!it->is_boolean()) {
      Fail(path.empty() ? key : path + "." + key, "expected true or false");
    }
    return it->get<bool>();
  }
  int32_t Id(const Json& value, const std::string& path) const {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() >= INT32_MAX) {
      Fail(path, "expected a non-negative 32-bit integer id");
    }
    return static_cast<int32_t>(value.get<int64_t>());
  }

 private:
  std::string source_;
};

// The pre-tokenizer of a tokenizer.json as a list of Isolated split regexes; nullopt when it has
// a step no llama.cpp pre-tokenizer has. Throws when there is no ByteLevel step at all.
std::optional<std::vector<std::string>> SplitPatterns(const JsonReader& reader, const Json& root) {
  std::vector<const Json*> steps;
  const auto pre = root.find("pre_tokenizer");
  if (pre != root.end() && pre->is_object()) {
    if (pre->value("type", "") == "Sequence" && pre->contains("pretokenizers") &&
        (*pre)["pretokenizers"].is_array()) {
      for (const Json& step : (*pre)["pretokenizers"]) {
        steps.push_back(&step);
      }
    } else {
      steps.push_back(&*pre);
    }
  }
  const bool byte_level = std::any_of(steps.begin(), steps.end(), [](const Json* step) {
    return step->is_object() && step->value("type", "") == "ByteLevel";
  });
  if (!byte_level) {
    reader.Fail("pre_tokenizer",
                "no ByteLevel step: not a byte-level BPE tokenizer, which GGUF's 'gpt2' "
                "tokenizer model is");
  }
  std::vector<std::string> patterns;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Json& step = *steps[i];
    const std::string type = step.is_object() ? step.value("type", "") : "";
    if (type == "Split" && step.contains("pattern") && step["pattern"].is_object() &&
        step["pattern"].contains("Regex") && step["pattern"]["Regex"].is_string() &&
        step.value("behavior", "") == "Isolated" && !step.value("invert", false)) {
      patterns.push_back(step["pattern"]["Regex"].get<std::string>());
    } else if (type == "Digits") {
      // tokenizers' Digits splits off characters of category N (Rust's `char::is_numeric`): one
      // by one, or in runs (Contiguous).
      patterns.push_back(step.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
    } else if (type == "ByteLevel" && i + 1 == steps.size() &&
               !step.value("add_prefix_space", true)) {
      if (step.value("use_regex", true)) {
        patterns.emplace_back(detail::kGpt2SplitPattern);
      }
    } else {
      return std::nullopt;
    }
  }
  return patterns;
}

// Picks `v->pre` for the tokenizer.json's pre-tokenizer and notes what llama.cpp would do
// differently. Returns false when no llama.cpp name fits (`v->pre` is then "default").
bool DetectPre(const JsonReader& reader, const Json& root, bool ignore_merges, GgufVocab* v) {
  const std::optional<std::vector<std::string>> patterns = SplitPatterns(reader, root);
  const detail::GgufPreTokenizer* found = nullptr;
  if (patterns) {
    std::string difference;
    found = detail::MatchGgufPreTokenizer(*patterns, v->merges, &difference);
    if (!difference.empty()) {
      v->differences.push_back(difference);
    }
  }
  if (found == nullptr) {
    v->pre = "default";
    v->differences.push_back(
        "pre_tokenizer: no llama.cpp pre-tokenizer has these regexes (supported: " +
        SupportedList() +
        "), so tokenizer.ggml.pre is 'default' and tokenizer.huggingface.json holds the exact "
        "tokenizer");
    return false;
  }
  v->pre = found->name;
  if (found->ignore_merges != ignore_merges) {
    v->differences.push_back(std::string("model.ignore_merges: is ") +
                             (ignore_merges ? "true" : "false") + ", but llama.cpp's '" +
                             std::string(found->name) + "' uses " +
                             (found->ignore_merges ? "true" : "false"));
  }
  return true;
}

// A special-token field of tokenizer_config.json: a string or {"content": ...}; "" when absent.
std::string ConfigToken(const JsonReader& reader, const Json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) {
    return {};
  }
  if (it->is_string()) {
    return it->get<std::string>();
  }
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  reader.Fail(key, "expected a string or {\"content\": ...}");
}

std::string ConfigSource(const std::string& source) {
  constexpr std::string_view kName = "tokenizer.json";
  if (source.ends_with(kName)) {
    return source.substr(0, source.size() - kName.size()) + "tokenizer_config.json";
  }
  return source + " (tokenizer_config.json)";
}

TokenizerJsonFiles TokenizerJsonFromGgufVocabImpl(const GgufVocab& v) {
  GgufReader reader(v);
  if (v.model != "gpt2") {
    reader.Fail("tokenizer.ggml.model", "unsupported tokenizer model " + Quote(v.model) +
                                            (v.model == "llama" ? " (SentencePiece)" : "") +
                                            "; only 'gpt2' (byte-level BPE) is supported");
  }
  const std::string pre = v.pre.empty() ? "default" : v.pre;  // llama.cpp's default too
  const detail::GgufPreTokenizer* def = detail::FindGgufPreTokenizer(pre);
  if (def == nullptr && v.huggingface_json.empty()) {
    reader.Fail("tokenizer.ggml.pre", "unsupported pre-tokenizer " + Quote(pre) +
                                          " (supported: " + SupportedList() + ")");
  }
  reader.CheckTokens();
  TokenizerJsonFiles files;
  if (!v.huggingface_json.empty()) {
    CheckHuggingFaceJson(v);
    files.tokenizer_json = v.huggingface_json;
    files.config_json = ConfigJson(v, reader, def).dump();
    return files;
  }
  Json vocab = Json::object();
  Json added = Json::array();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (!reader.InVocab(id)) {
      continue;
    }
    vocab[v.tokens[id]] = id;
    const GgufTokenType type = reader.TypeOf(id);
    if (type == GgufTokenType::kControl || type == GgufTokenType::kUnknown ||
        type == GgufTokenType::kUserDefined) {
      added.push_back({{"id", id},
                       {"content", v.tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type != GgufTokenType::kUserDefined}});
    }
  }
  Json merges = Json::array();
  for (size_t i = 0; i < v.merges.size(); ++i) {
    auto [left, right] = reader.Merge(i);
    merges.push_back({std::move(left), std::move(right)});  // pairs keep spaces inside parts
  }
  const Json byte_level_decoder = {{"type", "ByteLevel"},
                                   {"add_prefix_space", true},
                                   {"trim_offsets", true},
                                   {"use_regex", true}};
  const Json root = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", std::move(added)},
      {"normalizer", nullptr},
      {"pre_tokenizer", PreTokenizerJson(*def)},
      {"post_processor", nullptr},
      {"decoder", byte_level_decoder},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", def->ignore_merges},
        {"vocab", std::move(vocab)},
        {"merges", std::move(merges)}}},
  };
  files.tokenizer_json = root.dump();
  files.config_json = ConfigJson(v, reader, def).dump();
  return files;
}

GgufVocab GgufVocabFromTokenizerJsonImpl(std::string_view tokenizer_json,
                                         std::string_view config_json, const std::string& source,
                                         int64_t min_vocab_size) {
  const JsonReader reader(source);
  const Json root = reader.Parse(tokenizer_json);
  if (!root.is_object() || !root.contains("model") || !root["model"].is_object()) {
    reader.Fail("model", "missing or not an object");
  }
  const Json& model = root["model"];
  const std::string type = model.value("type", model.contains("merges") ? "BPE" : "");
  if (type != "BPE") {
    reader.Fail("model.type", "unsupported model type " + Quote(type) +
                                  " (only byte-level BPE has a GGUF 'gpt2' form)");
  }
  if (!model.contains("vocab") || !model["vocab"].is_object()) {
    reader.Fail("model.vocab", "missing or not an object of token -> id");
  }
  GgufVocab v;
  v.source = source;
  v.model = "gpt2";
  // Id -> token: the vocab, then the added tokens' contents (as transformers' get_vocab gives
  // them to convert_hf_to_gguf.py).
  std::unordered_map<int32_t, std::string> by_id;
  std::unordered_map<int32_t, bool> added_special;  // id -> "special" of an added token
  int64_t size = min_vocab_size;
  for (const auto& [token, id_json] : model["vocab"].items()) {
    const int32_t id = reader.Id(id_json, "model.vocab[" + Quote(token) + "]");
    const auto [it, inserted] = by_id.emplace(id, token);
    if (!inserted) {
      reader.Fail("model.vocab", Quote(it->second) + " and " + Quote(token) + " both have id " +
                                     std::to_string(id));
    }
    size = std::max<int64_t>(size, int64_t{id} + 1);
  }
  if (size > std::max<int64_t>(min_vocab_size, 2 * static_cast<int64_t>(by_id.size()) + 65536)) {
    reader.Fail("model.vocab", "id " + std::to_string(size - 1) + " leaves most ids unused");
  }
  const auto added_it = root.find("added_tokens");
  if (added_it != root.end() && added_it->is_array()) {
    for (size_t i = 0; i < added_it->size(); ++i) {
      const Json& token = (*added_it)[i];
      const std::string path = "added_tokens[" + std::to_string(i) + "]";
      if (!token.is_object() || !token.contains("content") || !token["content"].is_string() ||
          !token.contains("id")) {
        reader.Fail(path, "expected {\"id\": ..., \"content\": \"...\"}");
      }
      const int32_t id = reader.Id(token["id"], path + ".id");
      const std::string content = token["content"].get<std::string>();
      by_id[id] = content;
      added_special[id] = reader.Bool(token, path, "special", false);
      if (id >= size) {
        size = id + 1;
        if (size > static_cast<int64_t>(by_id.size()) + 65536) {
          reader.Fail(path + ".id", std::to_string(id) + " leaves most ids unused");
        }
      }
      for (const char* flag : {"lstrip", "rstrip", "single_word"}) {
        if (reader.Bool(token, path, flag, false)) {
          v.differences.push_back(path + " " + Quote(content) + ": " + flag +
                                  " is not stored in GGUF");
        }
      }
    }
  }
  v.tokens.reserve(size);
  v.token_types.reserve(size);
  std::unordered_map<std::string, int32_t> ids;
  for (int32_t id = 0; id < size; ++id) {
    const auto it = by_id.find(id);
    const bool filler = it == by_id.end();
    std::string token = filler ? "[PAD" + std::to_string(id) + "]" : std::move(it->second);
    const auto [prev, inserted] = ids.emplace(token, id);
    if (!inserted) {
      reader.Fail("model.vocab", "ids " + std::to_string(prev->second) + " and " +
                                     std::to_string(id) + " are both " + Quote(token) +
                                     (filler ? " (the filler of a missing id)" : ""));
    }
    const auto added = added_special.find(id);
    GgufTokenType type = filler ? GgufTokenType::kUnused : GgufTokenType::kNormal;
    if (added != added_special.end()) {
      type = added->second ? GgufTokenType::kControl : GgufTokenType::kUserDefined;
    }
    v.token_types.push_back(static_cast<int32_t>(type));
    v.tokens.push_back(std::move(token));
  }
  if (!model.contains("merges") || !model["merges"].is_array()) {
    reader.Fail("model.merges", "missing or not an array");
  }
  for (size_t i = 0; i < model["merges"].size(); ++i) {
    const Json& merge = model["merges"][i];
    const std::string path = "model.merges[" + std::to_string(i) + "]";
    if (merge.is_string()) {
      v.merges.push_back(merge.get<std::string>());
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      const std::string left = merge[0].get<std::string>();
      const std::string right = merge[1].get<std::string>();
      if (left.find(' ') != std::string::npos || right.find(' ') != std::string::npos) {
        reader.Fail(path, "a part contains ' ', which a GGUF \"left right\" merge cannot hold");
      }
      v.merges.push_back(left + " " + right);
    } else {
      reader.Fail(path, "expected \"left right\" or [\"left\", \"right\"]");
    }
  }
  const bool ignore_merges = reader.Bool(model, "model", "ignore_merges", false);
  if (!DetectPre(reader, root, ignore_merges, &v)) {
    v.huggingface_json = std::string(tokenizer_json);
  }
  if (reader.Bool(model, "model", "byte_fallback", false)) {
    v.differences.push_back("model.byte_fallback: is not stored in GGUF");
  }
  const auto normalizer = root.find("normalizer");
  if (normalizer != root.end() && !normalizer->is_null() &&
      !(normalizer->value("type", "") == "Sequence" && normalizer->contains("normalizers") &&
        (*normalizer)["normalizers"].empty())) {
    v.differences.push_back("normalizer: " + Quote(normalizer->value("type", "?")) +
                            " is not stored in GGUF (llama.cpp normalizes nothing)");
  }
  if (!config_json.empty()) {
    const std::string config_source = ConfigSource(source);
    const JsonReader config_reader(config_source);
    const Json config = config_reader.Parse(config_json);
    if (!config.is_object()) {
      config_reader.Fail("(root)", "expected an object");
    }
    detail::TokenizerSpec spec;  // chat_template, including the list form
    detail::ParseTokenizerConfigJson(config_json, config_source, &spec);
    v.chat_template = spec.chat_template;
    auto find_id = [&](const char* key) -> std::optional<int64_t> {
      std::string token = ConfigToken(config_reader, config, key);
      if (token.empty() && std::string_view(key) == "unk_token" && model.contains("unk_token") &&
          model["unk_token"].is_string()) {
        token = model["unk_token"].get<std::string>();
      }
      if (token.empty()) {
        return std::nullopt;
      }
      const auto it = ids.find(token);
      if (it == ids.end() ||
          v.token_types[it->second] == static_cast<int32_t>(GgufTokenType::kUnused)) {
        config_reader.Fail(key, Quote(token) + " is not a token of " + source);
      }
      return it->second;
    };
    v.bos_id = find_id("bos_token");
    v.eos_id = find_id("eos_token");
    v.pad_id = find_id("pad_token");
    v.unk_id = find_id("unk_token");
    for (const auto& [key, field] :
         {std::pair{"add_bos_token", &v.add_bos}, std::pair{"add_eos_token", &v.add_eos}}) {
      if (config.contains(key) && !config[key].is_null()) {
        *field = config_reader.Bool(config, "", key, false);
      }
    }
  }
  return v;
}

}  // namespace

std::vector<std::string_view> SupportedGgufPreTokenizers() {
  return detail::GgufPreTokenizerNames();
}

TokenizerJsonFiles TokenizerJsonFromGgufVocab(const GgufVocab& v) {
  try {
    return TokenizerJsonFromGgufVocabImpl(v);
  } catch (const Json::exception& e) {  // a malformed tokenizer.huggingface.json
    throw TokenizerError(v.source + ": tokenizer.huggingface.json: " + e.what());
  }
}

GgufVocab GgufVocabFromTokenizerJson(std::string_view tokenizer_json, std::string_view config_json,
                                     std::string source, int64_t min_vocab_size) {
  try {
    return GgufVocabFromTokenizerJsonImpl(tokenizer_json, config_json, source, min_vocab_size);
  } catch (const Json::exception& e) {  // a value of an unexpected type
    throw TokenizerError(source + ": " + e.what());
  }
}

}  // namespace mlarun
