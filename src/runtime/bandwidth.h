// A STREAM-like probe of the machine's memory read bandwidth, for roofline figures.
#pragma once

#include <cstddef>

#include "core/thread_pool.h"

namespace mlarun {

// Returns the best of `repeats` timed passes summing a `bytes`-sized array split across the pool's
// threads, in GB/s (1e9 bytes per second).
double MeasureReadBandwidth(ThreadPool& pool, size_t bytes = size_t{1} << 30, int repeats = 5);

}  // namespace mlarun
