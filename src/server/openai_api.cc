// Request validation and response shapes of the OpenAI API (platform.openai.com/docs/api-reference:
// completions, chat, the chunk objects of streaming and the error object). Extensions, as in vLLM:
// top_k, min_p, repetition_penalty, ignore_eos; /tokenize and /detokenize follow vLLM's shapes.
#include "server/openai_api.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "tokenizer/tokenizer_error.h"

namespace mlarun::server {

namespace {

// Fields each endpoint accepts; anything else is rejected as OpenAI does.
const std::set<std::string> kCommonFields = {"model",
                                             "max_tokens",
                                             "temperature",
                                             "top_p",
                                             "top_k",
                                             "min_p",
                                             "seed",
                                             "presence_penalty",
                                             "frequency_penalty",
                                             "repetition_penalty",
                                             "stop",
                                             "n",
                                             "stream",
                                             "stream_options",
                                             "user",
                                             "logprobs",
                                             "logit_bias",
                                             "ignore_eos",
                                             "return_token_ids"};
const std::set<std::string> kCompletionFields = {"prompt", "echo", "best_of", "suffix"};
const std::set<std::string> kChatFields = {
    "messages",    "max_completion_tokens", "top_logprobs",       "tools",
    "tool_choice", "response_format",       "parallel_tool_calls"};

std::string TypeName(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

[[noreturn]] void Invalid(const std::string& param, const std::string& message) {
  throw ApiError(400, message, param);
}

// Returns the field or null when absent or JSON null.
const Json* Find(const Json& body, const std::string& name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double GetNumber(const Json& body, const std::string& name, double fallback, double min,
                 double max) {
  const Json* v = Find(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number()) Invalid(name, "'" + name + "' must be a number, got " + TypeName(*v));
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < min || x > max) {
    Invalid(name, "'" + name + "' must be between " + Json(min).dump() + " and " +
                      Json(max).dump() + ", got " + v->dump());
  }
  return x;
}

int64_t GetInt(const Json& body, const std::string& name, int64_t fallback, int64_t min,
               int64_t max) {
  const Json* v = Find(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer() && !v->is_number_unsigned()) {
    Invalid(name, "'" + name + "' must be an integer, got " + TypeName(*v));
  }
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
    Invalid(name, "'" + name + "' is too large");
  }
  const int64_t x = v->get<int64_t>();
  if (x < min || x > max) {
    Invalid(name, "'" + name + "' must be between " + std::to_string(min) + " and " +
                      std::to_string(max) + ", got " + std::to_string(x));
  }
  return x;
}

bool GetBool(const Json& body, const std::string& name, bool fallback) {
  const Json* v = Find(body, name);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) Invalid(name, "'" + name + "' must be a boolean, got " + TypeName(*v));
  return v->get<bool>();
}

std::vector<int32_t> TokenIds(const Json& array, const std::string& param, int64_t vocab) {
  std::vector<int32_t> ids;
  for (const Json& v : array) {
    if (!v.is_number_integer() && !v.is_number_unsigned()) {
      Invalid(param, "'" + param + "' must hold integer token ids, got " + TypeName(v));
    }
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id >= vocab) {
      Invalid(param, "token id " + std::to_string(id) + " in '" + param +
                         "' is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

const Tokenizer& NeedTokenizer(const ApiContext& context, const std::string& param) {
  if (context.tokenizer == nullptr) {
    Invalid(param,
            "this server has no tokenizer (no tokenizer.json in the model directory); "
            "send token ids");
  }
  return *context.tokenizer;
}

std::vector<int32_t> EncodePrompt(const Json& prompt, const ApiContext& context) {
  if (prompt.is_string()) {
    const Tokenizer& tokenizer = NeedTokenizer(context, "prompt");
    return tokenizer.Encode(prompt.get<std::string>(), tokenizer.add_bos_token());
  }
  if (prompt.is_array()) {
    if (prompt.size() == 1 && (prompt[0].is_string() || prompt[0].is_array())) {
      return EncodePrompt(prompt[0], context);
    }
    if (!prompt.empty() && (prompt[0].is_string() || prompt[0].is_array())) {
      Invalid("prompt", "batched prompts are not supported: send one prompt per request");
    }
    return TokenIds(prompt, "prompt", context.vocab_size);
  }
  Invalid("prompt", "'prompt' must be a string or an array of token ids, got " + TypeName(prompt));
}

std::vector<ChatMessage> ParseMessages(const Json& body) {
  const Json* messages = Find(body, "messages");
  if (messages == nullptr) Invalid("messages", "'messages' is required");
  if (!messages->is_array() || messages->empty()) {
    Invalid("messages", "'messages' must be a non-empty array");
  }
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string param = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) Invalid(param, "'" + param + "' must be an object");
    const Json* role = Find(m, "role");
    if (role == nullptr || !role->is_string()) {
      Invalid(param + ".role", "'" + param + ".role' must be a string");
    }
    ChatMessage message{.role = role->get<std::string>()};
    const Json* content = Find(m, "content");
    if (content == nullptr) {
      message.content = "";
    } else if (content->is_string()) {
      message.content = content->get<std::string>();
    } else if (content->is_array()) {
      for (const Json& part : *content) {
        const Json* type = part.is_object() ? Find(part, "type") : nullptr;
        const Json* text = part.is_object() ? Find(part, "text") : nullptr;
        if (type == nullptr || *type != "text" || text == nullptr || !text->is_string()) {
          Invalid(param + ".content",
                  "only text content parts ({\"type\": \"text\", \"text\": ...}) "
                  "are supported");
        }
        message.content += text->get<std::string>();
      }
    } else {
      Invalid(param + ".content", "'" + param + ".content' must be a string or an array of parts");
    }
    out.push_back(std::move(message));
  }
  return out;
}

std::vector<int32_t> EncodeChat(const Json& body, const ApiContext& context) {
  const std::vector<ChatMessage> messages = ParseMessages(body);
  const Tokenizer& tokenizer = NeedTokenizer(context, "messages");
  ChatTemplateOptions options{.add_generation_prompt = true};
  options.bos_token =
      tokenizer.bos_id() >= 0 ? std::string(tokenizer.IdToToken(tokenizer.bos_id())) : "";
  options.eos_token =
      tokenizer.eos_id() >= 0 ? std::string(tokenizer.IdToToken(tokenizer.eos_id())) : "";
  std::string text;
  try {
    text = RenderChat(context.chat_format, messages, options);
  } catch (const TokenizerError& e) {
    Invalid("messages", e.what());
  }
  return tokenizer.Encode(text, false);
}

void RejectUnsupported(const Json& body) {
  if (GetBool(body, "echo", false)) Invalid("echo", "'echo' is not supported");
  if (GetInt(body, "best_of", 1, 1, 1) != 1) Invalid("best_of", "'best_of' must be 1");
  if (const Json* v = Find(body, "suffix"); v != nullptr && !(v->is_string() && v->empty())) {
    Invalid("suffix", "'suffix' is not supported");
  }
  if (const Json* v = Find(body, "logit_bias"); v != nullptr && !(v->is_object() && v->empty())) {
    Invalid("logit_bias", "'logit_bias' is not supported");
  }
  if (const Json* v = Find(body, "tools"); v != nullptr && !(v->is_array() && v->empty())) {
    Invalid("tools", "'tools' (function calling) is not supported");
  }
  if (const Json* v = Find(body, "response_format");
      v != nullptr && !(v->is_object() && v->value("type", "text") == "text")) {
    Invalid("response_format", "only {\"type\": \"text\"} is supported for 'response_format'");
  }
  if (const Json* v = Find(body, "user"); v != nullptr && !v->is_string()) {
    Invalid("user", "'user' must be a string, got " + TypeName(*v));
  }
  if (const Json* v = Find(body, "model"); v != nullptr && !v->is_string()) {
    Invalid("model", "'model' must be a string, got " + TypeName(*v));
  }
}

// The number of most likely tokens to report with each token's log-probability, or -1 for none.
// Completions: `logprobs` is that number (false: none); chat: `logprobs` is a boolean and
// `top_logprobs` the number, allowed only with `logprobs: true`.
int ParseLogprobs(const Json& body, ApiKind kind) {
  if (kind == ApiKind::kCompletion) {
    if (const Json* v = Find(body, "logprobs"); v != nullptr && v->is_boolean() && !v->get<bool>())
      return -1;
    return static_cast<int>(GetInt(body, "logprobs", -1, 0, kMaxTopLogprobs));
  }
  const bool on = GetBool(body, "logprobs", false);
  if (!on && Find(body, "top_logprobs") != nullptr) {
    Invalid("top_logprobs", "'top_logprobs' requires 'logprobs': true");
  }
  return on ? static_cast<int>(GetInt(body, "top_logprobs", 0, 0, kMaxTopLogprobs)) : -1;
}

std::vector<std::string> ParseStop(const Json& body) {
  const Json* v = Find(body, "stop");
  std::vector<std::string> stop;
  if (v == nullptr) return stop;
  if (v->is_string()) {
    stop.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const Json& s : *v) {
      if (!s.is_string()) Invalid("stop", "'stop' must be a string or an array of strings");
      stop.push_back(s.get<std::string>());
    }
  } else {
    Invalid("stop", "'stop' must be a string or an array of strings, got " + TypeName(*v));
  }
  if (stop.size() > 4) Invalid("stop", "'stop' holds at most 4 sequences");
  for (const std::string& s : stop) {
    if (s.empty()) Invalid("stop", "stop sequences must not be empty");
  }
  return stop;
}

}  // namespace

ApiError::ApiError(int status, std::string message, std::string param, std::string type,
                   std::string code)
    : status_(status),
      message_(std::move(message)),
      param_(std::move(param)),
      type_(std::move(type)),
      code_(std::move(code)) {}

Json ApiError::ToJson() const {
  Json error = {{"message", message_}, {"type", type_}, {"param", nullptr}, {"code", nullptr}};
  if (!param_.empty()) error["param"] = param_;
  if (!code_.empty()) error["code"] = code_;
  return {{"error", error}};
}

Json ParseJsonObject(const std::string& body) {
  Json json;
  try {
    json = Json::parse(body);
  } catch (const Json::parse_error& e) {
    throw ApiError(400, std::string("the body is not valid JSON: ") + e.what());
  }
  if (!json.is_object())
    throw ApiError(400, "the body must be a JSON object, got " + TypeName(json));
  return json;
}

GenerationRequest ParseGenerationRequest(const std::string& text, ApiKind kind,
                                         const ApiContext& context) {
  const Json body = ParseJsonObject(text);
  const std::set<std::string>& own = kind == ApiKind::kChat ? kChatFields : kCompletionFields;
  for (const auto& [key, value] : body.items()) {
    if (kCommonFields.count(key) == 0 && own.count(key) == 0) {
      Invalid(key, "unrecognized request argument supplied: " + key);
    }
  }
  RejectUnsupported(body);
  GenerationRequest r{.kind = kind};
  if (GetInt(body, "n", 1, 1, INT32_MAX) != 1)
    Invalid("n", "'n' must be 1 (one choice per request)");
  r.stream = GetBool(body, "stream", false);
  if (const Json* options = Find(body, "stream_options"); options != nullptr) {
    if (!options->is_object()) Invalid("stream_options", "'stream_options' must be an object");
    if (!r.stream) Invalid("stream_options", "'stream_options' is only allowed with stream: true");
    r.include_usage = GetBool(*options, "include_usage", false);
  }
  SamplerOptions& s = r.sampling;
  s.temperature = static_cast<float>(GetNumber(body, "temperature", 1.0, 0.0, 2.0));
  s.top_p = static_cast<float>(GetNumber(body, "top_p", 1.0, 0.0, 1.0));
  if (s.top_p <= 0.0f) Invalid("top_p", "'top_p' must be greater than 0");
  const int64_t top_k = GetInt(body, "top_k", 0, -1, INT32_MAX);
  s.top_k = top_k < 0 ? 0 : static_cast<int>(top_k);
  s.min_p = static_cast<float>(GetNumber(body, "min_p", 0.0, 0.0, 1.0));
  s.presence_penalty = static_cast<float>(GetNumber(body, "presence_penalty", 0.0, -2.0, 2.0));
  s.frequency_penalty = static_cast<float>(GetNumber(body, "frequency_penalty", 0.0, -2.0, 2.0));
  s.repetition_penalty =
      static_cast<float>(GetNumber(body, "repetition_penalty", 1.0, 0.01, 100.0));
  s.seed = static_cast<uint64_t>(GetInt(body, "seed", 0, INT64_MIN, INT64_MAX));
  r.stop = ParseStop(body);
  if (!GetBool(body, "ignore_eos", false)) r.stop_ids = context.eos_ids;
  r.return_token_ids = GetBool(body, "return_token_ids", false);
  r.logprobs = ParseLogprobs(body, kind);

  if (kind == ApiKind::kChat) {
    r.prompt = EncodeChat(body, context);
  } else {
    const Json* prompt = Find(body, "prompt");
    if (prompt == nullptr) Invalid("prompt", "'prompt' is required");
    r.prompt = EncodePrompt(*prompt, context);
  }
  if (r.prompt.empty())
    Invalid(kind == ApiKind::kChat ? "messages" : "prompt", "the prompt is empty");
  const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
  const std::string max_name =
      kind == ApiKind::kChat && Find(body, "max_completion_tokens") != nullptr
          ? "max_completion_tokens"
          : "max_tokens";
  const int64_t room =
      std::max<int64_t>(1, std::min(context.max_context, context.max_sequence_tokens) - n_prompt);
  r.max_tokens = GetInt(body, max_name, kind == ApiKind::kChat ? room : 16, 1, INT32_MAX);
  return r;
}

Json UsageJson(const RequestUsage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

Json CompletionResponse(ApiKind kind, const std::string& id, int64_t created,
                        const std::string& model, const std::string& text,
                        const std::string& finish_reason, const RequestUsage& usage) {
  Json choice = {{"index", 0}};
  if (kind == ApiKind::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason;
  return {{"id", id},
          {"object", kind == ApiKind::kChat ? "chat.completion" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", Json::array({choice})},
          {"usage", UsageJson(usage)}};
}

Json StreamChunk(ApiKind kind, const std::string& id, int64_t created, const std::string& model,
                 const std::string& text, const std::string& finish_reason, bool first) {
  Json choice = {{"index", 0}};
  if (kind == ApiKind::kChat) {
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && finish_reason.empty())) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason.empty() ? Json(nullptr) : Json(finish_reason);
  return {{"id", id},
          {"object", kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", Json::array({choice})}};
}

Json UsageChunk(ApiKind kind, const std::string& id, int64_t created, const std::string& model,
                const RequestUsage& usage) {
  return {{"id", id},
          {"object", kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", Json::array()},
          {"usage", UsageJson(usage)}};
}

Json LogprobsJson(ApiKind kind, const Tokenizer* tokenizer, std::span<const int32_t> ids,
                  std::span<const TokenLogprobs> logprobs, int64_t* text_offset) {
  // A token's bytes (chat "bytes") and its text: the bytes read as UTF-8, lossily.
  auto piece = [tokenizer](int32_t id) {
    return tokenizer != nullptr ? std::string(tokenizer->TokenToPiece(id))
                                : "token_id:" + std::to_string(id);
  };
  auto characters = [](const std::string& text) {  // code points of valid UTF-8
    return static_cast<int64_t>(
        std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xc0) != 0x80; }));
  };
  auto value = [](float logprob) { return std::max(logprob, -9999.0f); };  // as vLLM: no -inf
  auto bytes = [](const std::string& text) {
    Json out = Json::array();
    for (const char c : text) out.push_back(static_cast<unsigned char>(c));
    return out;
  };
  const size_t n = std::min(ids.size(), logprobs.size());
  if (kind == ApiKind::kChat) {
    Json content = Json::array();
    for (size_t i = 0; i < n; ++i) {
      const std::string token = piece(ids[i]);
      Json top = Json::array();
      for (const TopLogprob& t : logprobs[i].top) {
        const std::string raw = piece(t.token);
        top.push_back(
            {{"token", LossyUtf8(raw)}, {"logprob", value(t.logprob)}, {"bytes", bytes(raw)}});
      }
      content.push_back({{"token", LossyUtf8(token)},
                         {"logprob", value(logprobs[i].logprob)},
                         {"bytes", bytes(token)},
                         {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  Json tokens = Json::array(), token_logprobs = Json::array(), top = Json::array();
  Json offsets = Json::array();
  for (size_t i = 0; i < n; ++i) {
    const std::string token = LossyUtf8(piece(ids[i]));
    tokens.push_back(token);
    token_logprobs.push_back(value(logprobs[i].logprob));
    Json alternatives = Json::object();
    for (const TopLogprob& t : logprobs[i].top) {
      alternatives[LossyUtf8(piece(t.token))] = value(t.logprob);
    }
    top.push_back(alternatives);
    offsets.push_back(*text_offset);
    *text_offset += characters(token);
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

Json Tokenize(const std::string& text, const ApiContext& context) {
  const Json body = ParseJsonObject(text);
  for (const auto& [key, value] : body.items()) {
    if (key != "prompt" && key != "messages" && key != "add_special_tokens" && key != "model") {
      Invalid(key, "unrecognized request argument supplied: " + key);
    }
  }
  std::vector<int32_t> ids;
  if (Find(body, "messages") != nullptr) {
    ids = EncodeChat(body, context);
  } else {
    const Json* prompt = Find(body, "prompt");
    if (prompt == nullptr || !prompt->is_string()) {
      Invalid("prompt", "'prompt' (a string) or 'messages' is required");
    }
    const Tokenizer& tokenizer = NeedTokenizer(context, "prompt");
    const bool special = GetBool(body, "add_special_tokens", true);
    ids = tokenizer.Encode(prompt->get<std::string>(), special && tokenizer.add_bos_token());
  }
  return {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", context.max_context}};
}

Json Detokenize(const std::string& text, const ApiContext& context) {
  const Json body = ParseJsonObject(text);
  for (const auto& [key, value] : body.items()) {
    if (key != "tokens" && key != "model") {
      Invalid(key, "unrecognized request argument supplied: " + key);
    }
  }
  const Json* tokens = Find(body, "tokens");
  if (tokens == nullptr || !tokens->is_array()) {
    Invalid("tokens", "'tokens' (an array of token ids) is required");
  }
  const std::vector<int32_t> ids = TokenIds(*tokens, "tokens", context.vocab_size);
  // JSON strings must be valid UTF-8: the stream decoder's lossy reading of the bytes.
  StreamDecoder decoder(NeedTokenizer(context, "tokens"));
  std::string out;
  for (int32_t id : ids) out += decoder.Feed(id);
  out += decoder.Flush();
  return {{"prompt", out}};
}

}  // namespace mlarun::server
