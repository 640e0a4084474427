// Instruction-set levels the kernels are compiled for, and run-time CPU detection.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mlarun {

enum class Isa {
  kScalar,  // portable C++ (the reference path, any CPU)
  kAvx2,    // AVX2 + FMA
  kAvx512,  // AVX-512 F/BW/VL/DQ + VNNI (Ice Lake and later; older AVX-512 CPUs use kAvx2)
  // kAvx512 plus AVX512-BF16 dot products for bf16 weights: activations are rounded to bf16
  // before bf16 matmuls (as llama.cpp does), twice the multiply throughput of f32 FMAs. Not exact
  // f32: chosen by `FastestIsa`, never by `BestIsa`.
  kAvx512Bf16,
  // kAvx512Bf16 plus AMX-BF16 tile dot products for packed bf16 weights (every batch size, so a
  // token's result does not depend on its batch): activations rounded to bf16 as above. Needs
  // Linux to grant the process the tile state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once).
  kAmx,
};

struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx_vnni = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
  bool amd = false;  // vendor AMD (a tuning choice: kernels_avx512.cc)
};

// Reads CPUID (through the compiler's __builtin_cpu_supports).
CpuFeatures DetectCpuFeatures();
// Returns true if this CPU can run kernels compiled for `isa`.
bool IsaSupported(Isa isa);
// The best supported level with float32 activations (exact f32 arithmetic on loaded weights).
Isa BestIsa();
// The fastest supported level: kAmx where supported, else kAvx512Bf16 (activations rounded to
// bf16 for bf16 weights) where its bf16 dot products outpace float32 FMAs on exactly widened
// weights, else BestIsa().
Isa FastestIsa();
// vdpbf16ps multiply-adds per second over float32 FMA ones on this CPU, measured once per process
// (about 1 ms); 0 without AVX512-BF16.
double Bf16DotSpeedup();
// All supported levels, scalar first.
std::vector<Isa> SupportedIsas();
std::string_view IsaName(Isa isa);
// Parses "scalar", "avx2", "avx512", "avx512-bf16", "amx", "auto" (BestIsa) or "fast"
// (FastestIsa); returns false for anything else.
bool ParseIsa(std::string_view name, Isa* isa);
// One line describing the CPU features found, e.g. "avx2 fma avx512f ... (amx: no)".
std::string DescribeCpuFeatures();

}  // namespace mlarun
