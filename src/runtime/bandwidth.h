// A STREAM-like probe of the machine's memory read bandwidth, for roofline figures.
#pragma once

#include <cstddef>

#include "kernels/kernel_table.h"

namespace mlarun {

// Returns the best of `repeats` timed passes reading a `bytes`-sized float array, split across the
// pool's threads and read with the ISA's vector loads, in GB/s (1e9 bytes per second).
double MeasureReadBandwidth(Exec& exec, size_t bytes = size_t{1} << 30, int repeats = 8);

}  // namespace mlarun
