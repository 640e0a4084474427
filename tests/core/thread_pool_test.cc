// The pool runs every item exactly once, for any thread count.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
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

}  // namespace
}  // namespace mlarun
