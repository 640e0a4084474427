// GGUF tokenizer metadata <-> Hugging Face tokenizer files.
#include "model/gguf_tokenizer.h"

#include <filesystem>

#include "core/error.h"
#include "core/mapped_file.h"
#include "tokenizer/tokenizer_error.h"

namespace mlarun {

namespace {

constexpr const char* kPlaceholderKey = "mlarun.placeholder_vocabulary";

void Put(std::vector<GgufKeyValue>& kv, std::string key, GgufValue value) {
  kv.push_back({std::move(key), std::move(value)});
}

// The GPT-2 byte-to-unicode alphabet's 256 characters (bytes 0x21-0x7e, 0xa1-0xac, 0xae-0xff as
// themselves, the other 68 as U+0100 on), so that the stand-in vocabulary starts with one token
// per byte as a byte-level BPE vocabulary does.
std::vector<std::string> ByteTokens() {
  std::vector<std::string> tokens;
  auto utf8 = [](uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xc0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3f));
    }
    return s;
  };
  uint32_t extra = 0x100;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    tokens.push_back(utf8(printable ? b : extra++));
  }
  return tokens;
}

}  // namespace

void AddGgufTokenizer(const std::string& src_dir, const ModelConfig& config,
                      std::vector<GgufKeyValue>& kv) {
  namespace fs = std::filesystem;
  const std::string tokenizer_json = src_dir + "/tokenizer.json";
  if (!fs::exists(tokenizer_json)) {
    std::vector<std::string> tokens = ByteTokens();
    tokens.resize(std::max<size_t>(tokens.size(), static_cast<size_t>(config.vocab_size)));
    for (size_t i = 256; i < tokens.size(); ++i) tokens[i] = "<t" + std::to_string(i) + ">";
    tokens.resize(static_cast<size_t>(config.vocab_size));
    const std::vector<int32_t> types(tokens.size(), 1);
    Put(kv, "tokenizer.ggml.model", GgufValue::String("gpt2"));
    Put(kv, "tokenizer.ggml.pre", GgufValue::String("default"));
    Put(kv, "tokenizer.ggml.tokens", GgufValue::StringArray(std::move(tokens)));
    Put(kv, "tokenizer.ggml.token_type", GgufValue::Int32Array(types));
    Put(kv, "tokenizer.ggml.merges", GgufValue::StringArray({}));
    Put(kv, "tokenizer.ggml.bos_token_id",
        GgufValue::Uint32(static_cast<uint32_t>(config.bos_token_id.value_or(0))));
    Put(kv, "tokenizer.ggml.eos_token_id",
        GgufValue::Uint32(static_cast<uint32_t>(
            config.eos_token_ids.empty() ? 0 : config.eos_token_ids.front())));
    Put(kv, kPlaceholderKey, GgufValue::Bool(true));
    return;
  }
  const std::string config_path = src_dir + "/tokenizer_config.json";
  const std::string tokenizer_text = ReadFileToString(tokenizer_json);
  const std::string config_text =
      fs::exists(config_path) ? ReadFileToString(config_path) : std::string();
  GgufVocab v;
  try {
    v = GgufVocabFromTokenizerJson(tokenizer_text, config_text, tokenizer_json, config.vocab_size);
  } catch (const TokenizerError& e) {
    throw Error(e.what());
  }
  Put(kv, "tokenizer.ggml.model", GgufValue::String(v.model));
  Put(kv, "tokenizer.ggml.pre", GgufValue::String(v.pre));
  Put(kv, "tokenizer.ggml.tokens", GgufValue::StringArray(v.tokens));
  Put(kv, "tokenizer.ggml.token_type", GgufValue::Int32Array(v.token_types));
  Put(kv, "tokenizer.ggml.merges", GgufValue::StringArray(v.merges));
  auto id = [&](const char* key, const std::optional<int64_t>& value) {
    if (value) Put(kv, key, GgufValue::Uint32(static_cast<uint32_t>(*value)));
  };
  id("tokenizer.ggml.bos_token_id", v.bos_id);
  id("tokenizer.ggml.eos_token_id", v.eos_id);
  id("tokenizer.ggml.padding_token_id", v.pad_id);
  id("tokenizer.ggml.unknown_token_id", v.unk_id);
  if (v.add_bos) Put(kv, "tokenizer.ggml.add_bos_token", GgufValue::Bool(*v.add_bos));
  if (v.add_eos) Put(kv, "tokenizer.ggml.add_eos_token", GgufValue::Bool(*v.add_eos));
  if (!v.chat_template.empty())
    Put(kv, "tokenizer.chat_template", GgufValue::String(v.chat_template));
  // A pre-tokenizer llama.cpp has no name for ("default" stands in for it): the exact
  // tokenizer.json too, which mlarun reads in preference.
  if (!v.huggingface_json.empty())
    Put(kv, "tokenizer.huggingface.json", GgufValue::String(v.huggingface_json));
}

bool GgufHasTokenizer(const GgufFile& file) {
  if (file.FindBool(kPlaceholderKey).value_or(false)) return false;
  return file.FindString("tokenizer.huggingface.json") != nullptr ||
         file.FindStringArray("tokenizer.ggml.tokens") != nullptr;
}

TokenizerJsonFiles GgufTokenizerFiles(const GgufFile& file) {
  if (!GgufHasTokenizer(file)) {
    throw Error(file.path() +
                ": has no tokenizer (text commands need one; use --prompt-ids for raw token ids)");
  }
  GgufVocab v;
  v.source = file.path();
  if (const std::string* model = file.FindString("tokenizer.ggml.model")) v.model = *model;
  if (const std::string* pre = file.FindString("tokenizer.ggml.pre")) v.pre = *pre;
  if (const std::string* tmpl = file.FindString("tokenizer.chat_template")) v.chat_template = *tmpl;
  auto id = [&](const char* key) -> std::optional<int64_t> {
    if (const auto value = file.FindUint(key)) return static_cast<int64_t>(*value);
    return std::nullopt;
  };
  v.bos_id = id("tokenizer.ggml.bos_token_id");
  v.eos_id = id("tokenizer.ggml.eos_token_id");
  v.pad_id = id("tokenizer.ggml.padding_token_id");
  v.unk_id = id("tokenizer.ggml.unknown_token_id");
  v.add_bos = file.FindBool("tokenizer.ggml.add_bos_token");
  v.add_eos = file.FindBool("tokenizer.ggml.add_eos_token");
  if (const std::string* hf = file.FindString("tokenizer.huggingface.json"))
    v.huggingface_json = *hf;
  if (const auto* tokens = file.FindStringArray("tokenizer.ggml.tokens")) v.tokens = *tokens;
  if (const auto* merges = file.FindStringArray("tokenizer.ggml.merges")) v.merges = *merges;
  if (const auto types = file.FindIntArray("tokenizer.ggml.token_type")) {
    for (int64_t t : *types) v.token_types.push_back(static_cast<int32_t>(t));
  }
  try {
    return TokenizerJsonFromGgufVocab(v);
  } catch (const TokenizerError& e) {
    throw Error(e.what());
  }
}

}  // namespace mlarun
