#!/usr/bin/env bash
# The ISA-specific kernel objects (src/kernels/cpu/*.cc, compiled with -mavx2, -mavx512f,
# -mamx-tile, ...) must not define weak symbols that code compiled for the baseline could bind to:
# the linker keeps one copy of each weak symbol for the whole program, so a std::vector::resize
# instantiated in an AVX-512 file can end up running, with its AVX-512 instructions, in the
# tokenizer on a CPU without AVX-512 (this happened: SIGILL in the ASan build). Allowed: symbols
# of the namespaces only ISA files compile (mlarun::avx2::, avx512::, avx512bf16::; not amx::,
# whose tile-kernel headers the tests also compile), destructors (no arithmetic to widen) and
# type information (data).
# Usage: isa_symbols_test.sh BUILD_DIR
set -euo pipefail
dir="$1/src/kernels/CMakeFiles/mlarun_kernels.dir/cpu"
shopt -s nullglob
objects=("$dir"/*.o)
if ((${#objects[@]} == 0)); then
  echo "no kernel objects under $dir" >&2
  exit 1
fi
bad=0
for object in "${objects[@]}"; do
  while IFS= read -r symbol; do
    case "$symbol" in
      *mlarun::avx2::* | *mlarun::avx512::* | *mlarun::avx512bf16::*) ;;
      *::~* | *::_M_dispose\(\)) ;;
      "typeinfo for "* | "typeinfo name for "* | "vtable for "* | DW.ref.__gxx_personality_v0) ;;
      *)
        echo "$(basename "$object"): weak symbol shared with baseline code: $symbol"
        bad=1
        ;;
    esac
  done < <(nm -C --defined-only "$object" | awk '$2 == "W" || $2 == "V" { $1 = ""; $2 = ""; sub(/^  /, ""); print }')
done
if ((bad)); then
  echo "move the code into a baseline-compiled file (e.g. core/scratch_vector.h)" >&2
  exit 1
fi
echo "ok: ${#objects[@]} ISA objects, no shared weak symbols"
