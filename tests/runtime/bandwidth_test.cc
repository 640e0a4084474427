// The bandwidth probe's access patterns: each must read every element of the array exactly once
// (a pattern that skipped or repeated data would report a wrong peak), whatever the thread count
// and however the array splits into threads' shares, streams and 4 KiB steps.
#include "runtime/bandwidth.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/isa.h"
#include "kernels/kernel_table.h"

namespace mlarun {
namespace {

TEST(BandwidthProbeTest, EveryPatternReadsEachElementOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (Isa isa : {Isa::kScalar, BestIsa()}) {
      Exec exec{pool, GetKernelTable(isa)};
      // 3 MiB plus 37 floats: shares, streams and steps all end in partial pieces.
      const size_t floats = (size_t{3} << 20) / sizeof(float) + 37;
      const BandwidthProbe probe(exec, floats * sizeof(float));
      double expected = 0.0;
      for (size_t i = 0; i < floats; ++i) expected += static_cast<double>(i % 8);
      for (int pattern = 0; pattern < BandwidthProbe::kPatterns; ++pattern) {
        EXPECT_EQ(probe.ReadPass(exec, pattern), expected)
            << "pattern " << pattern << ", " << threads << " threads";
      }
      const double gb_s = probe.Measure(exec, BandwidthProbe::kPatterns);
      EXPECT_GT(gb_s, 0.0);
    }
  }
}

}  // namespace
}  // namespace mlarun
