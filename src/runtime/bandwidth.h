// A STREAM-like probe of the machine's memory read bandwidth, for roofline figures.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "core/huge_pages.h"
#include "kernels/kernel_table.h"

namespace mlarun {

// A `bytes`-sized float array in huge pages, filled once, that Measure reads again and again (so
// a benchmark can probe the bandwidth next to each of its measurements on a machine whose speed
// drifts, without paying for fresh pages every time).
class BandwidthProbe {
 public:
  BandwidthProbe(Exec& exec, size_t bytes = size_t{1} << 30);
  // Returns the best of `repeats` timed passes over the array, split across the pool's threads
  // and read with the ISA's vector loads, in GB/s (1e9 bytes per second). Passes rotate over three
  // access patterns (bandwidth.cc).
  double Measure(Exec& exec, int repeats = 8) const;

  static constexpr int kPatterns = 3;
  // Reads the whole array once with access pattern `pattern` (< kPatterns) and returns the sum of
  // its elements (element i holds i % 8, so every pattern must give exactly sum_i (i % 8)).
  double ReadPass(Exec& exec, int pattern) const;

 private:
  HugePageBuffer buffer_;
  int64_t n_ = 0;  // floats
};

// A note on how far a run's probe readings spread: empty when the highest is within `tolerance`
// (0.15: 15%) of the lowest, else one line naming the range and the ratio, for a benchmark to
// print under its table. On a machine whose memory speed drifts, rows (and ratios of rows)
// measured minutes apart then compare different machine speeds; each row's roofline fraction
// stays paired with its own probe.
std::string ProbeDriftNote(std::span<const double> readings, double tolerance = 0.15);

}  // namespace mlarun
