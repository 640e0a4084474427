// AMX kernels: the tile unit of amx_tiles.h on the hardware, and the table entries that run the
// tile kernels on it: products of packed bf16 weights for batches of 16 tokens or more
// (amx_packed_matmul.h), the bf16 pair GEMM of the prefill's tiled attention (amx_pair_gemm.h)
// and, where the CPU has AMX-INT8, products of packed Q8 weights for batches of 16 tokens or
// more (amx_packed_q8.h; KernelTable::matmul_rows_q8_tiles, and matmul_rows_q8 where they
// measure faster than the VNNI kernel). Compiled with -mamx-tile -mamx-bf16 -mamx-int8 on top of
// the AVX-512 flags; only called where IsaSupported(kAmx), i.e. the CPU has AMX and Linux granted
// the process the tile state (isa.cc).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/amx_packed_matmul.h"
#include "kernels/cpu/amx_packed_q8.h"
#include "kernels/cpu/amx_pair_gemm.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace mlarun::amx {

namespace {

// The tile unit (amx_tiles.h) on the hardware. The intrinsics take tile numbers as literals (they
// are pasted into the assembly), hence the switches. GCC's TILELOADD asm does not declare that it
// reads memory, so Configure, which precedes every kernel's loads, is also a compiler memory
// barrier: operands the kernel wrote just before (the pair GEMM's padded last step) are in memory
// by then.
struct HardwareTiles {
  static void Configure(const TileConfig& config) {
    asm volatile("" ::: "memory");
    _tile_loadconfig(&config);
  }
  static void Release() { _tile_release(); }
  static void ZeroAcc(int acc) {
    switch (acc) {
      case 0:
        _tile_zero(0);
        break;
      case 1:
        _tile_zero(1);
        break;
      case 2:
        _tile_zero(2);
        break;
      default:
        _tile_zero(3);
        break;
    }
  }
  static void LoadAcc(int acc, const void* p, int64_t stride) {
    switch (acc) {
      case 0:
        _tile_loadd(0, p, stride);
        break;
      case 1:
        _tile_loadd(1, p, stride);
        break;
      case 2:
        _tile_loadd(2, p, stride);
        break;
      default:
        _tile_loadd(3, p, stride);
        break;
    }
  }
  static void StoreAcc(int acc, void* p, int64_t stride) {
    switch (acc) {
      case 0:
        _tile_stored(0, p, stride);
        break;
      case 1:
        _tile_stored(1, p, stride);
        break;
      case 2:
        _tile_stored(2, p, stride);
        break;
      default:
        _tile_stored(3, p, stride);
        break;
    }
  }
  static void LoadA(int half, const void* p, int64_t stride) {
    if (half == 0) {
      _tile_loadd(4, p, stride);
    } else {
      _tile_loadd(5, p, stride);
    }
  }
  static void LoadB(int half, const void* p, int64_t stride) {
    if (half == 0) {
      _tile_loadd(6, p, stride);
    } else {
      _tile_loadd(7, p, stride);
    }
  }
  static void Dot(int acc) {
    switch (acc) {
      case 0:
        _tile_dpbf16ps(0, 4, 6);
        break;
      case 1:
        _tile_dpbf16ps(1, 4, 7);
        break;
      case 2:
        _tile_dpbf16ps(2, 5, 6);
        break;
      default:
        _tile_dpbf16ps(3, 5, 7);
        break;
    }
  }
  static void DotI8(int acc) {
    switch (acc) {
      case 0:
        _tile_dpbsud(0, 4, 6);
        break;
      case 1:
        _tile_dpbsud(1, 4, 7);
        break;
      case 2:
        _tile_dpbsud(2, 5, 6);
        break;
      default:
        _tile_dpbsud(3, 5, 7);
        break;
    }
  }
};

// ScalarQ8Lanes (amx_packed_q8.h) in AVX-512: the same operations, 16 lanes at once.
struct Avx512Q8Lanes {
  static void ScaleAdd(const Q8TileScaling& s) {
    const __m512 ws0 =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.w_scales[0])));
    const __m512 ws1 =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s.w_scales[1])));
    for (int m = 0; m < s.rows; ++m) {
      float* a = s.acc + m * s.acc_stride;
      const __m512i offset = _mm512_set1_epi32(s.x_offsets[m * s.x_stride]);
      const __m512 xs = _mm512_set1_ps(s.x_scales[m * s.x_stride]);
      const __m512 sum0 =
          _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_load_si512(s.c[0][m]), offset));
      const __m512 sum1 =
          _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_load_si512(s.c[1][m]), offset));
      _mm512_store_ps(a, _mm512_fmadd_ps(sum0, _mm512_mul_ps(ws0, xs), _mm512_load_ps(a)));
      _mm512_store_ps(a + kQ8GroupRows, _mm512_fmadd_ps(sum1, _mm512_mul_ps(ws1, xs),
                                                        _mm512_load_ps(a + kQ8GroupRows)));
    }
  }
};

void MatMulRowsBf16Tiles(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                         const uint16_t* x_tiles, int64_t n_tokens, float* y, int64_t ldy) {
  HardwareTiles tiles;
  MatMulPackedBf16Tiles(tiles, w, row_begin, row_end, x_tiles, n_tokens, y, ldy);
}

// Batches of 16 tokens or more on the tiles, smaller ones (decode) on the AVX-512 VNNI kernel:
// bitwise the same results either way.
void MatMulRowsQ8Tiles(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                       const Q8Activations& x, float* y, int64_t ldy) {
  if (x.n_tokens < kQ8GroupRows) {
    detail::Avx512KernelTable().matmul_rows_q8(w, row_begin, row_end, x, y, ldy);
    return;
  }
  HardwareTiles tiles;
  MatMulPackedQ8Tiles<HardwareTiles, Avx512Q8Lanes>(tiles, w, row_begin, row_end, x, y, ldy);
}

// The AMX tables' matmul_rows_q8: the tiles for batches of 16 tokens or more where they measured
// faster than the VNNI kernel, else the VNNI kernel (bitwise the same results). The measurement
// runs on the first such batch, so a process that never multiplies one (bf16 weights, int8
// decode alone) never pays for it.
void MatMulRowsQ8Chosen(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                        const Q8Activations& x, float* y, int64_t ldy) {
  if (x.n_tokens >= kQ8GroupRows && detail::MeasuredQ8TilesSpeedup() > kQ8TilesMinSpeedup) {
    MatMulRowsQ8Tiles(w, row_begin, row_end, x, y, ldy);
    return;
  }
  detail::Avx512KernelTable().matmul_rows_q8(w, row_begin, row_end, x, y, ldy);
}

}  // namespace

}  // namespace mlarun::amx

namespace mlarun::detail {

void InstallAmxKernels(KernelTable* t) {
  t->matmul_rows_bf16_tiles = amx::MatMulRowsBf16Tiles;
  t->gemm_bf16_pairs = amx::GemmBf16PairsOn<amx::HardwareTiles>;
  t->bf16_tiles_min_tokens = kBf16GroupRows;
  if (DetectCpuFeatures().amx_int8) {
    t->matmul_rows_q8_tiles = amx::MatMulRowsQ8Tiles;
    t->matmul_rows_q8 = amx::MatMulRowsQ8Chosen;
  }
  t->packed_bf16_fastest = true;
}

double MeasuredQ8TilesSpeedup() {
  static const double speedup = [] {
    const Q8ProductTimes times =
        TimeQ8Products(amx::MatMulRowsQ8Tiles, Avx512KernelTable().matmul_rows_q8);
    return times.first_seconds > 0.0 ? times.second_seconds / times.first_seconds : 0.0;
  }();
  return speedup;
}

const KernelTable& AmxKernelTable() {
  static const KernelTable table = [] {
    KernelTable t = Avx512Bf16KernelTable();
    t.isa = Isa::kAmx;
    InstallAmxKernels(&t);
    return t;
  }();
  return table;
}

}  // namespace mlarun::detail
