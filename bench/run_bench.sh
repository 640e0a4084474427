#!/usr/bin/env bash
# Reproduces the speed figures of README.md / docs/performance.md on this machine:
# generates the bench-v2-lite model (4.5 GB, once), quantises it to Q8 (once), then runs
# `mlarun bench` for bf16 and int8 weights at depths 0 and 4096 with 2 threads, each with a bf16
# and an int8 KV cache.
# Usage: bench/run_bench.sh [MODEL_DIR=/tmp/mlarun-bench-v2-lite] [DEPTHS=0,4096]
set -euo pipefail
cd "$(dirname "$0")/.."
model="${1:-/tmp/mlarun-bench-v2-lite}"
depths="${2:-0,4096}"
[ -x build/bin/mlarun ] || scripts/build.sh release
[ -f "$model/config.json" ] || build/bin/mlarun make-model --preset bench-v2-lite --dtype bf16 --out "$model"
[ -f "$model-q8/config.json" ] || build/bin/mlarun quantize --model "$model" --out "$model-q8"
echo "# $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
for m in "$model" "$model-q8"; do
  for kv in bf16 int8; do
    echo "# $m, --kv-dtype $kv"
    build/bin/mlarun bench --model "$m" -p 512 -n 64 --depth "$depths" -t 2 --repeats 5 \
      --kv-dtype "$kv" --json
  done
done
