// A persistent pool of worker threads, created once and passed explicitly to every kernel that
// parallelises (never a singleton). Work items never depend on which thread runs them, so results
// are identical for any thread count.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace mlarun {

// Non-owning reference to a callable, cheaper than std::function on hot paths.
template <typename Signature>
class FunctionRef;
template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor)
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}
  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

class ThreadPool {
 public:
  // Starts `n_threads - 1` workers; the calling thread is worker 0. n_threads <= 0 means all cores.
  // Throws Error above MaxThreads() (the workers spin between kernels, so many more threads than
  // cores only slow the pool down, and tens of thousands exhaust the process's thread limit) or
  // when the system refuses a thread; no worker is left running then.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // The machine's logical CPUs (at least 1) and the largest pool: 8 threads per CPU.
  static int Cores();
  static int MaxThreads() { return 8 * Cores(); }

  // Calls `fn(item, thread_index)` once for every item in [0, n_items); items are handed out
  // dynamically. Returns when all are done. Must not be called re-entrantly from `fn`.
  void ParallelFor(int64_t n_items, FunctionRef<void(int64_t, int)> fn);

  // Splits [0, n) into `size()` contiguous ranges aligned to `align` and calls
  // `fn(begin, end, thread_index)` for each non-empty one.
  void ParallelForRange(int64_t n, int64_t align, FunctionRef<void(int64_t, int64_t, int)> fn);

 private:
  void WorkerLoop(int thread_index);
  void RunItems(int thread_index);
  void StopWorkers();

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> next_item_{0};
  std::atomic<int> busy_workers_{0};
  int64_t n_items_ = 0;
  FunctionRef<void(int64_t, int)>* job_ = nullptr;
  std::atomic<bool> stop_{false};
};

// Calls fn(r) for every r in [0, rows), in items of `rows_per_item` consecutive rows handed out on
// `pool` (all on the calling thread when `pool` is null).
template <typename Fn>
void ForRowsInItems(ThreadPool* pool, int64_t rows, int64_t rows_per_item, Fn&& fn) {
  auto item = [&](int64_t i, int) {
    const int64_t end = std::min(rows, (i + 1) * rows_per_item);
    for (int64_t r = i * rows_per_item; r < end; ++r) fn(r);
  };
  const int64_t items = (rows + rows_per_item - 1) / rows_per_item;
  if (pool != nullptr) {
    pool->ParallelFor(items, item);
  } else {
    for (int64_t i = 0; i < items; ++i) item(i, 0);
  }
}

}  // namespace mlarun
