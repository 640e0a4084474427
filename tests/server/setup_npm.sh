#!/usr/bin/env bash
# Installs the official `openai` npm client (the reference client of the server tests) into DIR
# (the build tree, e.g. build/npm-server; nothing here is committed). Idempotent; fails loudly
# without npm or registry access.
set -euo pipefail
dir=${1:?usage: setup_npm.sh DIR}
exec bash "$(dirname "$0")/../../scripts/npm-install.sh" "$dir" openai@4.104.0
