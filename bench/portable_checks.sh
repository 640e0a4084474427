#!/usr/bin/env bash
# Runs the unit tests, the kernel benchmarks and `mlarun bench` on another x86-64 Linux machine
# (e.g. one with AMX, lent for a few minutes) from binaries built here, without the build's
# dependencies there.
#   bench/portable_checks.sh pack DIR         # here: stripped binaries + their shared libraries
#   bench/portable_checks.sh run DIR OUT      # there: writes logs to OUT, a summary to stdout
# `run` takes ~2.5 minutes on a 16-core Xeon: tests (~10 s), kernel benchmarks of the AMX, VNNI
# and bf16 products and attention (~15 s), the bench-v2-lite model made and quantised in
# /dev/shm (~20 s, 6.8 GB of memory), then `mlarun bench -p 512 -n 64 --depth 0,4096` with 2
# threads (--isa fast, --isa avx512) and with all cores. QUICK=1 stops after the benchmarks.
set -uo pipefail
cd "$(dirname "$0")/.."
binaries=(mlarun kernels_test kernels_bench core_test kv_test model_test engine_test runtime_test)

pack() {
  local dir="$1"
  [ -x build/bin/mlarun ] || scripts/build.sh release
  mkdir -p "$dir/bin" "$dir/lib"
  for b in "${binaries[@]}"; do strip -o "$dir/bin/$b" "build/bin/$b"; done
  # Every shared library but the C library itself (the target's is used: glibc >= 2.34).
  ldd "${binaries[@]/#/build/bin/}" | awk '/=>/ {print $3}' | sort -u | while read -r lib; do
    case "$lib" in */libc.so.* | */libm.so.*) ;; *) cp -L "$lib" "$dir/lib/" ;; esac
  done
  du -sh "$dir"
}

run() {
  local dir out t0
  dir="$(cd "$1" && pwd)"
  out="$2"
  mkdir -p "$out"
  export LD_LIBRARY_PATH="$dir/lib"
  local bin="$dir/bin"
  t0=$(date +%s)
  step() { echo "=== [$(($(date +%s) - t0)) s] $*"; }
  step machine
  { lscpu; grep -m1 '^flags' /proc/cpuinfo; free -g; uname -r; } > "$out/machine.txt" 2>&1
  grep -E "Model name|Model:|^CPU\(s\)|L2|L3" "$out/machine.txt"
  grep -o -w -E "amx_[a-z0-9]+|avx512_bf16|avx512_vnni|avx512_fp16" "$out/machine.txt" | sort -u |
    tr '\n' ' '
  echo
  step tests
  for t in kernels_test core_test kv_test model_test engine_test runtime_test; do
    timeout 300 "$bin/$t" --gtest_brief=1 > "$out/test_$t.txt" 2>&1
    echo "$t rc=$? $(grep -E 'PASSED|FAILED|SKIPPED' "$out/test_$t.txt" | tr '\n' ' ')"
  done
  grep -h -A12 -E "^\[  FAILED" "$out"/test_*.txt | head -40
  step kernels_bench
  timeout 300 "$bin/kernels_bench" --benchmark_min_time=0.2 \
    --benchmark_filter='BM_MatMul/(amx_q8|avx512_q8|amx_bf16packed|avx512bf16dot_bf16packed)/rows:(2048|32768)/tokens:(16|48|512)/|BM_AttentionGemmBf16|BM_IssueRate' \
    > "$out/kernels_bench.txt" 2>&1
  grep -E "^BM_" "$out/kernels_bench.txt" | awk '{print $1, $(NF-1), $NF}'
  [ -n "${QUICK:-}" ] && return 0
  local model=/dev/shm/mlarun-bench-v2-lite
  step make-model
  [ -f "$model/config.json" ] ||
    "$bin/mlarun" make-model --preset bench-v2-lite --dtype bf16 --out "$model" > /dev/null
  [ -f "$model-q8/config.json" ] ||
    "$bin/mlarun" quantize --model "$model" --out "$model-q8" > /dev/null
  bench() {
    step "bench $*"
    timeout 300 "$bin/mlarun" bench -p 512 -n 64 --depth 0,4096 --repeats 2 "$@" 2>&1 |
      tee -a "$out/bench.txt" | grep -E "^(amx|vdpbf16ps|model| +[0-9])"
  }
  bench --model "$model" -t 2 --isa fast
  bench --model "$model-q8" -t 2 --isa fast --kv-dtype int8
  bench --model "$model-q8" -t 2 --isa avx512 --kv-dtype int8
  bench --model "$model" -t 0 --isa fast
  bench --model "$model-q8" -t 0 --isa fast --kv-dtype int8
  step done
}

case "${1:-}" in
  pack) pack "${2:?usage: $0 pack DIR}" ;;
  run) run "${2:?usage: $0 run DIR OUT}" "${3:?usage: $0 run DIR OUT}" ;;
  *)
    echo "usage: $0 pack DIR | run DIR OUT" >&2
    exit 2
    ;;
esac
