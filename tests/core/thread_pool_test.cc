// The pool runs every item exactly once, for any thread count.
#include "core/thread_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"

namespace mlarun {
namespace {

TEST(ThreadPoolTest, RunsEveryItemOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.ParallelFor(n, [&](int64_t i, int thread) {
        EXPECT_LT(thread, threads);
        hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPoolTest, RangesCoverExactlyWithAlignment) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1001);
  pool.ParallelForRange(1001, 16, [&](int64_t begin, int64_t end, int) {
    EXPECT_EQ(begin % 16, 0);
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)]++;
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPoolTest, ZeroMeansAllCoresAndTheLimitIsEightPerCore) {
  EXPECT_EQ(ThreadPool(0).size(), ThreadPool::Cores());
  const int max_threads = ThreadPool::MaxThreads();
  EXPECT_EQ(max_threads, 8 * ThreadPool::Cores());
  ThreadPool largest(max_threads);
  std::atomic<int64_t> sum{0};
  largest.ParallelFor(1000, [&](int64_t i, int thread) {
    EXPECT_LT(thread, max_threads);
    sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
  try {
    ThreadPool too_many(max_threads + 1);
    ADD_FAILURE() << "a pool above the limit started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string(max_threads + 1) + " threads asked for"),
              std::string::npos)
        << e.what();
  }
}

#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer's shadow memory needs an unlimited one
// In a child process: limits the address space to the current size + 8 MiB, where the workers'
// stacks (2-8 MiB each) run out after a few threads, and starts the largest pool. Exits 0 when
// the pool throws Error (printed), 2 if every thread started.
[[noreturn]] void StartLargestPoolUnderAddressLimit() {
  long pages = 0;
  std::FILE* statm = std::fopen("/proc/self/statm", "r");
  if (statm == nullptr || std::fscanf(statm, "%ld", &pages) != 1) std::_Exit(4);
  std::fclose(statm);
  const rlim_t current = static_cast<rlim_t>(pages) * static_cast<rlim_t>(getpagesize());
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(5);
  limit.rlim_cur = std::min(limit.rlim_max, current + (rlim_t{8} << 20));  // hard limit kept
  if (setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(6);
  try {
    ThreadPool pool(ThreadPool::MaxThreads());
    std::_Exit(2);
  } catch (const Error& e) {
    std::fputs(e.what(), stderr);
    std::_Exit(0);
  }
}
#endif

// The pool must throw Error when the system refuses a thread, not std::terminate on a joinable
// std::thread, and join the workers it had started (the child would hang otherwise).
TEST(ThreadPoolDeathTest, ARefusedThreadIsAnErrorAndTheStartedOnesAreJoined) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory needs an unlimited address space";
#else
  EXPECT_EXIT(StartLargestPoolUnderAddressLimit(), ::testing::ExitedWithCode(0),
              "thread pool: the system started [0-9]+ of the [0-9]+ threads");
#endif
}

}  // namespace
}  // namespace mlarun
