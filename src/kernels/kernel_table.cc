// Maps an ISA to its kernel table.
#include "kernels/kernel_table.h"

namespace mlarun {

const KernelTable& GetKernelTable(Isa isa) {
  switch (isa) {
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
  if (fastest != Isa::kAvx512 || !IsaSupported(Isa::kAvx512Bf16)) return GetKernelTable(fastest);
  static const KernelTable table = [] {
    KernelTable t = detail::Avx512KernelTable();
    const KernelTable& bf16 = detail::Avx512Bf16KernelTable();
    t.dot_rows_i8 = bf16.dot_rows_i8;
    t.pv_accumulate_i8 = bf16.pv_accumulate_i8;
    return t;
  }();
  return table;
}

}  // namespace mlarun
