// Routes, server-sent events and the engine thread of `mlarun serve`.
//
// A generation request: an HTTP thread validates the body (openai_api.cc), checks the limits and
// submits an EngineRequest whose callbacks run on the engine thread: each token is detokenized
// (TextStream: whole UTF-8 characters, stop strings held back and cut) into the request's shared
// state, which the HTTP thread waits on and writes out, as one JSON body or as SSE chunks. When a
// client goes away the write fails, the request is cancelled and its KV blocks return to the pool.
#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <ctime>
#include <future>

#include "core/error.h"
#include "runtime/text_stream.h"
#include "server/peer_socket.h"
#include "tokenizer/tokenizer_error.h"

namespace mlarun::server {

namespace {

using Clock = std::chrono::steady_clock;

// What the engine thread hands to the HTTP thread of one request.
struct RequestState {
  std::mutex mutex;
  std::condition_variable changed;
  std::string text;  // produced, not yet sent
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprobs> logprobs;  // per token id, when the request asked for them
  size_t token_ids_sent = 0;
  int64_t text_offset = 0;  // characters of the tokens already sent with log-probabilities
  bool finished = false;
  FinishReason reason = FinishReason::kStop;
  RequestUsage usage;
  std::string error;
  std::atomic<bool> abandoned{false};  // the client is gone
  // Engine thread only.
  std::unique_ptr<TextStream> text_stream;
  bool stop_string_hit = false;
};

std::string DumpJson(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void SendJson(httplib::Response& res, int status, const Json& body) {
  res.status = status;
  res.set_content(DumpJson(body), "application/json");
}

std::string ErrorType(int status) {
  if (status == 401) return "authentication_error";
  if (status == 404) return "not_found_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

}  // namespace

HttpServer::HttpServer(Engine& engine, const ApiContext& context, const ServerOptions& options)
    : engine_(engine), context_(context), options_(options), http_(new httplib::Server) {
  const int threads = std::max(1, options_.http_threads);
  http_->new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_keep_alive_timeout(5);
  // Streamed chunks are small writes; with Nagle's algorithm each waited for the client's delayed
  // ACK (~40 ms on Linux), which dominated time-to-first-token on small models.
  http_->set_tcp_nodelay(true);
  RegisterRoutes();
}

HttpServer::~HttpServer() {
  if (engine_thread_.joinable()) {
    engine_thread_.request_stop();
    engine_.Wake();
  }
}

void HttpServer::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

int HttpServer::Bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
  } else if (!http_->bind_to_port(options_.host, port)) {
    port = -1;
  }
  if (port < 0) {
    throw Error("--host/--port: cannot listen on " + options_.host + ":" +
                std::to_string(options_.port) + " (address in use or not local?)");
  }
  return port;
}

void HttpServer::EngineLoop(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    if (!engine_.Step()) engine_.WaitForWork(std::chrono::milliseconds(100));
  }
}

void HttpServer::Shutdown() {
  std::lock_guard<std::mutex> lock(shutdown_mutex_);
  shutdown_requested_ = true;
  shutdown_cv_.notify_all();
}

void HttpServer::Run() {
  engine_thread_ = std::jthread([this](const std::stop_token& stop) { EngineLoop(stop); });
  std::promise<void> listener_done;
  std::future<void> listener_finished = listener_done.get_future();
  std::thread listener([&] {
    http_->listen_after_bind();
    listener_done.set_value();
  });
  {
    std::unique_lock<std::mutex> lock(shutdown_mutex_);
    shutdown_cv_.wait(lock, [&] { return shutdown_requested_; });
  }
  Log("shutting down: no new requests; waiting up to " +
      std::to_string(options_.shutdown_grace_seconds) + " s for running ones");
  draining_ = true;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options_.shutdown_grace_seconds));
  while (Clock::now() < deadline) {
    const EngineStats stats = engine_.Stats();
    if (stats.running + stats.waiting == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  http_->stop();
  // Cancel whatever still runs (again and again: a handler may submit while we stop) until every
  // HTTP thread has returned.
  while (listener_finished.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
    engine_.CancelAll();
  }
  listener.join();
  engine_thread_.request_stop();
  engine_.Wake();
  engine_thread_.join();
  engine_.FlushPrefixCache();  // this thread owns the engine now
  Log("stopped");
}

void HttpServer::RegisterRoutes() {
  using httplib::Request;
  using httplib::Response;
  // Wraps a handler: counts requests and turns exceptions into OpenAI-shaped errors.
  auto wrap = [this](std::function<void(const Request&, Response&)> handler) {
    return [this, handler = std::move(handler)](const Request& req, Response& res) {
      ++http_requests_;
      try {
        handler(req, res);
      } catch (const ApiError& e) {
        SendJson(res, e.status(), e.ToJson());
      } catch (const TokenizerError& e) {
        SendJson(res, 400, ApiError(400, e.what()).ToJson());
      } catch (const std::exception& e) {
        SendJson(res, 500, ApiError(500, e.what(), {}, "server_error").ToJson());
      }
      if (res.status >= 400) ++http_errors_;
    };
  };

  auto generate = [this](const Request& req, Response& res, const std::string& body, ApiKind kind) {
    if (draining_) throw ApiError(503, "the server is shutting down", {}, "server_error");
    const GenerationRequest g = ParseGenerationRequest(body, kind, context_);
    const std::string limit =
        engine_.CheckLimits(static_cast<int64_t>(g.prompt.size()), g.max_tokens);
    if (!limit.empty()) {
      throw ApiError(400, limit, kind == ApiKind::kChat ? "messages" : "prompt",
                     "invalid_request_error", "context_length_exceeded");
    }
    auto state = std::make_shared<RequestState>();
    if (context_.tokenizer != nullptr) {
      state->text_stream = std::make_unique<TextStream>(*context_.tokenizer, g.stop);
    }
    const std::string prefix = kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-";
    const int64_t created = static_cast<int64_t>(std::time(nullptr));
    EngineRequest request{.prompt = g.prompt,
                          .max_tokens = g.max_tokens,
                          .sampling = g.sampling,
                          .stop_ids = g.stop_ids,
                          .logprobs = g.logprobs};
    request.on_token = [state](int32_t token, const TokenLogprobs* logprobs) {
      if (state->abandoned) return false;
      bool stopped = false;
      std::string text;
      if (state->text_stream) text = state->text_stream->Push(token, &stopped);
      state->stop_string_hit = stopped;
      std::lock_guard<std::mutex> lock(state->mutex);
      state->text += text;
      state->token_ids.push_back(token);
      if (logprobs != nullptr) state->logprobs.push_back(*logprobs);
      state->changed.notify_all();
      return !stopped;
    };
    auto log = options_.log;
    request.on_finish = [state, log](FinishReason reason, const RequestUsage& usage,
                                     const std::string& error) {
      std::string tail;
      if (state->text_stream && !state->stop_string_hit &&
          (reason == FinishReason::kStop || reason == FinishReason::kLength)) {
        tail = state->text_stream->Finish();
      }
      {
        std::lock_guard<std::mutex> lock(state->mutex);
        state->text += tail;
        state->finished = true;
        state->reason = reason;
        state->usage = usage;
        state->error = error;
        state->changed.notify_all();
      }
      if (log) {
        char line[256];
        std::snprintf(line, sizeof(line),
                      "request done: %s, %lld prompt (%lld cached) + %lld completion tokens, "
                      "queue %.0f ms, first token %.0f ms, total %.0f ms%s%s",
                      std::string(FinishReasonName(reason)).c_str(),
                      static_cast<long long>(usage.prompt_tokens),
                      static_cast<long long>(usage.cached_tokens),
                      static_cast<long long>(usage.completion_tokens), usage.queue_seconds * 1e3,
                      usage.first_token_seconds * 1e3, usage.total_seconds * 1e3,
                      error.empty() ? "" : ": ", error.c_str());
        log(line);
      }
    };
    const RequestId id = engine_.Submit(std::move(request));
    const std::string name = prefix + std::to_string(id);
    const std::string model = context_.model_id;

    if (!g.stream) {
      // Nothing is written until the end, so a client that gives up is noticed by peeking at its
      // socket while waiting; its request is then cancelled and its KV blocks freed.
      const int peer = FindPeerSocket(req.remote_addr, req.remote_port);
      bool client_gone = false;
      std::unique_lock<std::mutex> lock(state->mutex);
      while (!state->changed.wait_for(lock, std::chrono::milliseconds(100),
                                      [&] { return state->finished; })) {
        if (!client_gone && peer >= 0 && PeerClosed(peer)) {
          client_gone = true;
          lock.unlock();
          engine_.Cancel(id);
          lock.lock();
        }
      }
      if (client_gone) return;  // nobody is left to answer
      if (state->reason == FinishReason::kError) {
        throw ApiError(500, "generation failed: " + state->error, {}, "server_error");
      }
      if (state->reason == FinishReason::kCancelled) {
        throw ApiError(503, "the request was cancelled (server shutting down)", {}, "server_error");
      }
      Json body = CompletionResponse(kind, name, created, model, state->text,
                                     std::string(FinishReasonName(state->reason)), state->usage);
      if (g.return_token_ids) body["choices"][0]["token_ids"] = state->token_ids;
      if (g.logprobs >= 0) {
        body["choices"][0]["logprobs"] = LogprobsJson(kind, context_.tokenizer, state->token_ids,
                                                      state->logprobs, &state->text_offset);
      }
      SendJson(res, 200, body);
      return;
    }

    res.set_header("Cache-Control", "no-cache");
    auto first = std::make_shared<bool>(true);
    Engine* engine = &engine_;
    res.set_chunked_content_provider(
        "text/event-stream",
        [state, first, kind, name, created, model, g, tokenizer = context_.tokenizer](
            size_t, httplib::DataSink& sink) {
          auto send = [&](const Json& json) {
            const std::string event = "data: " + DumpJson(json) + "\n\n";
            return sink.write(event.data(), event.size());
          };
          std::string text;
          std::vector<int32_t> ids;
          std::vector<TokenLogprobs> logprobs;
          bool finished = false;
          {
            std::unique_lock<std::mutex> lock(state->mutex);
            state->changed.wait_for(lock, std::chrono::milliseconds(500),
                                    [&] { return !state->text.empty() || state->finished; });
            text.swap(state->text);
            const auto sent = static_cast<std::ptrdiff_t>(state->token_ids_sent);
            ids.assign(state->token_ids.begin() + sent, state->token_ids.end());
            if (g.logprobs >= 0) {
              logprobs.assign(state->logprobs.begin() + sent, state->logprobs.end());
            }
            state->token_ids_sent = state->token_ids.size();
            finished = state->finished;
          }
          if (!text.empty() || ((g.return_token_ids || g.logprobs >= 0) && !ids.empty())) {
            Json chunk = StreamChunk(kind, name, created, model, text, "", *first);
            if (g.return_token_ids) chunk["choices"][0]["token_ids"] = ids;
            if (g.logprobs >= 0) {
              chunk["choices"][0]["logprobs"] =
                  LogprobsJson(kind, tokenizer, ids, logprobs, &state->text_offset);
            }
            *first = false;
            if (!send(chunk)) {
              state->abandoned = true;
              return false;
            }
          } else if (!finished && !sink.is_writable()) {
            state->abandoned = true;
            return false;
          }
          if (!finished) return true;
          bool ok = true;
          if (state->reason == FinishReason::kError || state->reason == FinishReason::kCancelled) {
            const ApiError error =
                state->reason == FinishReason::kError
                    ? ApiError(500, "generation failed: " + state->error, {}, "server_error")
                    : ApiError(503, "the request was cancelled (server shutting down)", {},
                               "server_error");
            ok = send(error.ToJson());
          } else {
            ok = send(StreamChunk(kind, name, created, model, "",
                                  std::string(FinishReasonName(state->reason)), *first));
            if (ok && g.include_usage)
              ok = send(UsageChunk(kind, name, created, model, state->usage));
          }
          static constexpr char kDone[] = "data: [DONE]\n\n";
          if (ok) ok = sink.write(kDone, sizeof(kDone) - 1);
          if (ok) sink.done();
          return ok;
        },
        [state, engine, id](bool /*success*/) {
          bool finished = false;
          {
            std::lock_guard<std::mutex> lock(state->mutex);
            finished = state->finished;
          }
          if (!finished) {
            state->abandoned = true;
            engine->Cancel(id);
          }
        });
  };

  // POST routes read their body through a ContentReader so the size cap also holds for chunked
  // bodies (httplib enforces it only for Content-Length).
  auto post = [this, wrap](const std::string& route,
                           std::function<void(const Request&, Response&, const std::string&)> fn) {
    const size_t cap = options_.max_body_bytes;
    http_->Post(route, [wrap, fn, cap](const Request& req, Response& res,
                                       const httplib::ContentReader& reader) {
      std::string body;
      bool too_big =
          req.has_header("Content-Length") &&
          std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) > cap;
      const bool read = !too_big && reader([&](const char* data, size_t length) {
        if (body.size() + length > cap) {
          too_big = true;
          return false;
        }
        body.append(data, length);
        return true;
      });
      wrap([&](const Request& r, Response& out) {
        if (too_big) {
          out.set_header("Connection", "close");
          throw ApiError(413, "the request body is larger than " + std::to_string(cap) +
                                  " bytes (--max-body)");
        }
        if (!read) throw ApiError(400, "the request body could not be read");
        fn(r, out, body);
      })(req, res);
    });
  };
  post("/v1/completions", [generate](const Request& req, Response& res, const std::string& body) {
    generate(req, res, body, ApiKind::kCompletion);
  });
  post("/v1/chat/completions",
       [generate](const Request& req, Response& res, const std::string& body) {
         generate(req, res, body, ApiKind::kChat);
       });
  post("/tokenize", [this](const Request&, Response& res, const std::string& body) {
    SendJson(res, 200, Tokenize(body, context_));
  });
  post("/detokenize", [this](const Request&, Response& res, const std::string& body) {
    SendJson(res, 200, Detokenize(body, context_));
  });
  http_->Get("/v1/models", wrap([this](const Request&, Response& res) {
               const Json model = {{"id", context_.model_id},
                                   {"object", "model"},
                                   {"created", 0},
                                   {"owned_by", "mlarun"},
                                   {"max_model_len", context_.max_context}};
               SendJson(res, 200, {{"object", "list"}, {"data", Json::array({model})}});
             }));
  http_->Get("/health", wrap([this](const Request&, Response& res) {
               const EngineStats s = engine_.Stats();
               SendJson(res, draining_ ? 503 : 200,
                        {{"status", draining_ ? "shutting_down" : "ok"},
                         {"running", s.running},
                         {"waiting", s.waiting},
                         {"kv_blocks_total", s.kv_blocks_total},
                         {"kv_blocks_used", s.kv_blocks_used},
                         {"kv_blocks_cached", s.kv_blocks_cached},
                         {"kv_blocks_free", s.kv_blocks_free}});
             }));
  http_->Get("/metrics", wrap([this](const Request&, Response& res) {
               const HttpCounters http{.http_requests = http_requests_,
                                       .http_errors = http_errors_};
               res.set_content(RenderMetrics(engine_.Stats(), http),
                               "text/plain; version=0.0.4; charset=utf-8");
             }));
  // Bodies for errors httplib produces itself (unknown route, body too large, bad request line).
  http_->set_error_handler([this](const Request& req, Response& res) {
    if (!res.body.empty()) return;
    std::string message = "HTTP error " + std::to_string(res.status);
    if (res.status == 400) message = "malformed HTTP request";
    if (res.status == 404) message = "no route for " + req.method + " " + req.path;
    if (res.status == 413) {
      message = "the request body is larger than " + std::to_string(options_.max_body_bytes) +
                " bytes (--max-body)";
    }
    ++http_errors_;
    res.set_content(DumpJson(ApiError(res.status, message, {}, ErrorType(res.status)).ToJson()),
                    "application/json");
  });
}

}  // namespace mlarun::server
