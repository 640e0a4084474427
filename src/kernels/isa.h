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
};

struct CpuFeatures {
  bool avx2 = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_vnni = false, avx512_bf16 = false, avx_vnni = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;
};

// Reads CPUID (through the compiler's __builtin_cpu_supports).
CpuFeatures DetectCpuFeatures();
// Returns true if this CPU can run kernels compiled for `isa`.
bool IsaSupported(Isa isa);
// The best supported level.
Isa BestIsa();
// All supported levels, scalar first.
std::vector<Isa> SupportedIsas();
std::string_view IsaName(Isa isa);
// Parses "scalar", "avx2", "avx512" or "auto" (best); returns false for anything else.
bool ParseIsa(std::string_view name, Isa* isa);
// One line describing the CPU features found, e.g. "avx2 fma avx512f ... (amx: no)".
std::string DescribeCpuFeatures();

}  // namespace mlarun
