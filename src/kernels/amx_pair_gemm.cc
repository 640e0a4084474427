// The non-template parts of the AMX pair GEMM (cpu/amx_pair_gemm.h), compiled with the baseline
// flags so that no std::vector or std::fill code instantiated for them carries AVX-512 or AMX
// instructions (see PairGemmScratch).
#include "kernels/cpu/amx_pair_gemm.h"

#include <algorithm>
#include <cstdint>

namespace mlarun::amx {

PairGemmScratch::PairGemmScratch() = default;
PairGemmScratch::~PairGemmScratch() = default;

void PairGemmScratch::CopyTails(const PairGemmArgs& g, int64_t full_steps, int64_t tail) {
  tail_a.assign(static_cast<size_t>(g.m * kStepPairs), 0u);
  for (int64_t i = 0; i < g.m; ++i) {
    std::copy_n(g.a + i * g.lda + full_steps * kStepPairs, tail, tail_a.data() + i * kStepPairs);
  }
  tail_b.assign(static_cast<size_t>(kStepPairs * g.n), 0u);
  for (int64_t kk = 0; kk < tail; ++kk) {
    std::copy_n(g.b + (full_steps * kStepPairs + kk) * g.ldb, g.n, tail_b.data() + kk * g.n);
  }
}

void PairGemmScratch::ZeroOutputs(const PairGemmArgs& g) {
  for (int64_t i = 0; i < g.m; ++i) std::fill_n(g.c + i * g.ldc, g.n, 0.0f);
}

}  // namespace mlarun::amx
