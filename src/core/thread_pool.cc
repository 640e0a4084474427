// Worker threads spin briefly on a generation counter (low latency between the many small kernels
// of a decode step), then sleep on a condition variable.
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <system_error>

#include "core/error.h"

namespace mlarun {

namespace {
// How long a worker spins before sleeping. The gaps between the kernels of one decode step (norms,
// routing, attention on the calling thread) reach a few hundred microseconds, and waking a
// sleeping worker costs tens to hundreds of microseconds on a VM. Measured on the 2-core VM: a
// 33 us spin (2,000 pauses of 16 ns) let the worker sleep ~39 times per decoded token; 500 us cut
// the sleeps 8x and raised int8 decode from 36 to 41-43 tok/s. Bounded, so an idle pool sleeps.
constexpr auto kSpinTime = std::chrono::microseconds(500);
// After this much pure spinning the worker yields its core between checks, so on a busy machine
// (more runnable threads than cores) the spin does not take time from the thread it waits for.
constexpr auto kPureSpinTime = std::chrono::microseconds(50);
constexpr int kPausesPerClockRead = 32;
// Pause iterations the caller spins waiting for workers before yielding its core.
constexpr int kWaitSpinIterations = 256;
}  // namespace

int ThreadPool::Cores() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads <= 0) n_threads = Cores();
  if (n_threads > MaxThreads()) {
    throw Error("thread pool: " + std::to_string(n_threads) + " threads asked for, at most " +
                std::to_string(MaxThreads()) + " (8 per CPU; this machine has " +
                std::to_string(Cores()) + ")");
  }
  n_threads_ = n_threads;
  try {
    for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
  } catch (const std::system_error& e) {
    const size_t running = workers_.size() + 1;  // with the calling thread
    StopWorkers();
    throw Error("thread pool: the system started " + std::to_string(running) + " of the " +
                std::to_string(n_threads_) + " threads asked for: " + e.what());
  }
}

ThreadPool::~ThreadPool() { StopWorkers(); }

void ThreadPool::StopWorkers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
}

void ThreadPool::RunItems(int thread_index) {
  for (;;) {
    const int64_t item = next_item_.fetch_add(1, std::memory_order_relaxed);
    if (item >= n_items_) break;
    (*job_)(item, thread_index);
  }
}

void ThreadPool::WorkerLoop(int thread_index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t current = generation_.load(std::memory_order_acquire);
    const auto spin_start = std::chrono::steady_clock::now();
    bool yielding = false;
    for (int spin = 1; current == seen; ++spin) {
      if (yielding) {
        std::this_thread::yield();
      } else {
#if defined(__x86_64__)
        __builtin_ia32_pause();
#endif
      }
      current = generation_.load(std::memory_order_acquire);
      if (yielding || spin % kPausesPerClockRead == 0) {
        const auto spun = std::chrono::steady_clock::now() - spin_start;
        if (spun > kSpinTime) break;
        yielding = spun > kPureSpinTime;
      }
    }
    if (current == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      current = generation_.load(std::memory_order_acquire);
    }
    seen = current;
    if (stop_.load(std::memory_order_acquire)) return;
    RunItems(thread_index);
    busy_workers_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::ParallelFor(int64_t n_items, FunctionRef<void(int64_t, int)> fn) {
  if (n_items <= 0) return;
  if (n_threads_ == 1 || n_items == 1) {
    for (int64_t i = 0; i < n_items; ++i) fn(i, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    n_items_ = n_items;
    next_item_.store(0, std::memory_order_relaxed);
    busy_workers_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  RunItems(0);
  for (int spin = 0; busy_workers_.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kWaitSpinIterations) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
}

void ThreadPool::ParallelForRange(int64_t n, int64_t align,
                                  FunctionRef<void(int64_t, int64_t, int)> fn) {
  if (n <= 0) return;
  const int64_t n_chunks_aligned = (n + align - 1) / align;
  const int64_t parts = std::min<int64_t>(n_threads_, n_chunks_aligned);
  const int64_t per_part = (n_chunks_aligned + parts - 1) / parts;
  ParallelFor(parts, [&](int64_t part, int thread_index) {
    const int64_t begin = part * per_part * align;
    const int64_t end = std::min(n, (part + 1) * per_part * align);
    if (begin < end) fn(begin, end, thread_index);
  });
}

}  // namespace mlarun
