// CPU feature detection via GCC/Clang __builtin_cpu_supports (CPUID with OS XSAVE support checks).
#include "kernels/isa.h"

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "kernels/kernel_table.h"

namespace mlarun {

CpuFeatures DetectCpuFeatures() {
  __builtin_cpu_init();
  CpuFeatures f;
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512_vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  f.amd = __builtin_cpu_is("amd");
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
  f.avx_vnni = __builtin_cpu_supports("avxvnni");
  f.amx_tile = __builtin_cpu_supports("amx-tile");
  f.amx_bf16 = __builtin_cpu_supports("amx-bf16");
  f.amx_int8 = __builtin_cpu_supports("amx-int8");
#endif
  return f;
}

namespace {

// Asks Linux (once per process) for the AMX tile data state, which it grants only on request
// (Documentation/arch/x86/xstate.rst: ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18).
bool AmxTileDataGranted() {
  static const bool granted = [] {
#if defined(__linux__) && defined(__x86_64__)
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtileData = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
#else
    return false;
#endif
  }();
  return granted;
}

}  // namespace

bool IsaSupported(Isa isa) {
  const CpuFeatures f = DetectCpuFeatures();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return f.avx2 && f.fma;
    case Isa::kAvx512:
      return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_vnni && f.fma;
    case Isa::kAvx512Bf16:
      return IsaSupported(Isa::kAvx512) && f.avx512_bf16;
    case Isa::kAmx:
      return IsaSupported(Isa::kAvx512Bf16) && f.amx_tile && f.amx_bf16 && AmxTileDataGranted();
  }
  return false;
}

Isa BestIsa() {
  if (IsaSupported(Isa::kAvx512)) return Isa::kAvx512;
  if (IsaSupported(Isa::kAvx2)) return Isa::kAvx2;
  return Isa::kScalar;
}

double Bf16DotSpeedup() {
  static const double speedup =
      IsaSupported(Isa::kAvx512Bf16) ? detail::MeasureBf16DotSpeedup() : 0.0;
  return speedup;
}

// The measured ratio is ~1.9 on AMD Zen 4 and ~0.5 on the Intel Xeon VMs of docs/performance.md:
// far from 1 on both, so the choice does not flip between runs.
Isa FastestIsa() {
  if (IsaSupported(Isa::kAmx)) return Isa::kAmx;
  return Bf16DotSpeedup() > 1.0 ? Isa::kAvx512Bf16 : BestIsa();
}

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx}) {
    if (IsaSupported(isa)) out.push_back(isa);
  }
  return out;
}

std::string_view IsaName(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kAvx512Bf16:
      return "avx512-bf16";
    case Isa::kAmx:
      return "amx";
  }
  return "?";
}

bool ParseIsa(std::string_view name, Isa* isa) {
  if (name == "auto") {
    *isa = BestIsa();
    return true;
  }
  if (name == "fast") {
    *isa = FastestIsa();
    return true;
  }
  for (Isa candidate : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16, Isa::kAmx}) {
    if (IsaName(candidate) == name) {
      *isa = candidate;
      return true;
    }
  }
  return false;
}

std::string DescribeCpuFeatures() {
  const CpuFeatures f = DetectCpuFeatures();
  std::string s;
  auto add = [&](bool present, const char* name) {
    if (present) s += std::string(s.empty() ? "" : " ") + name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512_vnni, "avx512_vnni");
  add(f.avx512_bf16, "avx512_bf16");
  add(f.avx_vnni, "avx_vnni");
  add(f.amx_tile, "amx_tile");
  add(f.amx_bf16, "amx_bf16");
  add(f.amx_int8, "amx_int8");
  if (!f.amx_tile) s += " (no AMX)";
  return s.empty() ? "no SIMD extensions" : s;
}

}  // namespace mlarun
