#!/usr/bin/env bash
# Reproduces the trained models end to end (about 2 hours on 2 cores):
#   data -> tokenizer (+ check against HF tokenizers) -> MLA+MoE, MHA, GQA, MQA, MLA dense
#   -> logits check against mlarun and the NumPy reference.
# Models are written to tools/train/work/out/<model>; `train_all.sh --install` also copies
# them to models/default (MLA+MoE) and models/baselines/{mha,gqa,mqa}.
# Needs: Debian python3-torch + python3-numpy (/usr/bin/python3), node + npm, apt-get,
# build/bin/mlarun (cmake --build build). Runs one training at a time, under nice.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
py=/usr/bin/python3
install=0
[[ "${1:-}" == "--install" ]] && install=1

export LD_LIBRARY_PATH="$("$here/setup_blas.sh")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Threads waiting at OpenMP barriers sleep instead of spinning: on a shared, busy machine
# spinning made training 3-5x slower.
export OMP_WAIT_POLICY=PASSIVE
cd "$repo"
$py tools/train/prepare_data.py
$py tools/train/bpe.py train --input tools/train/work/train.txt --vocab-size 4096 \
    --model-max-length 2048 --out tools/train/work/tokenizer
$py tools/train/check_tokenizer.py --model tools/train/work/tokenizer

# The one command per model (same data order, steps, batch, context, schedule and seed).
STEPS=${STEPS:-700}
for model in mla_moe mha gqa mqa mla_dense; do
  nice -n 10 $py tools/train/train.py --model "$model" --steps "$STEPS" --batch 8 --context 256 \
      --lr 2e-3 --warmup 30 --gamma "${GAMMA:-1e-2}" --seed 1234 --eval-every 100 \
      --out "tools/train/work/out/$model"
  $py tools/train/compare_logits.py --model "tools/train/work/out/$model" \
      --results tools/train/results.json --name "$model" --atol 1e-3
done

if [[ $install == 1 ]]; then
  declare -A dest=([mla_moe]=models/default [mla_dense]=models/baselines/mla_dense [mha]=models/baselines/mha \
                   [gqa]=models/baselines/gqa [mqa]=models/baselines/mqa)
  for model in "${!dest[@]}"; do
    mkdir -p "${dest[$model]}"
    cp "tools/train/work/out/$model"/{config.json,model.safetensors,tokenizer.json,tokenizer_config.json} \
       "${dest[$model]}/"
  done
fi
