// The bandwidth probe's access patterns: each must read every element of the array exactly once
// (a pattern that skipped or repeated data would report a wrong peak), whatever the thread count
// and however the array splits into threads' shares, streams and 4 KiB steps.
#include "runtime/bandwidth.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

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

// Readings within 15% of each other give no note; a wider spread names its range and ratio,
// whatever the order of the readings.
TEST(ProbeDriftNoteTest, NamesTheRangeOnlyWhenReadingsSpreadPastTheTolerance) {
  EXPECT_EQ(ProbeDriftNote(std::vector<double>{}), "");
  EXPECT_EQ(ProbeDriftNote(std::vector<double>{50.0, 57.4, 52.0}), "");  // 1.148x
  const std::string note = ProbeDriftNote(std::vector<double>{57.2, 31.6, 40.0});
  EXPECT_NE(note.find("31.6-57.2 GB/s"), std::string::npos) << note;
  EXPECT_NE(note.find("(1.81x)"), std::string::npos) << note;
  EXPECT_NE(ProbeDriftNote(std::vector<double>{50.0, 57.6}), "");  // just past 1.15x
  EXPECT_EQ(ProbeDriftNote(std::vector<double>{50.0, 57.6}, 0.2), "");
}

}  // namespace
}  // namespace mlarun
