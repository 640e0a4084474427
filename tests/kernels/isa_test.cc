// Run-time kernel choice: which table `--isa fast` picks, from AMX support and the measured
// vdpbf16ps rate.
#include "kernels/isa.h"

#include <gtest/gtest.h>

#include "kernels/kernel_table.h"

namespace mlarun {
namespace {

TEST(IsaTest, FastestIsaUsesBf16DotsOnlyWhereTheyOutpaceFma) {
  const double speedup = Bf16DotSpeedup();
  if (!IsaSupported(Isa::kAvx512Bf16)) {
    EXPECT_EQ(speedup, 0.0);
    EXPECT_EQ(FastestIsa(), BestIsa());
    return;
  }
  // vdpbf16ps does twice an FMA's multiply-adds per instruction; measured 1.9x the FMA rate on
  // AMD Zen 4 and 0.5x on Intel Xeon VMs. Outside (0.1, 4) the timing loops are broken.
  EXPECT_GT(speedup, 0.1);
  EXPECT_LT(speedup, 4.0);
  if (IsaSupported(Isa::kAmx)) {
    EXPECT_EQ(FastestIsa(), Isa::kAmx);
  } else {
    EXPECT_EQ(FastestIsa(), speedup > 1.0 ? Isa::kAvx512Bf16 : BestIsa());
  }
  EXPECT_EQ(Bf16DotSpeedup(), speedup);  // measured once per process
  Isa parsed = Isa::kScalar;
  ASSERT_TRUE(ParseIsa("fast", &parsed));
  EXPECT_EQ(parsed, FastestIsa());
}

TEST(IsaTest, FastestKernelTableIsTheFastestIsasWithInt8AttentionFromBf16) {
  const KernelTable& fast = FastestKernelTable();
  EXPECT_EQ(fast.isa, FastestIsa());
  if (IsaSupported(Isa::kAvx512Bf16) && Bf16DotSpeedup() <= 1.0) {
    // f32 FMA kernels for bf16 weights (or AMX tiles where supported), the int8-cache attention
    // of the AVX512-BF16 table.
    const KernelTable& bf16 = GetKernelTable(Isa::kAvx512Bf16);
    const KernelTable& avx512 = GetKernelTable(Isa::kAvx512);
    EXPECT_EQ(fast.matmul_rows_bf16, nullptr);
    EXPECT_EQ(fast.dot_rows_bf16_rounded, nullptr);  // exact attention over bf16 rows
    if (IsaSupported(Isa::kAmx)) {
      EXPECT_EQ(fast.matmul_rows_bf16_tiles, GetKernelTable(Isa::kAmx).matmul_rows_bf16_tiles);
      EXPECT_NE(fast.matmul_rows_bf16_tiles, nullptr);
      EXPECT_EQ(fast.bf16_tiles_min_tokens, 16);
    } else {
      EXPECT_EQ(fast.matmul_rows_bf16_tiles, nullptr);
    }
    EXPECT_TRUE(fast.packed_bf16_fastest);
    EXPECT_EQ(fast.matmul_rows, avx512.matmul_rows);
    EXPECT_EQ(fast.dot_rows_i8, bf16.dot_rows_i8);
    EXPECT_EQ(fast.pv_accumulate_i8, bf16.pv_accumulate_i8);
    EXPECT_NE(fast.dot_rows_i8, avx512.dot_rows_i8);
  } else {
    EXPECT_EQ(&fast, &GetKernelTable(FastestIsa()));
  }
}

}  // namespace
}  // namespace mlarun
