// Read-bandwidth probe: each thread reads its contiguous share of a large, already-touched array
// in 1 MiB pieces through the stream_sum kernel (independent accumulators: a single FMA chain,
// as in dot, measured 22-23 GB/s here where the memory gives 29.5). The array sits in huge pages,
// as copied weights do: with 4 KiB pages the probe itself was TLB-bound and read less than the
// model's decode did (bf16 decode measured at 121% of it).
#include "runtime/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "core/huge_pages.h"

namespace mlarun {

BandwidthProbe::BandwidthProbe(Exec& exec, size_t bytes)
    : buffer_(bytes / sizeof(float) * sizeof(float)),
      n_(static_cast<int64_t>(bytes / sizeof(float))) {
  auto* data = reinterpret_cast<float*>(buffer_.data());
  exec.pool.ParallelForRange(n_, 4096, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) data[i] = static_cast<float>(i & 7);
  });
}

double BandwidthProbe::Measure(Exec& exec, int repeats) const {
  const auto* data = reinterpret_cast<const float*>(buffer_.data());
  const int64_t n = n_;
  const int64_t piece = (1 << 20) / static_cast<int64_t>(sizeof(float));
  std::vector<double> sums(static_cast<size_t>(exec.pool.size()), 0.0);
  double best = 0.0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    exec.pool.ParallelForRange(n, piece, [&](int64_t begin, int64_t end, int thread) {
      double acc = 0.0;
      for (int64_t i = begin; i < end; i += piece) {
        const float* p = data + i;
        acc += exec.k.stream_sum(p, std::min(piece, end - i));
      }
      sums[static_cast<size_t>(thread)] += acc;
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(n) * sizeof(float) / seconds / 1e9);
  }
  volatile double sink = 0.0;
  for (double s : sums) sink = sink + s;
  (void)sink;
  return best;
}

}  // namespace mlarun
