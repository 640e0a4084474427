// The OpenAI-compatible API surface as data: request bodies (JSON) -> validated engine requests,
// engine results -> response and stream-chunk JSON, and errors in OpenAI's shape
// `{"error": {"message", "type", "param", "code"}}`. No I/O here (http_server.cc does that).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/sampler.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mlarun::server {

using Json = nlohmann::ordered_json;

// A request the server rejects: HTTP status plus OpenAI's error fields.
class ApiError : public std::exception {
 public:
  ApiError(int status, std::string message, std::string param = {},
           std::string type = "invalid_request_error", std::string code = {});
  const char* what() const noexcept override { return message_.c_str(); }
  int status() const { return status_; }
  // Returns `{"error": {"message", "type", "param", "code"}}` (param / code null when empty).
  Json ToJson() const;

 private:
  int status_;
  std::string message_;
  std::string param_;
  std::string type_;
  std::string code_;
};

enum class ApiKind { kCompletion, kChat };

// What the server knows when it validates a request.
struct ApiContext {
  const Tokenizer* tokenizer = nullptr;  // null: only token-id prompts work
  ChatFormat chat_format = ChatFormat::kChatMl;
  std::string model_id;
  int64_t vocab_size = 0;
  int64_t max_context = 0;
  int64_t max_sequence_tokens = INT64_MAX;  // what the KV budget holds for one request
  std::vector<int32_t> eos_ids;             // model and tokenizer EOS ids
};

// A validated generation request.
struct GenerationRequest {
  ApiKind kind = ApiKind::kCompletion;
  std::vector<int32_t> prompt;
  int64_t max_tokens = 16;
  SamplerOptions sampling;
  std::vector<std::string> stop;  // stop strings (excluded from the output)
  std::vector<int32_t> stop_ids;  // EOS unless ignore_eos
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool return_token_ids = false;  // extension: choices carry "token_ids"
  int logprobs = -1;  // >= 0: choices carry log-probabilities with this many top tokens each
};

// The largest number of top tokens per position a request may ask for (as OpenAI's chat API).
inline constexpr int kMaxTopLogprobs = 20;

// Parses and validates a /v1/completions or /v1/chat/completions body. Throws ApiError (400 for
// malformed JSON, wrong types, unknown or unsupported fields, n > 1, bad ranges and prompts that
// do not fit the context length).
GenerationRequest ParseGenerationRequest(const std::string& body, ApiKind kind,
                                         const ApiContext& context);

// Parses a JSON object body or throws ApiError 400.
Json ParseJsonObject(const std::string& body);

// Returns the `usage` object (with prompt_tokens_details.cached_tokens).
Json UsageJson(const RequestUsage& usage);
// Returns a non-streaming response body.
Json CompletionResponse(ApiKind kind, const std::string& id, int64_t created,
                        const std::string& model, const std::string& text,
                        const std::string& finish_reason, const RequestUsage& usage);
// Returns one stream chunk. `text` is the new text; `finish_reason` empty while running. For chat,
// `first` adds the assistant role to the delta.
Json StreamChunk(ApiKind kind, const std::string& id, int64_t created, const std::string& model,
                 const std::string& text, const std::string& finish_reason, bool first);
// Returns a choice's `logprobs` for the tokens `ids` and their log-probabilities, in OpenAI's
// shapes: completions {"tokens", "token_logprobs", "top_logprobs" (objects token -> logprob),
// "text_offset"}, chat {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
// A token is the text of the bytes it decodes to (read lossily: bytes that are not UTF-8 become
// U+FFFD; the chat entries' "bytes" keep them), or "token_id:N" without a tokenizer.
// Completions: `*text_offset` counts the characters (code points) of the tokens before these,
// as "text_offset" does (advanced past them; chat has no offsets and leaves it). -inf is
// reported as -9999, as vLLM does.
Json LogprobsJson(ApiKind kind, const Tokenizer* tokenizer, std::span<const int32_t> ids,
                  std::span<const TokenLogprobs> logprobs, int64_t* text_offset);
// Returns the final usage-only chunk (stream_options.include_usage).
Json UsageChunk(ApiKind kind, const std::string& id, int64_t created, const std::string& model,
                const RequestUsage& usage);

// POST /tokenize: {"prompt": str | "messages": [...], "add_special_tokens": bool} ->
// {"tokens", "count", "max_model_len"}.
Json Tokenize(const std::string& body, const ApiContext& context);
// POST /detokenize: {"tokens": [int]} -> {"prompt": str}.
Json Detokenize(const std::string& body, const ApiContext& context);

}  // namespace mlarun::server
