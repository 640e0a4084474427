#!/usr/bin/env bash
# Builds mlarun and runs the main job: generation on the embedded default model (models/default).
# Extra arguments go to `mlarun generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh release >&2
exec build/bin/mlarun generate --prompt-ids "1,5,9,12" -n 24 "$@"
