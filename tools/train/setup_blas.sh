#!/usr/bin/env bash
# Prints a directory holding OpenBLAS's libblas.so.3 / liblapack.so.3, for LD_LIBRARY_PATH.
#
# Debian's python3-torch 1.13 does its matrix products through libblas.so.3, which on a
# default system is the netlib reference BLAS (about 2 GFLOP/s here; OpenBLAS: about 15-30).
# Installing libopenblas0 would switch libblas.so.3 for every program on the machine, so
# instead this downloads the Debian package libopenblas0-openmp with `apt-get download`
# and unpacks it under tools/train/work/openblas; only processes started with
# LD_LIBRARY_PATH set to the printed directory use it. (The OpenMP build shares torch's
# libgomp thread pool.) Idempotent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir="$here/work/openblas"
lib="$dir/root/usr/lib/x86_64-linux-gnu/openblas-openmp"
if [[ ! -f "$lib/libblas.so.3" ]]; then
  mkdir -p "$dir"
  (cd "$dir" && apt-get download libopenblas0-openmp >&2)
  dpkg-deb -x "$(ls "$dir"/libopenblas0-openmp_*.deb | head -n 1)" "$dir/root"
fi
[[ -f "$lib/libblas.so.3" ]] || { echo "setup_blas.sh: no libblas.so.3 in $lib" >&2; exit 1; }
echo "$lib"
