// Shared by the SIMD kernel test files: a fixture over the SIMD ISAs this CPU supports, with
// their kernel table and the scalar reference table, and deterministic random inputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/isa.h"
#include "kernels/kernel_table.h"

namespace mlarun {

class SimdKernelTest : public ::testing::TestWithParam<Isa> {
 protected:
  const KernelTable& simd() const { return GetKernelTable(GetParam()); }
  const KernelTable& scalar() const { return GetKernelTable(Isa::kScalar); }
};

inline std::vector<float> Random(size_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = scale * rng.NextSymmetric();
  return v;
}

// The ISAs other than scalar that this CPU supports (the test parameters).
inline std::vector<Isa> SimdIsas() {
  std::vector<Isa> out;
  for (Isa isa : SupportedIsas()) {
    if (isa != Isa::kScalar) out.push_back(isa);
  }
  return out;
}

// A test-name suffix for an ISA ("avx512_bf16").
inline std::string IsaTestName(const ::testing::TestParamInfo<Isa>& info) {
  std::string name(IsaName(info.param));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

}  // namespace mlarun
