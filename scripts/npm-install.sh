#!/usr/bin/env bash
# Installs exact npm package versions into DIR (a build-tree folder; nothing there is committed),
# for tests that drive reference clients and libraries from Node.js. Idempotent: does nothing when
# DIR already holds these exact versions (a stamp file). Fails loudly without node/npm or
# registry access.
# Usage: scripts/npm-install.sh DIR PACKAGE@VERSION...
set -euo pipefail
dir=${1:?usage: npm-install.sh DIR PACKAGE@VERSION...}
shift
packages=("$@")
(( ${#packages[@]} > 0 )) || { echo "npm-install.sh: no packages given" >&2; exit 1; }
stamp="$dir/.mlarun-npm-stamp"
want="${packages[*]}"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
for tool in node npm; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "npm-install.sh: '$tool' not found; scripts/install-deps.sh installs Node.js and npm" >&2
    exit 1
  }
done
mkdir -p "$dir"
[[ -f "$dir/package.json" ]] || echo '{"name": "mlarun-npm", "private": true}' >"$dir/package.json"
if ! npm install --prefix "$dir" --no-audit --no-fund --save-exact "${packages[@]}" >&2; then
  echo "npm-install.sh: npm install of ${packages[*]} into $dir failed; it needs the npm registry" >&2
  exit 1
fi
echo "$want" >"$stamp"
