// `mlarun chat`: an interactive multi-turn chat on the terminal. The conversation stays in the KV
// cache: each turn prefills only the tokens that are new since the last turn (the rendered chat
// template is re-tokenised and compared with what the cache holds; on a mismatch the cache is cut
// back to the common prefix). Commands: /reset, /exit.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <limits>

#include "cli/common.h"
#include "cli/text_io.h"
#include "core/error.h"
#include "runtime/generator.h"
#include "runtime/text_stream.h"
#include "tokenizer/chat_template.h"

namespace mlarun::cli {

namespace {

struct ChatArgs {
  ModelArgs model;
  KvArgs kv;
  std::string system;
  int max_tokens = 512;
  SamplerOptions sampling{.temperature = 0.7f, .top_p = 0.95f};
};

class ChatSession {
 public:
  ChatSession(const ChatArgs& args, Exec& exec)
      : args_(args),
        exec_(exec),
        model_dir_(ResolveModelDir(args.model.model_dir)),
        model_(LoadModel(args.model, exec.pool, &exec.k)),
        tokenizer_(LoadTokenizer(model_dir_)),
        format_(ChosenChatFormat(tokenizer_, model_->config())),
        cache_(MakeKvCache(*model_, args.kv)) {
    Reset();
  }

  void Reset() {
    if (seq_ >= 0) cache_->RemoveSequence(seq_);
    seq_ = cache_->AddSequence();
    cached_.clear();
    pending_.clear();
    messages_.clear();
    if (!args_.system.empty()) messages_.push_back({"system", args_.system});
  }

  // Runs one user turn and streams the reply to stdout.
  void Turn(const std::string& user_text) {
    const std::string before = Render(/*add_generation_prompt=*/false);
    messages_.push_back({"user", user_text});
    const std::string rendered = Render(/*add_generation_prompt=*/true);
    std::vector<int32_t> delta;
    size_t common = cached_.size();
    if (!cached_.empty() && rendered.starts_with(before)) {
      // The cache holds the conversation as generated; append the last sampled token (and the
      // end-of-turn token the template puts after a reply), then only the new text.
      delta = pending_;
      const std::vector<int32_t> text =
          tokenizer_.Encode(std::string_view(rendered).substr(before.size()), false);
      delta.insert(delta.end(), text.begin(), text.end());
    } else {
      const std::vector<int32_t> full = tokenizer_.Encode(rendered, false);
      common = 0;
      while (common < cached_.size() && common < full.size() && cached_[common] == full[common])
        ++common;
      if (common < cached_.size()) CutCacheTo(common);
      delta.assign(full.begin() + static_cast<std::ptrdiff_t>(cached_.size()), full.end());
    }
    if (delta.empty()) throw Error("chat: nothing new to prefill");
    const int64_t room = model_->config().max_position_embeddings -
                         static_cast<int64_t>(cached_.size() + delta.size());
    if (room <= 0) throw Error("chat: the conversation exceeds the model's context; use /reset");

    TextStream stream(tokenizer_, {});
    GenerateOptions options{
        .max_new_tokens = static_cast<int>(
            args_.max_tokens < 0 ? room : std::min<int64_t>(args_.max_tokens, room)),
        .sampling = args_.sampling};
    options.sampling.seed += static_cast<uint64_t>(turn_);
    options.stop_ids = StopTokenIds(*model_, &tokenizer_);
    options.on_token = [&](int32_t token) {
      bool stopped = false;
      std::fputs(stream.Push(token, &stopped).c_str(), stdout);
      std::fflush(stdout);
      return true;
    };
    const GenerateResult result = Generate(*model_, exec_, *cache_, seq_, delta, options);
    std::fputs(stream.Finish().c_str(), stdout);
    std::printf("\n");
    std::fflush(stdout);
    // The cache now holds the delta and every generated token but the last (never fed back).
    cached_.insert(cached_.end(), delta.begin(), delta.end());
    pending_.clear();
    if (!result.tokens.empty()) {
      cached_.insert(cached_.end(), result.tokens.begin(), result.tokens.end() - 1);
      pending_.push_back(result.tokens.back());
    }
    if (pending_.empty() || pending_.back() != tokenizer_.eos_id())
      pending_.push_back(tokenizer_.eos_id());
    messages_.push_back({"assistant", stream.emitted()});
    ++turn_;
    std::fprintf(
        stderr,
        "[turn %d: prefilled %zu new tokens (%zu cached), generated %zu tokens, %.1f tok/s]\n",
        turn_, delta.size(), common, result.tokens.size(),
        static_cast<double>(result.tokens.size()) /
            std::max(result.decode_seconds + result.prefill_seconds, 1e-9));
  }

 private:
  // Keeps only the first `n` cached tokens (fork of the shared prefix, or a full reset when the
  // policy recycles blocks and forking is impossible).
  void CutCacheTo(size_t n) {
    if (cache_->window() == 0) {
      const int32_t fork = cache_->ForkSequence(seq_, static_cast<int64_t>(n));
      if (fork >= 0) {
        cache_->RemoveSequence(seq_);
        seq_ = fork;
        cached_.resize(n);
        pending_.clear();
        return;
      }
    }
    cache_->RemoveSequence(seq_);
    seq_ = cache_->AddSequence();
    cached_.clear();
    pending_.clear();
  }

  std::string Render(bool add_generation_prompt) const {
    return RenderChat(format_, messages_,
                      {.add_generation_prompt = add_generation_prompt,
                       .bos_token = std::string(tokenizer_.IdToToken(tokenizer_.bos_id())),
                       .eos_token = std::string(tokenizer_.IdToToken(tokenizer_.eos_id()))});
  }

  const ChatArgs& args_;
  Exec& exec_;
  std::string model_dir_;
  std::unique_ptr<Model> model_;
  Tokenizer tokenizer_;
  ChatFormat format_;
  std::unique_ptr<KvCache> cache_;
  int32_t seq_ = -1;
  std::vector<int32_t> cached_;   // exactly the tokens the cache holds for seq_
  std::vector<int32_t> pending_;  // the reply's last token (+ end of turn), not yet in the cache
  std::vector<ChatMessage> messages_;
  int turn_ = 0;
};

int RunChat(const ChatArgs& args) {
  ThreadPool pool(args.model.threads);
  ScratchArena scratch;  // forward-pass temporaries, reused across calls
  Exec exec{pool, SelectKernels(args.model), &scratch};
  ChatSession session(args, exec);
  const bool interactive = isatty(STDIN_FILENO) == 1;
  if (interactive) {
    std::fprintf(stderr,
                 "mlarun chat: type a message; /reset clears the conversation, /exit quits.\n");
  }
  std::string line;
  for (;;) {
    std::printf("> ");
    std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      session.Reset();
      std::fprintf(stderr, "[conversation cleared]\n");
      continue;
    }
    if (line.empty()) continue;
    size_t bad = 0;
    if (!IsValidUtf8(line, &bad)) {
      std::fprintf(stderr, "error: input is not valid UTF-8 (byte %zu); message ignored\n", bad);
      continue;
    }
    session.Turn(line);
  }
  std::printf("\n");
  return 0;
}

}  // namespace

void RegisterChat(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* cmd =
      app.add_subcommand("chat", "Interactive multi-turn chat (history kept in the KV cache)");
  AddModelOptions(*cmd, args->model);
  AddKvOptions(*cmd, args->kv, "bf16");
  cmd->add_option("--system", args->system, "System prompt");
  cmd->add_option("-n,--max-tokens", args->max_tokens,
                  "Max tokens per reply (-1: until the context is full)")
      ->check(CLI::Range(-1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  AddSamplingOptions(*cmd, args->sampling);
  cmd->callback([args, exit_code] { *exit_code = RunChat(*args); });
}

}  // namespace mlarun::cli
