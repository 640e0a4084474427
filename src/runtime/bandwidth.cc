// Read-bandwidth probe: each thread sums its contiguous share of a large, already-touched array
// with 8 independent accumulators (enough loads in flight to saturate the memory system).
#include "runtime/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace mlarun {

double MeasureReadBandwidth(ThreadPool& pool, size_t bytes, int repeats) {
  const size_t n = bytes / sizeof(uint64_t);
  std::vector<uint64_t> data(n);
  pool.ParallelForRange(static_cast<int64_t>(n), 4096, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) data[static_cast<size_t>(i)] = static_cast<uint64_t>(i);
  });
  std::vector<uint64_t> sums(static_cast<size_t>(pool.size()) * 8);
  double best = 0.0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    pool.ParallelForRange(static_cast<int64_t>(n), 4096, [&](int64_t begin, int64_t end, int thread) {
      uint64_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const uint64_t* p = data.data();
      int64_t i = begin;
      for (; i + 8 <= end; i += 8) {
        for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
      }
      for (; i < end; ++i) acc[0] += p[i];
      for (int j = 0; j < 8; ++j) sums[static_cast<size_t>(thread) * 8 + static_cast<size_t>(j)] += acc[j];
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(n * sizeof(uint64_t)) / seconds / 1e9);
  }
  volatile uint64_t sink = 0;
  for (uint64_t s : sums) sink = sink + s;
  (void)sink;
  return best;
}

}  // namespace mlarun
