// Maps an ISA to its kernel table.
#include "kernels/kernel_table.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "kernels/matmul.h"
#include "kernels/packed_bf16.h"
#include "kernels/quant.h"

namespace mlarun {

void RoundToBf16With(const KernelTable& k, const float* x, int64_t n, uint16_t* out) {
  if (k.round_to_bf16 != nullptr) {
    k.round_to_bf16(x, n, out);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = F32ToBF16(x[i]);
}

void Bf16PairColumnsWith(const KernelTable& k, const float* x, int64_t ldx, int64_t n_rows,
                         int64_t n_pairs, uint32_t* out, int64_t ld_out) {
  if (k.bf16_pair_columns != nullptr) {
    k.bf16_pair_columns(x, ldx, n_rows, n_pairs, out, ld_out);
    return;
  }
  Bf16PairColumns(x, ldx, n_rows, n_pairs, out, ld_out);
}

void Bf16PairRowsWith(const KernelTable& k, const float* a, const float* b, int64_t n,
                      uint32_t* out) {
  if (k.bf16_pair_rows != nullptr) {
    k.bf16_pair_rows(a, b, n, out);
    return;
  }
  Bf16PairRows(a, b, n, out);
}

const KernelTable& GetKernelTable(Isa isa) {
  switch (isa) {
    case Isa::kAmx:
      return detail::AmxKernelTable();
    case Isa::kAvx512Bf16:
      return detail::Avx512Bf16KernelTable();
    case Isa::kAvx512:
      return detail::Avx512KernelTable();
    case Isa::kAvx2:
      return detail::Avx2KernelTable();
    case Isa::kScalar:
      break;
  }
  return detail::ScalarKernelTable();
}

const KernelTable& FastestKernelTable() {
  const Isa fastest = FastestIsa();
  if (!IsaSupported(Isa::kAvx512Bf16) || Bf16DotSpeedup() > 1.0) return GetKernelTable(fastest);
  static const KernelTable table = [fastest] {
    KernelTable t = detail::Avx512KernelTable();
    const KernelTable& bf16 = detail::Avx512Bf16KernelTable();
    t.dot_rows_i8 = bf16.dot_rows_i8;
    t.pv_accumulate_i8 = bf16.pv_accumulate_i8;
    if (fastest == Isa::kAmx) {
      t.isa = Isa::kAmx;
      detail::InstallAmxKernels(&t);
    }
    return t;
  }();
  return table;
}

double Q8TilesSpeedup() {
  if (!IsaSupported(Isa::kAmx) || !DetectCpuFeatures().amx_int8) return 0.0;
  return detail::MeasuredQ8TilesSpeedup();
}

namespace detail {

Q8ProductTimes TimeQ8Products(MatMulRowsQ8Fn first, MatMulRowsQ8Fn second) {
  constexpr int64_t kRows = 512, kCols = 2048, kTokens = 64;
  std::vector<uint8_t> values(static_cast<size_t>(PackedQ8ValueBytes(kRows, kCols)));
  std::vector<uint16_t> scales(static_cast<size_t>(PackedQ8ScaleCount(kRows, kCols)));
  InitPackedQ8(kRows, kCols, values.data(), scales.data());
  const WeightMatrix w{.dtype = DType::kI8,
                       .rows = kRows,
                       .cols = kCols,
                       .data = values.data(),
                       .q8_scales = scales.data(),
                       .q8_layout = Q8Layout::kPacked16};
  const std::vector<float> x_values(static_cast<size_t>(kTokens * kCols), 0.0f);
  Q8Activations x;
  QuantizeActivationsQ8(x_values.data(), kTokens, kCols, &x);
  std::vector<float> y(static_cast<size_t>(kTokens * kRows));
  auto seconds = [&](MatMulRowsQ8Fn fn) {
    const auto start = std::chrono::steady_clock::now();
    fn(w, 0, kRows, x, y.data(), kRows);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  Q8ProductTimes best{.first_seconds = std::numeric_limits<double>::infinity(),
                      .second_seconds = std::numeric_limits<double>::infinity()};
  for (int round = 0; round < 3; ++round) {
    best.first_seconds = std::min(best.first_seconds, seconds(first));
    best.second_seconds = std::min(best.second_seconds, seconds(second));
  }
  return best;
}

}  // namespace detail

}  // namespace mlarun
