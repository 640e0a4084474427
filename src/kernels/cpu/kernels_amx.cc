// AMX-BF16 kernels: the tile unit of amx_tiles.h on the hardware, and the table entries that run
// the tile kernels on it: products of packed bf16 weights for batches of 16 tokens or more
// (amx_packed_matmul.h) and the bf16 pair GEMM of the prefill's tiled attention
// (amx_pair_gemm.h). Compiled with -mamx-tile -mamx-bf16 on top of the AVX-512 flags; only
// called where IsaSupported(kAmx), i.e. the CPU has AMX and Linux granted the process the tile
// state (isa.cc).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/amx_packed_matmul.h"
#include "kernels/cpu/amx_pair_gemm.h"
#include "kernels/cpu/amx_tiles.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"

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
  static void LoadAcc(int acc, const float* p, int64_t stride) {
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
  static void StoreAcc(int acc, float* p, int64_t stride) {
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
};

void MatMulRowsBf16Tiles(const WeightMatrix& w, int64_t row_begin, int64_t row_end,
                         const uint16_t* x_tiles, int64_t n_tokens, float* y, int64_t ldy) {
  HardwareTiles tiles;
  MatMulPackedBf16Tiles(tiles, w, row_begin, row_end, x_tiles, n_tokens, y, ldy);
}

}  // namespace

}  // namespace mlarun::amx

namespace mlarun::detail {

void InstallAmxKernels(KernelTable* t) {
  t->matmul_rows_bf16_tiles = amx::MatMulRowsBf16Tiles;
  t->gemm_bf16_pairs = amx::GemmBf16PairsOn<amx::HardwareTiles>;
  t->bf16_tiles_min_tokens = kBf16GroupRows;
  t->packed_bf16_fastest = true;
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
