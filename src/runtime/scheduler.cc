// Continuous batching. A step: admit queued requests (FIFO) while the KV pool can hold their
// prompts; reserve one row for every decoding sequence (evicting unreferenced prefix blocks, then
// preempting the newest sequence when the pool is out); schedule whole prefill chunks up to the
// step's token budget; run one absorbed-MLA pass over all decode tokens and one pass over the
// prefill chunks (each chunk's MLA path chosen from that chunk alone, EngineOptions::prefill_mla).
// Each sequence's numbers are therefore independent of the others: decode is always one absorbed
// token, prefill chunk ends lie on a fixed position grid, and the kernels are batch-invariant per
// token (docs/architecture.md).
#include "runtime/scheduler.h"

#include <algorithm>
#include <exception>

#include "core/check.h"
#include "core/error.h"

namespace mlarun {

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

struct Scheduler::Sequence {
  RequestId id = 0;
  EngineRequest request;
  std::vector<int32_t> tokens;  // prompt, then sampled tokens
  int64_t n_prompt = 0;
  int32_t kv = -1;  // KvCache handle while admitted, else -1
  bool admitted_once = false;
  uint64_t admission = 0;  // larger = newer
  std::unique_ptr<Sampler> sampler;
  RequestUsage usage;
  Clock::time_point submitted;
  bool cancel = false;

  int64_t n_generated() const { return static_cast<int64_t>(tokens.size()) - n_prompt; }
  std::span<const int32_t> generated() const {
    return std::span<const int32_t>(tokens).subspan(static_cast<size_t>(n_prompt));
  }
};

Scheduler::Scheduler(const Model& model, Exec& exec, KvCache& cache, PrefixCache* prefix,
                     const EngineOptions& options, int64_t max_context)
    : model_(model),
      exec_(exec),
      cache_(cache),
      prefix_(prefix),
      options_(options),
      max_context_(max_context),
      vocab_(model.config().vocab_size) {
  options_.prefill_chunk = std::max(1, options_.prefill_chunk);
  options_.max_prefill_tokens = std::max(options_.prefill_chunk, options_.max_prefill_tokens);
  options_.max_running = std::max(1, options_.max_running);
}

Scheduler::~Scheduler() = default;

void Scheduler::Add(RequestId id, EngineRequest request, Clock::time_point submitted) {
  auto s = std::make_unique<Sequence>();
  s->id = id;
  s->tokens = request.prompt;
  s->n_prompt = static_cast<int64_t>(request.prompt.size());
  s->sampler = std::make_unique<Sampler>(request.sampling);
  s->request = std::move(request);
  s->request.prompt.clear();
  s->request.prompt.shrink_to_fit();
  s->usage.prompt_tokens = s->n_prompt;
  s->submitted = submitted;
  waiting_.push_back(s.get());
  sequences_.emplace(id, std::move(s));
}

void Scheduler::Cancel(RequestId id) {
  const auto it = sequences_.find(id);
  if (it != sequences_.end()) it->second->cancel = true;
}

void Scheduler::CancelAll() {
  for (auto& [id, s] : sequences_) s->cancel = true;
}

int64_t Scheduler::PrefillTarget(const Sequence& s) {
  const int64_t n = static_cast<int64_t>(s.tokens.size());
  return s.n_generated() == 0 ? n : n - 1;
}

bool Scheduler::IsDecoding(const Sequence& s) const {
  return s.kv >= 0 && s.n_generated() > 0 &&
         cache_.Length(s.kv) == static_cast<int64_t>(s.tokens.size()) - 1;
}

bool Scheduler::TryAdmit(Sequence* s) {
  const int64_t block = cache_.pool().block_size();
  const int64_t target = PrefillTarget(*s);
  // Blocks the admitted-but-unfinished prefills still need, and what this one needs (+1 to start
  // decoding); prefix hits only make it cheaper.
  int64_t promised = 0;
  for (const Sequence* r : running_) {
    if (!IsDecoding(*r)) {
      promised += CeilDiv(PrefillTarget(*r) + 1, block) - CeilDiv(cache_.Length(r->kv), block);
    }
  }
  const int64_t need = CeilDiv(target + 1, block);
  const int64_t available =
      cache_.pool().FreeBlocks() + (prefix_ != nullptr ? prefix_->EvictableBlocks() : 0) - promised;
  if (need > available && !running_.empty()) return false;

  int64_t cached = 0;
  int32_t kv = -1;
  if (prefix_ != nullptr) {
    kv = prefix_->StartSequence(
        std::span<const int32_t>(s->tokens).first(static_cast<size_t>(target)), &cached);
  } else {
    kv = cache_.AddSequence();
  }
  if (kv < 0) return false;
  s->kv = kv;
  s->admission = next_admission_++;
  if (!s->admitted_once) {
    s->admitted_once = true;
    s->usage.cached_tokens = cached;
    s->usage.queue_seconds = Seconds(s->submitted, Clock::now());
    prompt_tokens_ += s->n_prompt;
  }
  running_.push_back(s);
  return true;
}

void Scheduler::Admit() {
  while (!waiting_.empty() && static_cast<int>(running_.size()) < options_.max_running) {
    Sequence* s = waiting_.front();
    if (!TryAdmit(s)) break;
    waiting_.pop_front();
  }
}

bool Scheduler::ReserveWithEviction(Sequence* s, int64_t n) {
  if (cache_.Reserve(s->kv, n)) return true;
  if (prefix_ == nullptr) return false;
  const int64_t block = cache_.pool().block_size();
  const int64_t need = CeilDiv(cache_.Length(s->kv) + n, block) -
                       static_cast<int64_t>(cache_.SequenceBlocks(s->kv).size());
  prefix_->EnsureFree(need);
  return cache_.Reserve(s->kv, n);
}

std::vector<Scheduler::Sequence*> Scheduler::ScheduleDecode() {
  std::vector<Sequence*> decode;
  const std::vector<Sequence*> order = running_;
  for (Sequence* s : order) {
    if (s->kv < 0 || !IsDecoding(*s)) continue;
    bool ok = true;
    while (!ReserveWithEviction(s, 1)) {
      Sequence* victim = running_.back();
      Preempt(victim);
      if (victim == s) {
        ok = false;
        break;
      }
    }
    if (ok) decode.push_back(s);
  }
  return decode;
}

std::vector<Scheduler::Chunk> Scheduler::SchedulePrefill() {
  std::vector<Chunk> chunks;
  int64_t budget = options_.max_prefill_tokens;
  for (Sequence* s : running_) {
    if (IsDecoding(*s)) continue;
    const int64_t begin = cache_.Length(s->kv);
    const int64_t target = PrefillTarget(*s);
    const int64_t grid_end = (begin / options_.prefill_chunk + 1) * options_.prefill_chunk;
    const int64_t end = std::min(target, grid_end);
    if (end - begin > budget) break;
    if (!ReserveWithEviction(s, end - begin)) break;
    chunks.push_back({.seq = s,
                      .begin = begin,
                      .end = end,
                      .want_logits = end == target && s->n_generated() == 0});
    budget -= end - begin;
  }
  return chunks;
}

bool Scheduler::Step() {
  for (auto it = sequences_.begin(); it != sequences_.end();) {
    Sequence* s = (it++)->second.get();
    if (s->cancel) Finish(s, FinishReason::kCancelled);
  }
  Admit();
  std::vector<Sequence*> decode = ScheduleDecode();
  std::vector<Chunk> prefill = SchedulePrefill();
  if (decode.empty() && prefill.empty()) {
    if (running_.size() > 1) {
      Preempt(running_.back());  // make room for the older ones
    } else if (!running_.empty()) {
      Finish(running_.front(), FinishReason::kError,
             "the KV cache cannot hold this request (raise --kv-budget)");
    } else if (!waiting_.empty()) {
      Finish(waiting_.front(), FinishReason::kError,
             "the KV cache cannot hold this request (raise --kv-budget)");
    }
    return !Idle();
  }
  ++steps_;
  RunDecode(decode);
  RunPrefill(prefill);
  return !Idle();
}

void Scheduler::RunDecode(const std::vector<Sequence*>& decode) {
  if (decode.empty()) return;
  batch_.clear();
  for (const Sequence* s : decode) {
    batch_.push_back({.token = s->tokens.back(),
                      .seq = s->kv,
                      .pos = static_cast<int64_t>(s->tokens.size()) - 1,
                      .want_logits = true});
  }
  logits_.resize(decode.size() * static_cast<size_t>(vocab_));
  const Clock::time_point start = Clock::now();
  try {
    model_.Forward(exec_, cache_, batch_, {.mla_path = MlaPath::kAbsorbed}, logits_.data());
  } catch (const std::exception& e) {
    for (Sequence* s : decode) Finish(s, FinishReason::kError, e.what());
    return;
  }
  decode_seconds_ += Seconds(start, Clock::now());
  decode_tokens_ += static_cast<int64_t>(decode.size());
  for (size_t i = 0; i < decode.size(); ++i) {
    Accept(decode[i], std::span<float>(logits_.data() + i * static_cast<size_t>(vocab_),
                                       static_cast<size_t>(vocab_)));
  }
}

void Scheduler::RunPrefill(const std::vector<Chunk>& chunks) {
  if (chunks.empty()) return;
  batch_.clear();
  size_t n_logits = 0;
  for (const Chunk& c : chunks) {
    for (int64_t pos = c.begin; pos < c.end; ++pos) {
      const bool want = c.want_logits && pos == c.end - 1;
      batch_.push_back({.token = c.seq->tokens[static_cast<size_t>(pos)],
                        .seq = c.seq->kv,
                        .pos = pos,
                        .want_logits = want});
      n_logits += want ? 1 : 0;
    }
  }
  logits_.resize(std::max<size_t>(n_logits, 1) * static_cast<size_t>(vocab_));
  const Clock::time_point start = Clock::now();
  try {
    model_.Forward(exec_, cache_, batch_, {.mla_path = options_.prefill_mla}, logits_.data());
  } catch (const std::exception& e) {
    for (const Chunk& c : chunks) Finish(c.seq, FinishReason::kError, e.what());
    return;
  }
  prefill_seconds_ += Seconds(start, Clock::now());
  prefill_tokens_ += static_cast<int64_t>(batch_.size());
  size_t row = 0;
  for (const Chunk& c : chunks) {
    if (prefix_ != nullptr) prefix_->Insert(c.seq->kv, c.seq->tokens);
    if (!c.want_logits) continue;
    Accept(c.seq, std::span<float>(logits_.data() + row * static_cast<size_t>(vocab_),
                                   static_cast<size_t>(vocab_)));
    ++row;
  }
}

void Scheduler::Accept(Sequence* s, std::span<float> logits) {
  int32_t token = 0;
  const bool want_logprobs = s->request.logprobs >= 0;
  if (want_logprobs) raw_logits_.assign(logits.begin(), logits.end());  // Sample edits logits
  try {
    token = s->sampler->Sample(logits, s->generated());
  } catch (const Error& e) {  // NaN logits: this request fails, the others go on
    Finish(s, FinishReason::kError, e.what());
    return;
  }
  TokenLogprobs logprobs;
  if (want_logprobs) logprobs = ComputeLogprobs(raw_logits_, token, s->request.logprobs);
  s->tokens.push_back(token);
  ++completion_tokens_;
  if (s->n_generated() == 1) s->usage.first_token_seconds = Seconds(s->submitted, Clock::now());
  const auto& stops = s->request.stop_ids;
  // A stop token is not passed to on_token; on_token returning false stops the request too.
  if (std::find(stops.begin(), stops.end(), token) != stops.end() ||
      (s->request.on_token &&
       !s->request.on_token(token, want_logprobs ? &logprobs : nullptr))) {
    Finish(s, FinishReason::kStop);
  } else if (s->n_generated() >= s->request.max_tokens ||
             static_cast<int64_t>(s->tokens.size()) >= max_context_) {
    Finish(s, FinishReason::kLength);
  }
}

void Scheduler::RemoveRunning(Sequence* s) {
  running_.erase(std::remove(running_.begin(), running_.end(), s), running_.end());
}

void Scheduler::Preempt(Sequence* s) {
  MLARUN_CHECK(s->kv >= 0);
  // Keep its computed blocks findable: the recomputation then starts from the prefix cache.
  if (prefix_ != nullptr) prefix_->Insert(s->kv, s->tokens);
  cache_.RemoveSequence(s->kv);
  s->kv = -1;
  ++s->usage.preemptions;
  ++preemptions_;
  RemoveRunning(s);
  waiting_.push_front(s);
}

void Scheduler::Finish(Sequence* s, FinishReason reason, const std::string& error) {
  if (s->kv >= 0) {
    if (prefix_ != nullptr && reason != FinishReason::kError) prefix_->Insert(s->kv, s->tokens);
    cache_.RemoveSequence(s->kv);
    s->kv = -1;
    RemoveRunning(s);
  } else {
    waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), s), waiting_.end());
  }
  ++finished_;
  if (reason == FinishReason::kCancelled) ++cancelled_;
  if (reason == FinishReason::kError) ++failed_;
  s->usage.completion_tokens = s->n_generated();
  s->usage.total_seconds = Seconds(s->submitted, Clock::now());
  if (s->request.on_finish) s->request.on_finish(reason, s->usage, error);
  sequences_.erase(s->id);
}

void Scheduler::FillStats(EngineStats* stats) const {
  stats->requests_finished = finished_;
  stats->requests_cancelled = cancelled_;
  stats->requests_failed = failed_;
  stats->preemptions = preemptions_;
  stats->prompt_tokens = prompt_tokens_;
  stats->completion_tokens = completion_tokens_;
  stats->prefill_tokens = prefill_tokens_;
  stats->decode_tokens = decode_tokens_;
  stats->prefill_seconds = prefill_seconds_;
  stats->decode_seconds = decode_seconds_;
  stats->steps = steps_;
  stats->waiting = static_cast<int64_t>(waiting_.size());
  stats->running = static_cast<int64_t>(running_.size());
}

}  // namespace mlarun
