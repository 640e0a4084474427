// Software prefetch of cached attention rows given by pointer (bf16 K/V rows of a decode tile),
// shared by the scores kernels of every ISA. Rows come from L3 or DRAM and are too short for the
// hardware prefetchers to ramp up. Issued a cache line per row as the current tile reads its own
// line, the next tile's rows arrive in time; issued all at once per tile, as before 2026-12-01,
// they helped less (BM_AbsorbedMlaDecode with the cache evicted, docs/performance.md), probably
// because most of such a burst is dropped.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace mlarun {

// Prefetches into L1 the cache line holding value `d` of each of rows[0, kRows).
template <int kRows>
inline void PrefetchRowLine(const uint16_t* const* rows, int64_t d) {
  for (int r = 0; r < kRows; ++r)
    _mm_prefetch(reinterpret_cast<const char*>(rows[r] + d), _MM_HINT_T0);
}

// Prefetches into L1 every cache line of rows [begin, end), `row_bytes` each, at once (where no
// tile reads alongside).
inline void PrefetchRowsAtOnce(const uint16_t* const* rows, int64_t begin, int64_t end,
                               int64_t row_bytes) {
  for (int64_t p = begin; p < end; ++p) {
    for (int64_t b = 0; b < row_bytes; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(rows[p]) + b, _MM_HINT_T0);
  }
}

}  // namespace mlarun
