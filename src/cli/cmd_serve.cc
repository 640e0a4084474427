// `mlarun serve`: loads the model, tokenizer and KV cache, builds the engine and serves the
// OpenAI-compatible HTTP API until SIGINT/SIGTERM, then shuts down gracefully.
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <optional>
#include <thread>

#include "cli/common.h"
#include "cli/text_io.h"
#include "core/error.h"
#include "model/gguf_model.h"
#include "model/gguf_tokenizer.h"
#include "runtime/engine.h"
#include "runtime/generator.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer_error.h"

namespace mlarun::cli {

namespace {

struct ServeArgs {
  ModelArgs model;
  KvArgs kv;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string model_name;  // id in /v1/models; default: the directory name
  std::string tokenizer_dir;
  int64_t max_context = 0;
  int max_running = 64;
  int prefill_chunk = 256;
  int max_prefill_tokens = 512;
  std::string prefill_attention = "auto";
  bool no_prefix_cache = false;
  std::string prefix_cache_dir;
  std::string prefix_cache_disk_budget = "10GiB";
  int http_threads = 64;
  std::string max_body = "4MiB";
  double shutdown_grace = 5.0;
  int warmup_tokens = -1;  // -1: max_prefill_tokens
};

void LogLine(const std::string& line) {
  char stamp[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
  std::fprintf(stderr, "[%s] %s\n", stamp, line.c_str());
}

// Runs one prefill of `tokens` tokens (the largest prefill step) and two decode steps on a
// temporary sequence, before the engine exists, so the first real request does not pay for memory
// touched for the first time: the scratch arena, the threads' buffers, the KV blocks and, with
// mapped files, weight pages never read yet (a 1,000-token prompt on the bench model took 0.2-0.3 s
// more without it with copied weights, 0.4-0.9 s with mapped ones: docs/server.md). Leaves no trace
// in the cache or the engine's counters; a failure only skips it.
void WarmUp(const Model& model, Exec& exec, KvCache& cache, int tokens) {
  const auto start = std::chrono::steady_clock::now();
  const int32_t seq = cache.AddSequence();
  try {
    // Spread-out ids, so the routed experts of every layer see tokens (all their code paths).
    std::vector<int32_t> prompt(static_cast<size_t>(tokens));
    const int64_t vocab = model.config().vocab_size;
    for (int i = 0; i < tokens; ++i)
      prompt[static_cast<size_t>(i)] = static_cast<int32_t>((int64_t{i} * 7919 + 13) % vocab);
    Generate(model, exec, cache, seq, prompt, {.max_new_tokens = 2, .prefill_chunk = tokens});
    LogLine("warm-up: " + std::to_string(tokens) + "-token prefill and 2 decode steps in " +
            std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count()) +
            " ms");
  } catch (const Error& e) {
    LogLine(std::string("warm-up skipped: ") + e.what());
  }
  cache.RemoveSequence(seq);
}

int RunServe(const ServeArgs& args) {
  // Options that need no model are checked before the load (seconds to minutes).
  const uint64_t max_body_bytes = ParseByteSize(args.max_body, "--max-body");
  if (max_body_bytes == 0) throw Error("--max-body: 0 bytes would refuse every request");
  // Block SIGINT/SIGTERM in every thread (all are created below); one thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a vanished client must not kill the server

  ThreadPool pool(args.model.threads);
  ScratchArena scratch;  // forward-pass temporaries, reused across calls
  Exec exec{pool, SelectKernels(args.model), &scratch};
  const std::string model_dir = ResolveModelDir(args.model.model_dir);
  const std::unique_ptr<Model> model = LoadModel(args.model, pool, &exec.k);
  CheckWithinContext(*model, args.max_context, "--max-context");
  const std::unique_ptr<KvCache> cache = MakeKvCache(*model, args.kv);

  std::optional<Tokenizer> tokenizer;
  const std::string tokenizer_dir = args.tokenizer_dir.empty() ? model_dir : args.tokenizer_dir;
  if (std::filesystem::exists(std::filesystem::path(tokenizer_dir) / "tokenizer.json") ||
      (IsGgufFile(tokenizer_dir) && GgufHasTokenizer(GgufFile::Open(tokenizer_dir)))) {
    tokenizer.emplace(LoadTokenizer(tokenizer_dir));
  } else if (!args.tokenizer_dir.empty()) {
    throw Error("--tokenizer: no tokenizer.json in " + args.tokenizer_dir);
  } else {
    LogLine("warning: no tokenizer in " + model_dir +
            "; only token-id prompts are served (use --tokenizer DIR)");
  }

  EngineOptions options{.prefill_chunk = args.prefill_chunk,
                        .max_prefill_tokens = args.max_prefill_tokens,
                        .prefill_mla = ParseMlaPath(args.prefill_attention, "--prefill-attention"),
                        .max_running = args.max_running,
                        .max_context = args.max_context,
                        .prefix_caching = !args.no_prefix_cache,
                        .log = LogLine};
  if (options.prefix_caching && cache->window() != 0) {
    LogLine("prefix caching is off: it needs --kv-policy full");
    options.prefix_caching = false;
  }
  options.fingerprint = FingerprintModel(model_dir, *cache);
  if (!args.prefix_cache_dir.empty()) {
    if (!options.prefix_caching)
      throw Error("--prefix-cache-dir needs prefix caching (--kv-policy full)");
    options.disk_cache = DiskCacheOptions{
        .dir = args.prefix_cache_dir,
        .budget_bytes = ParseByteSize(args.prefix_cache_disk_budget, "--prefix-cache-disk-budget")};
  }
  int64_t warmup_tokens = args.warmup_tokens < 0 ? args.max_prefill_tokens : args.warmup_tokens;
  // Room for the 2 decoded tokens within the context.
  warmup_tokens = std::min(warmup_tokens, model->config().max_position_embeddings - 2);
  if (args.max_context > 0) warmup_tokens = std::min(warmup_tokens, args.max_context - 2);
  if (warmup_tokens > 0) WarmUp(*model, exec, *cache, static_cast<int>(warmup_tokens));
  Engine engine(*model, exec, *cache, options);

  server::ApiContext context{.tokenizer = tokenizer ? &*tokenizer : nullptr,
                             .model_id = args.model_name,
                             .vocab_size = model->config().vocab_size,
                             .max_context = engine.max_context(),
                             .max_sequence_tokens = engine.max_sequence_tokens()};
  if (context.model_id.empty()) {
    context.model_id = std::filesystem::path(model_dir).lexically_normal().filename().string();
    if (context.model_id.empty()) context.model_id = "mlarun";
  }
  for (int64_t id : model->config().eos_token_ids)
    context.eos_ids.push_back(static_cast<int32_t>(id));
  if (tokenizer) {
    context.chat_format = ChosenChatFormat(*tokenizer, model->config());
    if (tokenizer->eos_id() >= 0 && std::find(context.eos_ids.begin(), context.eos_ids.end(),
                                              tokenizer->eos_id()) == context.eos_ids.end()) {
      context.eos_ids.push_back(tokenizer->eos_id());
    }
  }

  server::HttpServer http(engine, context,
                          {.host = args.host,
                           .port = args.port,
                           .http_threads = args.http_threads,
                           .max_body_bytes = max_body_bytes,
                           .shutdown_grace_seconds = args.shutdown_grace,
                           .log = LogLine});
  const int port = http.Bind();
  const EngineStats stats = engine.Stats();
  LogLine("serving " + context.model_id + " on http://" + args.host + ":" + std::to_string(port) +
          " (" + std::to_string(stats.kv_blocks_total) + " KV blocks of " +
          std::to_string(stats.kv_block_size) + " tokens, context " +
          std::to_string(engine.max_context()) + ", prefix cache " +
          (options.prefix_caching ? (options.disk_cache ? "memory + disk" : "memory") : "off") +
          ", " + std::to_string(pool.size()) + " threads)");
  std::printf("listening on %s:%d\n", args.host.c_str(), port);
  std::fflush(stdout);

  std::thread signal_thread([&] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    if (signal_number == SIGINT || signal_number == SIGTERM) {
      LogLine(std::string("received ") + (signal_number == SIGINT ? "SIGINT" : "SIGTERM"));
    }
    http.Shutdown();
  });
  http.Run();
  // Wakes sigwait (SIGTERM is blocked in every thread, so it is taken there, not delivered);
  // a no-op if the thread already returned.
  // NOLINTNEXTLINE(bugprone-bad-signal-to-kill-thread)
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
  return 0;
}

}  // namespace

void RegisterServe(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve an OpenAI-compatible HTTP API");
  args->model.load = "copy";  // long-running: a read of the weights at start buys faster decode
  AddModelOptions(*cmd, args->model);
  AddKvOptions(*cmd, args->kv, "bf16");
  cmd->add_option("--host", args->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", args->port, "Port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->add_option("--model-name", args->model_name,
                  "Model id reported by /v1/models (default: the directory name)");
  cmd->add_option("--tokenizer", args->tokenizer_dir,
                  "Directory with tokenizer.json (default: the model directory)");
  cmd->add_option("--max-context", args->max_context,
                  "Tokens per request, prompt + output (0: max_position_embeddings)")
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()))
      ->capture_default_str();
  cmd->add_option("--max-running", args->max_running, "Requests decoded together at most")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--prefill-chunk", args->prefill_chunk, "Prefill chunk size (positions)")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--max-prefill-tokens", args->max_prefill_tokens,
                  "Prefill tokens per step (at least --prefill-chunk)")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--prefill-attention", args->prefill_attention,
                  "MLA path of prefill chunks: auto (per chunk, the one with fewer multiply-adds), "
                  "naive (results bitwise independent of prefix-cache hits) or absorbed")
      ->capture_default_str();
  cmd->add_flag("--no-prefix-cache", args->no_prefix_cache, "Disable prefix caching");
  cmd->add_option("--prefix-cache-dir", args->prefix_cache_dir,
                  "Directory for evicted prefix blocks (survives restarts)");
  cmd->add_option("--prefix-cache-disk-budget", args->prefix_cache_disk_budget,
                  "Size cap of --prefix-cache-dir")
      ->capture_default_str();
  cmd->add_option("--warmup-tokens", args->warmup_tokens,
                  "Prefill this many dummy tokens at start so the first request finds its memory "
                  "ready (-1: --max-prefill-tokens; 0: no warm-up)")
      ->check(CLI::Range(-1, 1 << 30))
      ->capture_default_str();
  cmd->add_option("--http-threads", args->http_threads, "HTTP worker threads (one per open stream)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--max-body", args->max_body, "Largest request body")->capture_default_str();
  cmd->add_option("--shutdown-grace", args->shutdown_grace,
                  "Seconds running requests may finish on SIGINT/SIGTERM")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  cmd->callback([args, exit_code] { *exit_code = RunServe(*args); });
}

}  // namespace mlarun::cli
