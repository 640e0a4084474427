// The pool runs every item exactly once, for any thread count.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

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

}  // namespace
}  // namespace mlarun
