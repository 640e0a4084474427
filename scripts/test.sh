#!/usr/bin/env bash
# Builds mlarun and runs the whole test suite (unit + e2e). Usage: scripts/test.sh [preset]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
scripts/build.sh "$preset"
ctest --preset "$preset" --label-exclude needs_weights
