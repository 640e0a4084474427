// The engine's scheduler (not thread-safe; the engine's owner thread only): the waiting queue,
// admission under the KV budget, one batched decode pass per step over all running sequences,
// grid-aligned prefill chunks, and preemption of the newest sequence (recomputed later) when the
// KV pool runs out.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "runtime/engine.h"

namespace mlarun {

class Scheduler {
 public:
  // `prefix` may be null (no prefix caching).
  Scheduler(const Model& model, Exec& exec, KvCache& cache, PrefixCache* prefix,
            const EngineOptions& options, int64_t max_context);
  ~Scheduler();

  void Add(RequestId id, EngineRequest request, std::chrono::steady_clock::time_point submitted);
  void Cancel(RequestId id);
  void CancelAll();
  // One step; returns whether requests remain.
  bool Step();
  bool Idle() const { return waiting_.empty() && running_.empty(); }
  // Fills the scheduler's counters and gauges into `stats`.
  void FillStats(EngineStats* stats) const;

 private:
  struct Sequence;
  struct Chunk {
    Sequence* seq;
    int64_t begin;  // positions [begin, end)
    int64_t end;
    bool want_logits;
  };

  // Tokens whose rows must be computed before the next decode pass: the prompt for a fresh
  // request, every token but the last sampled one for a resumed one.
  static int64_t PrefillTarget(const Sequence& s);
  bool IsDecoding(const Sequence& s) const;
  bool TryAdmit(Sequence* s);
  void Admit();
  std::vector<Sequence*> ScheduleDecode();
  std::vector<Chunk> SchedulePrefill();
  // Reserves `n` more tokens for `s`, evicting unreferenced prefix blocks if needed.
  bool ReserveWithEviction(Sequence* s, int64_t n);
  void RunDecode(const std::vector<Sequence*>& decode);
  void RunPrefill(const std::vector<Chunk>& chunks);
  // Samples from `logits` [vocab] and delivers the token; may finish `s`.
  void Accept(Sequence* s, std::span<float> logits);
  void Preempt(Sequence* s);
  void Finish(Sequence* s, FinishReason reason, const std::string& error = {});
  // Removes `s` from the running list (keeps the order of the others).
  void RemoveRunning(Sequence* s);

  const Model& model_;
  Exec& exec_;
  KvCache& cache_;
  PrefixCache* prefix_;
  EngineOptions options_;
  int64_t max_context_;
  int64_t vocab_;

  std::map<RequestId, std::unique_ptr<Sequence>> sequences_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;  // admission order, oldest first
  uint64_t next_admission_ = 0;
  std::vector<float> logits_;
  std::vector<float> raw_logits_;  // a copy of one row for ComputeLogprobs
  std::vector<BatchToken> batch_;

  int64_t finished_ = 0;
  int64_t cancelled_ = 0;
  int64_t failed_ = 0;
  int64_t preemptions_ = 0;
  int64_t prompt_tokens_ = 0;
  int64_t completion_tokens_ = 0;
  int64_t prefill_tokens_ = 0;
  int64_t decode_tokens_ = 0;
  double prefill_seconds_ = 0.0;
  double decode_seconds_ = 0.0;
  int64_t steps_ = 0;
};

}  // namespace mlarun
