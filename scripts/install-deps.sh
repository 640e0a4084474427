#!/usr/bin/env bash
# Installs the Debian 12 packages mlarun needs to build, test and run. Idempotent and quiet when
# everything is present already.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config nlohmann-json3-dev libcli11-dev
          libgtest-dev libgmock-dev libbenchmark-dev libpcre2-dev libxxhash-dev
          libcpp-httplib-dev python3 python3-numpy)
# Node.js + npm (tokenizer and server tests use npm packages as reference clients); keep an existing one.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing: ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
