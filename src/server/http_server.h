// The HTTP front end of `mlarun serve` (cpp-httplib): OpenAI-compatible routes, server-sent
// events for streaming, /health, /metrics, /tokenize, /detokenize; and the engine thread that owns
// the model and the KV cache. HTTP threads only submit requests and read their results.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/engine.h"
#include "server/metrics.h"
#include "server/openai_api.h"

namespace httplib {
class Server;
}

namespace mlarun::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                      // 0: any free port (see Bind)
  int http_threads = 64;                // concurrent connections served (streams hold one each)
  size_t max_body_bytes = 4u << 20;     // larger bodies get 413
  double shutdown_grace_seconds = 5.0;  // in-flight requests may finish within this on shutdown
  std::function<void(const std::string&)> log;
};

class HttpServer {
 public:
  // `engine` must outlive the server; the server's engine thread becomes its owner thread.
  HttpServer(Engine& engine, const ApiContext& context, const ServerOptions& options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket and returns the port. Throws Error naming --host/--port.
  int Bind();
  // Serves until Shutdown(); then stops accepting, lets in-flight requests finish within the
  // grace period, cancels the rest and stops the engine thread. Call after Bind.
  void Run();
  // Starts the graceful shutdown. Thread-safe, idempotent.
  void Shutdown();

 private:
  struct Route;
  void RegisterRoutes();
  void EngineLoop(const std::stop_token& stop);
  void Log(const std::string& line) const;

  Engine& engine_;
  ApiContext context_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::jthread engine_thread_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> http_requests_{0};
  std::atomic<int64_t> http_errors_{0};
  std::mutex shutdown_mutex_;
  std::condition_variable shutdown_cv_;
  bool shutdown_requested_ = false;
};

}  // namespace mlarun::server
