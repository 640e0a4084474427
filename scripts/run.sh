#!/usr/bin/env bash
# Builds mlarun and runs the main job: text generation with the embedded default model
# (models/default: the small MLA + DeepSeekMoE model trained by tools/train/ on KJV Bible and
# Jargon File text). Extra arguments go to `mlarun generate` and override the defaults below.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh release >&2
exec build/bin/mlarun generate --prompt "And it came to pass" -n 64 --temperature 0.8 --top-p 0.95 \
  --seed 1 "$@"
