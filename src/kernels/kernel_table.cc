// Maps an ISA to its kernel table.
#include "kernels/kernel_table.h"

namespace mlarun {

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

}  // namespace mlarun
