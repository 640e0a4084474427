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

}  // namespace mlarun
