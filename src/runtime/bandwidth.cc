// Read-bandwidth probe: each thread reads its contiguous share of a large, already-touched array
// in 1 MiB pieces through the stream_sum kernel (independent accumulators: a single FMA chain,
// as in dot, measured 22-23 GB/s here where the memory gives 29.5). The array sits in huge pages,
// as copied weights do: with 4 KiB pages the probe itself was TLB-bound and read less than the
// model's decode did (bf16 decode measured at 121% of it). Passes rotate over three access
// patterns and the best counts: one plain stream per thread, one stream 4 KiB behind software
// prefetches, and four such streams side by side (as the packed matmul kernels read). On the AMD
// VM no pattern was best in every phase: in slow phases the plain stream read 31-32 GB/s while
// bf16 decode streamed 43-44 (and four prefetched streams 36), in fast ones it read 65-72
// against 46-53 prefetched.
#include "runtime/bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "core/huge_pages.h"

namespace mlarun {

namespace {
constexpr int64_t kStepFloats = 4096 / sizeof(float);  // 4 KiB
constexpr int64_t kLineFloats = 64 / sizeof(float);
}  // namespace

BandwidthProbe::BandwidthProbe(Exec& exec, size_t bytes)
    : buffer_(bytes / sizeof(float) * sizeof(float)),
      n_(static_cast<int64_t>(bytes / sizeof(float))) {
  auto* data = reinterpret_cast<float*>(buffer_.data());
  exec.pool.ParallelForRange(n_, 4096, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) data[i] = static_cast<float>(i & 7);
  });
}

double BandwidthProbe::ReadPass(Exec& exec, int pattern) const {
  const auto* data = reinterpret_cast<const float*>(buffer_.data());
  const int64_t piece = (1 << 20) / static_cast<int64_t>(sizeof(float));
  std::vector<double> sums(static_cast<size_t>(exec.pool.size()), 0.0);
  exec.pool.ParallelForRange(n_, piece, [&](int64_t begin, int64_t end, int thread) {
    double acc = 0.0;
    if (pattern == 0) {
      for (int64_t i = begin; i < end; i += piece) {
        acc += exec.k.stream_sum(data + i, std::min(piece, end - i));
      }
    } else {
      // `streams` equal parts of the share read side by side, 4 KiB at a time, each 4 KiB
      // behind software prefetches.
      const int64_t streams = pattern == 1 ? 1 : 4;
      const int64_t part = (end - begin) / streams;
      for (int64_t offset = 0; offset < part; offset += kStepFloats) {
        const int64_t count = std::min(kStepFloats, part - offset);
        for (int64_t s = 0; s < streams; ++s) {
          const float* p = data + begin + s * part + offset;
          const int64_t ahead_end = std::min(2 * kStepFloats, part - offset);
          for (int64_t j = kStepFloats; j < ahead_end; j += kLineFloats) __builtin_prefetch(p + j);
          acc += exec.k.stream_sum(p, count);
        }
      }
      for (int64_t i = begin + streams * part; i < end; ++i) acc += data[i];
    }
    sums[static_cast<size_t>(thread)] += acc;
  });
  double total = 0.0;
  for (double s : sums) total += s;
  return total;
}

double BandwidthProbe::Measure(Exec& exec, int repeats) const {
  double best = 0.0;
  volatile double sink = 0.0;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    sink = sink + ReadPass(exec, r % kPatterns);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(n_) * sizeof(float) / seconds / 1e9);
  }
  return best;
}

std::string ProbeDriftNote(std::span<const double> readings, double tolerance) {
  if (readings.empty()) return "";
  const auto [low, high] = std::minmax_element(readings.begin(), readings.end());
  if (!(*low > 0.0) || *high <= *low * (1.0 + tolerance)) return "";
  char note[200];
  std::snprintf(note, sizeof(note),
                "note: the bandwidth probe read %.1f-%.1f GB/s during this run (%.2fx): the "
                "machine's speed drifted, so rows and the drop compare different speeds",
                *low, *high, *high / *low);
  return note;
}

}  // namespace mlarun
