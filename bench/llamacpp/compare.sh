#!/usr/bin/env bash
# Times mlarun and llama.cpp on the same machine, in the same minutes, on the same weights:
# the bench-v2-lite model (generated once, as bench/run_bench.sh does) written as GGUF by
# `mlarun quantize --type` (bf16, q8_0, q4_k_m) for llama.cpp, whose prebuilt CPU build comes from
# the npm registry (node-llama-cpp, pinned below; installed under build/llamacpp-npm, nothing
# committed). mlarun runs the bf16 checkpoint, its own Q8 checkpoint and the Q4_K_M file itself.
# Rounds alternate the engines, so the VM's drifting speed hits both alike. First checks that both
# engines produce the same greedy tokens, so the two files hold the same model.
# The q8_0 and q4_k_m files keep MLA's attn_k_b and attn_v_b (2.1 M of a V2-Lite layer's 13.8 M
# attention weights) in BF16: this llama.cpp build aborts on them in Q8_0, and on the q4_k_m file
# too (docs/gguf.md, "llama.cpp's own limits here").
# Usage: bench/llamacpp/compare.sh [MODEL_DIR=/tmp/mlarun-bench-v2-lite] [ROUNDS=2] [DEPTHS=0,4096]
# Needs: npm registry access, ~14 GB of disk next to MODEL_DIR, Debian's python3-numpy.
set -euo pipefail
cd "$(dirname "$0")/../.."
model="${1:-/tmp/mlarun-bench-v2-lite}"
rounds="${2:-2}"
depths="${3:-0,4096}"
NODE_LLAMA_CPP=3.22.1  # the npm package version (tests/e2e/llamacpp_crosscheck.py reads this line)
python=/usr/bin/python3
npm_dir=build/llamacpp-npm

[ -x build/bin/mlarun ] || scripts/build.sh release
[ -f "$model/config.json" ] || build/bin/mlarun make-model --preset bench-v2-lite --dtype bf16 --out "$model"
[ -f "$model-q8/config.json" ] || build/bin/mlarun quantize --model "$model" --out "$model-q8"
[ -f "$model-bf16.gguf" ] || build/bin/mlarun quantize --model "$model" --type bf16 --out "$model-bf16.gguf"
[ -f "$model-q8_0.gguf" ] || build/bin/mlarun quantize --model "$model" --type q8_0 \
  --tensor-type attn_k_b=bf16 --tensor-type attn_v_b=bf16 --out "$model-q8_0.gguf"
[ -f "$model-q4_k_m.gguf" ] || build/bin/mlarun quantize --model "$model" --type q4_k_m \
  --tensor-type attn_k_b=bf16 --tensor-type attn_v_b=bf16 --out "$model-q4_k_m.gguf"
# The package's postinstall step would build llama.cpp from source where no prebuilt fits; skipped.
npm_config_ignore_scripts=true bash scripts/npm-install.sh "$npm_dir" "node-llama-cpp@$NODE_LLAMA_CPP"
cp bench/llamacpp/llamacpp_bench.mjs "$npm_dir/"
llamacpp() { node "$npm_dir/llamacpp_bench.mjs" "$@"; }

prompt_ids=100000,5000,6000,7000,8000,9000,10000,11000
ours=$(build/bin/mlarun generate -m "$model" --prompt-ids "$prompt_ids" -n 12 --ignore-eos -t 2 2>/dev/null | head -1)
theirs=$(llamacpp "$model-bf16.gguf" --greedy "$prompt_ids" -n 12 | "$python" -c \
  'import json, sys; print(",".join(map(str, json.load(sys.stdin)["greedy_tokens"])))')
echo "# greedy tokens, bf16: mlarun $ours / llama.cpp $theirs"
[ "$ours" = "$theirs" ] || echo "# WARNING: the engines' greedy tokens differ" >&2

echo "# $(date -u +%F) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
for round in $(seq "$rounds"); do
  echo "# round $round"
  build/bin/mlarun bench --model "$model" -p 512 -n 64 --depth "$depths" -t 2 --repeats 3 --kv-dtype bf16 --json
  llamacpp "$model-bf16.gguf" --depth "$depths" -p 512 -n 64 -t 2 --repeats 3
  build/bin/mlarun bench --model "$model-q8" -p 512 -n 64 --depth "$depths" -t 2 --repeats 3 --kv-dtype bf16 --json
  llamacpp "$model-q8_0.gguf" --depth "$depths" -p 512 -n 64 -t 2 --repeats 3
  build/bin/mlarun bench --model "$model-q4_k_m.gguf" -p 512 -n 64 --depth "$depths" -t 2 --repeats 3 --kv-dtype bf16 --json
  llamacpp "$model-q4_k_m.gguf" --depth "$depths" -p 512 -n 64 -t 2 --repeats 3
done | tee "$model-vs-llamacpp.log"
"$python" bench/llamacpp/summarize.py "$model-vs-llamacpp.log"
