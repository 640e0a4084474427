#!/usr/bin/env bash
# Installs the official `openai` npm client (the reference client of the server tests) into DIR
# (the build tree, e.g. build/npm-server; nothing here is committed). Idempotent; fails loudly
# without npm or registry access.
set -euo pipefail
dir=${1:?usage: setup_npm.sh DIR}
packages=(openai@4.104.0)
stamp="$dir/.mlarun-npm-stamp"
want="${packages[*]}"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
for tool in node npm; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "setup_npm.sh: '$tool' not found; scripts/install-deps.sh installs Node.js and npm" >&2
    exit 1
  }
done
mkdir -p "$dir"
[[ -f "$dir/package.json" ]] || echo '{"name": "mlarun-server-e2e", "private": true}' >"$dir/package.json"
if ! npm install --prefix "$dir" --no-audit --no-fund --save-exact "${packages[@]}" >&2; then
  echo "setup_npm.sh: npm install failed; the server e2e test needs the npm registry" >&2
  exit 1
fi
echo "$want" >"$stamp"
