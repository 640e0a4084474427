#!/usr/bin/env bash
# Installs dependencies (Debian 12) and builds the Release tree into build/ (CLI: build/bin/mlarun).
# Usage: scripts/build.sh [preset]   (release | asan)
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" -j "$(nproc)"
