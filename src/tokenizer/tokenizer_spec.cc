// Parses tokenizer.json and tokenizer_config.json (formats: Hugging Face tokenizers'
// `tokenizer.json` serialization, tokenizers/src/tokenizer/serialization.rs, and transformers'
// `tokenizer_config.json`) into a `TokenizerSpec`, naming the file and field in every error.
#include "tokenizer/tokenizer_spec.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "tokenizer/tokenizer_error.h"

namespace mlarun::detail {
namespace {

using Json = nlohmann::json;

// Carries the file name into every error message.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

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

  const Json& Require(const Json& object, const std::string& path, const char* key) const {
    if (!object.is_object()) {
      Fail(path, "expected an object");
    }
    const auto it = object.find(key);
    if (it == object.end()) {
      Fail(Join(path, key), "missing");
    }
    return *it;
  }

  std::string String(const Json& value, const std::string& path) const {
    if (!value.is_string()) {
      Fail(path, "expected a string, got " + std::string(value.type_name()));
    }
    return value.get<std::string>();
  }

  std::string RequireString(const Json& object, const std::string& path, const char* key) const {
    return String(Require(object, path, key), Join(path, key));
  }

  // Returns `object[key]` as a bool; absent or null gives `fallback`.
  bool OptionalBool(const Json& object, const std::string& path, const char* key,
                    bool fallback) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
      return fallback;
    }
    if (!it->is_boolean()) {
      Fail(Join(path, key), "expected true or false");
    }
    return it->get<bool>();
  }

  int32_t Id(const Json& value, const std::string& path) const {
    if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
        value.get<int64_t>() > INT32_MAX) {
      Fail(path, "expected a non-negative 32-bit integer id");
    }
    return static_cast<int32_t>(value.get<int64_t>());
  }

  static std::string Join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string Index(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

// Reads a `{"Regex": ...}` or `{"String": ...}` pattern.
void ReadPattern(const Reader& reader, const Json& object, const std::string& path,
                 std::string* pattern, bool* is_regex) {
  const Json& value = reader.Require(object, path, "pattern");
  const std::string pattern_path = Reader::Join(path, "pattern");
  if (value.is_object() && value.contains("Regex")) {
    *pattern = reader.String(value["Regex"], pattern_path + ".Regex");
    *is_regex = true;
  } else if (value.is_object() && value.contains("String")) {
    *pattern = reader.String(value["String"], pattern_path + ".String");
    *is_regex = false;
  } else {
    reader.Fail(pattern_path, "expected {\"Regex\": ...} or {\"String\": ...}");
  }
}

void ReadNormalizer(const Reader& reader, const Json& value, const std::string& path,
                    std::vector<NormalizerSpec>* out) {
  if (value.is_null()) {
    return;
  }
  const std::string type = reader.RequireString(value, path, "type");
  if (type == "Sequence") {
    const Json& list = reader.Require(value, path, "normalizers");
    if (!list.is_array()) {
      reader.Fail(Reader::Join(path, "normalizers"), "expected an array");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      ReadNormalizer(reader, list[i], Reader::Index(Reader::Join(path, "normalizers"), i), out);
    }
  } else if (type == "Replace") {
    NormalizerSpec spec;
    spec.kind = NormalizerSpec::Kind::kReplace;
    ReadPattern(reader, value, path, &spec.pattern, &spec.is_regex);
    spec.content = reader.RequireString(value, path, "content");
    spec.where = reader.source() + ": " + path;
    out->push_back(std::move(spec));
  } else if (type == "Prepend") {
    NormalizerSpec spec;
    spec.kind = NormalizerSpec::Kind::kPrepend;
    spec.content = reader.RequireString(value, path, "prepend");
    spec.where = reader.source() + ": " + path;
    out->push_back(std::move(spec));
  } else {
    reader.Fail(Reader::Join(path, "type"),
                "unsupported normalizer '" + type + "' (supported: Sequence, Replace, Prepend)");
  }
}

SplitBehavior ReadBehavior(const Reader& reader, const Json& object, const std::string& path) {
  const std::string name = reader.RequireString(object, path, "behavior");
  if (name == "Removed") {
    return SplitBehavior::kRemoved;
  }
  if (name == "Isolated") {
    return SplitBehavior::kIsolated;
  }
  if (name == "MergedWithPrevious") {
    return SplitBehavior::kMergedWithPrevious;
  }
  if (name == "MergedWithNext") {
    return SplitBehavior::kMergedWithNext;
  }
  if (name == "Contiguous") {
    return SplitBehavior::kContiguous;
  }
  reader.Fail(Reader::Join(path, "behavior"), "unknown behavior '" + name + "'");
}

void ReadPreTokenizer(const Reader& reader, const Json& value, const std::string& path,
                      TokenizerSpec* spec) {
  if (value.is_null()) {
    return;
  }
  const std::string type = reader.RequireString(value, path, "type");
  if (spec->byte_level.present) {
    reader.Fail(path, "unsupported: a pre-tokenizer after ByteLevel (ByteLevel must be last)");
  }
  if (type == "Sequence") {
    const std::string list_path = Reader::Join(path, "pretokenizers");
    const Json& list = reader.Require(value, path, "pretokenizers");
    if (!list.is_array()) {
      reader.Fail(list_path, "expected an array");
    }
    for (size_t i = 0; i < list.size(); ++i) {
      ReadPreTokenizer(reader, list[i], Reader::Index(list_path, i), spec);
    }
  } else if (type == "Split") {
    SplitSpec split;
    ReadPattern(reader, value, path, &split.pattern, &split.is_regex);
    split.behavior = ReadBehavior(reader, value, path);
    split.invert = reader.OptionalBool(value, path, "invert", false);
    split.where = reader.source() + ": " + path;
    spec->splits.push_back(std::move(split));
  } else if (type == "ByteLevel") {
    // Defaults are those of tokenizers' `ByteLevel::default()`.
    spec->byte_level.present = true;
    spec->byte_level.add_prefix_space = reader.OptionalBool(value, path, "add_prefix_space", true);
    spec->byte_level.use_regex = reader.OptionalBool(value, path, "use_regex", true);
  } else {
    reader.Fail(Reader::Join(path, "type"),
                "unsupported pre-tokenizer '" + type + "' (supported: Sequence, Split, ByteLevel)");
  }
}

void ReadModel(const Reader& reader, const Json& model, BpeSpec* bpe) {
  const std::string path = "model";
  if (!model.is_object()) {
    reader.Fail(path, "expected an object");
  }
  const auto type = model.find("type");
  if (type != model.end()) {
    const std::string name = reader.String(*type, "model.type");
    if (name != "BPE") {
      reader.Fail("model.type", "unsupported model type '" + name + "' (only BPE is supported)");
    }
  } else if (!model.contains("merges")) {
    reader.Fail("model.type", "missing, and the model has no merges (only BPE is supported)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(key);
    if (it != model.end() && !it->is_null() &&
        !(it->is_string() && it->get<std::string>().empty())) {
      reader.Fail(Reader::Join(path, key), "unsupported (must be null)");
    }
  }
  const Json& vocab = reader.Require(model, path, "vocab");
  if (!vocab.is_object()) {
    reader.Fail("model.vocab", "expected an object of token -> id");
  }
  bpe->vocab.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) {
    bpe->vocab.emplace_back(token, reader.Id(id, "model.vocab[\"" + token + "\"]"));
  }
  const Json& merges = reader.Require(model, path, "merges");
  if (!merges.is_array()) {
    reader.Fail("model.merges", "expected an array");
  }
  bpe->merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& merge = merges[i];
    if (merge.is_string()) {
      // "a b": tokens never contain ' ' in this form (tokenizers' `convert_merges_to_hashmap`).
      const std::string& line = merge.get_ref<const std::string&>();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        reader.Fail(Reader::Index("model.merges", i),
                    "expected \"left right\", got \"" + line + "\"");
      }
      bpe->merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      bpe->merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      reader.Fail(Reader::Index("model.merges", i),
                  "expected \"left right\" or [\"left\", \"right\"]");
    }
  }
  const auto unk = model.find("unk_token");
  if (unk != model.end() && !unk->is_null()) {
    bpe->unk_token = reader.String(*unk, "model.unk_token");
  }
  bpe->fuse_unk = reader.OptionalBool(model, path, "fuse_unk", false);
  bpe->byte_fallback = reader.OptionalBool(model, path, "byte_fallback", false);
  bpe->ignore_merges = reader.OptionalBool(model, path, "ignore_merges", false);
}

bool ReadDecoder(const Reader& reader, const Json& value, const std::string& path) {
  if (value.is_null()) {
    return false;
  }
  const std::string type = reader.RequireString(value, path, "type");
  if (type == "ByteLevel") {
    return true;
  }
  if (type == "Sequence") {
    const Json& list = reader.Require(value, path, "decoders");
    if (list.is_array() && list.size() == 1) {
      return ReadDecoder(reader, list[0], Reader::Index(Reader::Join(path, "decoders"), 0));
    }
  }
  reader.Fail(Reader::Join(path, "type"),
              "unsupported decoder '" + type + "' (supported: ByteLevel or null)");
}

void ReadAddedTokens(const Reader& reader, const Json& root, std::vector<AddedTokenSpec>* out) {
  const auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) {
    return;
  }
  if (!it->is_array()) {
    reader.Fail("added_tokens", "expected an array");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& entry = (*it)[i];
    const std::string path = Reader::Index("added_tokens", i);
    AddedTokenSpec token;
    token.content = reader.RequireString(entry, path, "content");
    if (token.content.empty()) {
      reader.Fail(Reader::Join(path, "content"), "must not be empty");
    }
    token.id = reader.Id(reader.Require(entry, path, "id"), Reader::Join(path, "id"));
    token.special = reader.OptionalBool(entry, path, "special", false);
    token.lstrip = reader.OptionalBool(entry, path, "lstrip", false);
    token.rstrip = reader.OptionalBool(entry, path, "rstrip", false);
    token.single_word = reader.OptionalBool(entry, path, "single_word", false);
    token.normalized = reader.OptionalBool(entry, path, "normalized", !token.special);
    out->push_back(std::move(token));
  }
}

// Returns a special-token field of tokenizer_config.json: a string or {"content": ...}.
std::string ReadConfigToken(const Reader& reader, const Json& root, const char* key) {
  const auto it = root.find(key);
  if (it == root.end() || it->is_null()) {
    return {};
  }
  if (it->is_string()) {
    return it->get<std::string>();
  }
  if (it->is_object()) {
    return reader.RequireString(*it, key, "content");
  }
  reader.Fail(key, "expected a string or {\"content\": ...}");
}

}  // namespace

TokenizerSpec ParseTokenizerJson(std::string_view json_text, std::string_view source) {
  const Reader reader(source);
  const Json root = reader.Parse(json_text);
  if (!root.is_object()) {
    reader.Fail("(root)", "expected an object");
  }
  TokenizerSpec spec;
  spec.source = std::string(source);
  ReadModel(reader, reader.Require(root, "", "model"), &spec.bpe);
  ReadAddedTokens(reader, root, &spec.added_tokens);
  if (const auto it = root.find("normalizer"); it != root.end()) {
    ReadNormalizer(reader, *it, "normalizer", &spec.normalizers);
  }
  if (const auto it = root.find("pre_tokenizer"); it != root.end()) {
    ReadPreTokenizer(reader, *it, "pre_tokenizer", &spec);
  }
  if (const auto it = root.find("decoder"); it != root.end()) {
    spec.byte_level_decoder = ReadDecoder(reader, *it, "decoder");
  }
  return spec;
}

void ParseTokenizerConfigJson(std::string_view json_text, std::string_view source,
                              TokenizerSpec* spec) {
  const Reader reader(source);
  const Json root = reader.Parse(json_text);
  if (!root.is_object()) {
    reader.Fail("(root)", "expected an object");
  }
  spec->bos_token = ReadConfigToken(reader, root, "bos_token");
  spec->eos_token = ReadConfigToken(reader, root, "eos_token");
  if (root.contains("add_bos_token") && !root["add_bos_token"].is_null()) {
    spec->add_bos_token = reader.OptionalBool(root, "", "add_bos_token", false);
  }
  const auto tmpl = root.find("chat_template");
  if (tmpl == root.end() || tmpl->is_null()) {
    return;
  }
  if (tmpl->is_string()) {
    spec->chat_template = tmpl->get<std::string>();
  } else if (tmpl->is_array()) {
    // Named templates ([{"name": ..., "template": ...}]): take "default", else the first.
    for (size_t i = 0; i < tmpl->size(); ++i) {
      const std::string path = Reader::Index("chat_template", i);
      const std::string name = reader.RequireString((*tmpl)[i], path, "name");
      if (i == 0 || name == "default") {
        spec->chat_template = reader.RequireString((*tmpl)[i], path, "template");
      }
    }
  } else {
    reader.Fail("chat_template", "expected a string or a list of named templates");
  }
}

}  // namespace mlarun::detail
