// Implements `Tokenizer` (loading and the encode/decode pipeline) and `StreamDecoder`. The
// pipeline follows Hugging Face tokenizers' `TokenizerImpl::encode_single_sequence`: added tokens
// (non-normalized ones on raw text, normalized ones after normalization), pre-tokenization, BPE.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_spec.h"
#include "tokenizer/utf8.h"

namespace mlarun {
namespace {

// Well-known bos/eos spellings, used only when there is no tokenizer_config.json.
constexpr std::string_view kBosCandidates[] = {"<｜begin▁of▁sentence｜>", "<|begin_of_text|>",
                                               "<s>", "<bos>", "<|startoftext|>"};
constexpr std::string_view kEosCandidates[] = {"<｜end▁of▁sentence｜>", "<|end_of_text|>", "</s>",
                                               "<eos>", "<|endoftext|>"};

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw TokenizerError(path.string() + ": cannot open file");
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) {
    throw TokenizerError(path.string() + ": read error");
  }
  return std::move(contents).str();
}

// Per-call buffers for `Encode`.
struct EncodeScratch {
  detail::PreTokenizerScratch pre;
  detail::BpeScratch bpe;
  std::vector<detail::TextSegment> raw_segments;
  std::vector<detail::TextSegment> normalized_segments;
  std::vector<std::string_view> pieces;
};

}  // namespace

struct Tokenizer::Impl {
  explicit Impl(const detail::TokenizerSpec& spec)
      : source(spec.source),
        bpe(spec.bpe, spec.byte_level.present, alphabet, spec.source),
        normalizer(spec.normalizers),
        pretokenizer(spec.splits, spec.byte_level),
        byte_level_decoder(spec.byte_level_decoder),
        add_bos_token(spec.add_bos_token.value_or(false)),
        chat_template(spec.chat_template) {}

  // Assigns added-token ids the way tokenizers' `AddedVocabulary::add_tokens` does and checks
  // them against the file; builds the two matchers.
  void AddTokens(const std::vector<detail::AddedTokenSpec>& tokens, int32_t model_vocab_length);
  // Fills `pieces` and `piece_offsets` with what each id decodes to.
  void BuildPieces();
  int32_t ResolveSpecial(const std::string& configured, std::span<const std::string_view> fallbacks,
                         const char* field) const;
  void EncodePlain(std::string_view text, detail::BpeCache* cache, EncodeScratch* scratch,
                   std::vector<int32_t>* ids) const;
  // True for ids of the vocab or the added tokens (ids in gaps decode to nothing).
  bool IsKnown(int32_t id) const {
    return id >= 0 && id < vocab_size && (id_flags[id] & kKnownId) != 0;
  }
  bool IsSpecialId(int32_t id) const { return IsKnown(id) && (id_flags[id] & kSpecialId) != 0; }
  // The bytes `id` decodes to. PRECONDITIONS: `0 <= id < vocab_size`.
  std::string_view Piece(int32_t id) const {
    return std::string_view(pieces).substr(piece_offsets[id],
                                           piece_offsets[id + 1] - piece_offsets[id]);
  }

  static constexpr uint8_t kKnownId = 1;
  static constexpr uint8_t kSpecialId = 2;

  std::string source;         // tokenizer.json, for error messages
  std::string config_source;  // tokenizer_config.json, for error messages
  detail::ByteLevelAlphabet alphabet;
  detail::BpeModel bpe;
  detail::Normalizer normalizer;
  detail::PreTokenizer pretokenizer;
  detail::AddedTokenMatcher raw_matcher;            // added tokens with normalized == false
  detail::AddedTokenMatcher normalized_matcher;     // added tokens with normalized == true
  std::vector<detail::AddedTokenSpec> added;        // with final ids
  std::unordered_map<int32_t, size_t> added_index;  // id -> index into `added`
  std::unordered_map<std::string, int32_t> added_by_content;
  std::string pieces;                   // decoded bytes of every id, concatenated
  std::vector<uint32_t> piece_offsets;  // [vocab_size + 1]
  std::vector<uint8_t> id_flags;        // [vocab_size], kKnownId | kSpecialId
  int32_t vocab_size = 0;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  bool byte_level_decoder = false;
  bool add_bos_token = false;
  std::string chat_template;
  std::mutex cache_mutex;
  detail::BpeCache cache;  // guarded by `cache_mutex`
};

void Tokenizer::Impl::AddTokens(const std::vector<detail::AddedTokenSpec>& tokens,
                                int32_t model_vocab_length) {
  int32_t max_id = -1;
  std::vector<detail::AddedTokenSpec> raw;
  std::vector<detail::AddedTokenSpec> normalized;
  for (size_t i = 0; i < tokens.size(); ++i) {
    detail::AddedTokenSpec token = tokens[i];
    int32_t id = 0;
    if (const auto it = added_by_content.find(token.content); it != added_by_content.end()) {
      id = it->second;
    } else if (const auto vocab_id = bpe.TokenToId(token.content)) {
      id = *vocab_id;
    } else {
      id = (max_id >= model_vocab_length || model_vocab_length == 0) ? max_id + 1
                                                                     : model_vocab_length;
    }
    if (id != token.id) {
      throw TokenizerError(source + ": added_tokens[" + std::to_string(i) + "].id: is " +
                           std::to_string(token.id) + " but Hugging Face tokenizers assigns " +
                           std::to_string(id) + " to '" + token.content +
                           "' (its vocab id, else the next id after the vocab)");
    }
    max_id = std::max(max_id, id);
    if (added_by_content.count(token.content) != 0) {
      continue;
    }
    added_by_content.emplace(token.content, id);
    added_index.emplace(id, added.size());
    added.push_back(token);
    if (!token.normalized) {
      raw.push_back(token);
      continue;
    }
    // tokenizers matches a normalized token by its normalized content, in normalized text
    // (`AddedVocabulary::refresh_added_tokens` normalizes the patterns of `split_normalized_trie`).
    if (!normalizer.IsIdentity()) {
      detail::RegexScratch scratch;
      token.content = normalizer.Apply(token.content, &scratch);
    }
    if (!token.content.empty()) {
      normalized.push_back(token);
    }
  }
  raw_matcher = detail::AddedTokenMatcher(raw);
  normalized_matcher = detail::AddedTokenMatcher(normalized);
  vocab_size = std::max(bpe.id_limit(), max_id + 1);
}

void Tokenizer::Impl::BuildPieces() {
  piece_offsets.assign(static_cast<size_t>(vocab_size) + 1, 0);
  id_flags.assign(static_cast<size_t>(vocab_size), 0);
  for (int32_t id = 0; id < vocab_size; ++id) {
    piece_offsets[id] = static_cast<uint32_t>(pieces.size());
    std::string_view token;
    if (const auto it = added_index.find(id); it != added_index.end()) {
      token = added[it->second].content;
      id_flags[id] = kKnownId | (added[it->second].special ? kSpecialId : 0);
    } else if (bpe.HasId(id)) {
      token = bpe.IdToToken(id);
      id_flags[id] = kKnownId;
    } else {
      continue;  // a gap in the ids: decodes to nothing
    }
    // tokenizers' ByteLevel decoder maps a token back to bytes when every character is in the
    // byte alphabet and otherwise keeps it as is; added tokens go through the decoder too.
    std::optional<std::string> bytes;
    if (byte_level_decoder) {
      bytes = alphabet.Decode(token);
    }
    pieces.append(bytes ? std::string_view(*bytes) : token);
  }
  piece_offsets[vocab_size] = static_cast<uint32_t>(pieces.size());
}

int32_t Tokenizer::Impl::ResolveSpecial(const std::string& configured,
                                        std::span<const std::string_view> fallbacks,
                                        const char* field) const {
  auto find = [&](std::string_view content) -> int32_t {
    if (const auto it = added_by_content.find(std::string(content)); it != added_by_content.end()) {
      return it->second;
    }
    return bpe.TokenToId(content).value_or(-1);
  };
  if (!configured.empty()) {
    const int32_t id = find(configured);
    if (id < 0) {
      throw TokenizerError(config_source + ": " + std::string(field) + ": '" + configured +
                           "' is not a token of " + source);
    }
    return id;
  }
  for (const std::string_view candidate : fallbacks) {
    if (const auto it = added_by_content.find(std::string(candidate));
        it != added_by_content.end() && added[added_index.at(it->second)].special) {
      return it->second;
    }
  }
  return -1;
}

void Tokenizer::Impl::EncodePlain(std::string_view text, detail::BpeCache* cache,
                                  EncodeScratch* scratch, std::vector<int32_t>* ids) const {
  scratch->pieces.clear();
  pretokenizer.Split(text, &scratch->pre, &scratch->pieces);
  for (const std::string_view piece : scratch->pieces) {
    bpe.Tokenize(piece, cache, &scratch->bpe, ids);
  }
  scratch->pre.owned.clear();
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&& other) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&& other) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::FromDirectory(const std::filesystem::path& dir) {
  return FromFile(dir / "tokenizer.json");
}

Tokenizer Tokenizer::FromFile(const std::filesystem::path& tokenizer_json) {
  const std::string json = ReadFile(tokenizer_json);
  const std::filesystem::path config_path = tokenizer_json.parent_path() / "tokenizer_config.json";
  std::string config;
  if (std::filesystem::exists(config_path)) {
    config = ReadFile(config_path);
  }
  return FromJson(json, config, tokenizer_json.string());
}

Tokenizer Tokenizer::FromJson(std::string_view tokenizer_json, std::string_view config_json,
                              std::string_view source) {
  detail::TokenizerSpec spec = detail::ParseTokenizerJson(tokenizer_json, source);
  const std::string config_source =
      (std::filesystem::path(source).parent_path() / "tokenizer_config.json").string();
  if (!config_json.empty()) {
    detail::ParseTokenizerConfigJson(config_json, config_source, &spec);
  }
  auto impl = std::make_unique<Impl>(spec);
  impl->config_source = config_source;
  impl->AddTokens(spec.added_tokens, static_cast<int32_t>(spec.bpe.vocab.size()));
  impl->BuildPieces();
  impl->bos_id = impl->ResolveSpecial(spec.bos_token, kBosCandidates, "bos_token");
  impl->eos_id = impl->ResolveSpecial(spec.eos_token, kEosCandidates, "eos_token");
  return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special_bos) const {
  return Encode(text, EncodeOptions{.add_bos = add_special_bos});
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  Impl& impl = *impl_;
  std::string replaced;
  if (options.invalid_utf8 == InvalidUtf8::kReplace && !detail::IsValidUtf8(text)) {
    replaced = detail::ReplaceInvalidUtf8(text);
    text = replaced;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (options.add_bos) {
    if (impl.bos_id < 0) {
      throw TokenizerError(impl.source + ": no bos token to add");
    }
    ids.push_back(impl.bos_id);
  }
  EncodeScratch scratch;
  // One lock per call; a concurrent call encodes without the cache rather than wait.
  std::unique_lock<std::mutex> lock(impl.cache_mutex, std::try_to_lock);
  detail::BpeCache* cache = lock.owns_lock() ? &impl.cache : nullptr;
  scratch.raw_segments.clear();
  if (impl.raw_matcher.IsEmpty()) {
    scratch.raw_segments.push_back({0, text.size(), -1});
  } else {
    impl.raw_matcher.Split(text, &scratch.pre.regex, &scratch.raw_segments);
  }
  for (const detail::TextSegment& segment : scratch.raw_segments) {
    if (segment.token_id >= 0) {
      ids.push_back(segment.token_id);
      continue;
    }
    std::string_view plain = text.substr(segment.begin, segment.end - segment.begin);
    std::string normalized;
    if (!impl.normalizer.IsIdentity()) {
      normalized = impl.normalizer.Apply(plain, &scratch.pre.regex);
      plain = normalized;
    }
    if (impl.normalized_matcher.IsEmpty()) {
      impl.EncodePlain(plain, cache, &scratch, &ids);
      continue;
    }
    scratch.normalized_segments.clear();
    impl.normalized_matcher.Split(plain, &scratch.pre.regex, &scratch.normalized_segments);
    for (const detail::TextSegment& inner : scratch.normalized_segments) {
      if (inner.token_id >= 0) {
        ids.push_back(inner.token_id);
      } else {
        impl.EncodePlain(plain.substr(inner.begin, inner.end - inner.begin), cache, &scratch, &ids);
      }
    }
  }
  return ids;
}

std::string LossyUtf8(std::string_view bytes) { return detail::ReplaceInvalidUtf8(bytes); }

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string text;
  bool first = true;
  for (const int32_t id : ids) {
    if (!impl_->IsKnown(id) || (skip_special && impl_->IsSpecialId(id))) {
      continue;
    }
    if (!impl_->byte_level_decoder && !first) {
      text.push_back(' ');  // tokenizers joins with ' '
    }
    text.append(TokenToPiece(id));
    first = false;
  }
  return text;
}

std::string_view Tokenizer::TokenToPiece(int32_t id) const {
  if (id < 0 || id >= impl_->vocab_size) {
    return {};
  }
  return impl_->Piece(id);
}

std::string_view Tokenizer::IdToToken(int32_t id) const {
  if (const auto it = impl_->added_index.find(id); it != impl_->added_index.end()) {
    return impl_->added[it->second].content;
  }
  if (impl_->bpe.HasId(id)) {
    return impl_->bpe.IdToToken(id);
  }
  return {};
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  if (const auto it = impl_->added_by_content.find(std::string(token));
      it != impl_->added_by_content.end()) {
    return it->second;
  }
  return impl_->bpe.TokenToId(token);
}

int32_t Tokenizer::bos_id() const { return impl_->bos_id; }
int32_t Tokenizer::eos_id() const { return impl_->eos_id; }
int32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
bool Tokenizer::add_bos_token() const { return impl_->add_bos_token; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

bool Tokenizer::IsSpecial(int32_t id) const { return impl_->IsSpecialId(id); }

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : impl_(tokenizer.impl_.get()), skip_special_(skip_special) {}

std::string StreamDecoder::Feed(int32_t id) {
  const Tokenizer::Impl& impl = *impl_;
  if (!impl.IsKnown(id) || (skip_special_ && impl.IsSpecialId(id))) {
    return {};
  }
  if (!impl.byte_level_decoder && !first_) {
    pending_.push_back(' ');  // as in `Decode`
  }
  first_ = false;
  pending_.append(impl.Piece(id));
  const size_t ready = detail::EmittablePrefixLength(pending_);
  std::string text = detail::ReplaceInvalidUtf8(std::string_view(pending_).substr(0, ready));
  pending_.erase(0, ready);
  return text;
}

std::string StreamDecoder::Flush() {
  std::string text = detail::ReplaceInvalidUtf8(pending_);
  pending_.clear();
  first_ = true;
  return text;
}

}  // namespace mlarun
