#!/usr/bin/env bash
# Driver of the ServerE2E ctest: makes a tiny-v3 model (with tokenizer), installs the `openai` npm
# client, starts `mlarun serve` on a free loopback port and runs tests/server/e2e/server_test.cjs
# in three phases: main; restart (graceful SIGTERM, restart with the same --prefix-cache-dir: the
# prefix comes back from disk); corrupt (every cache file damaged: detected, logged, skipped).
# Usage: server_e2e.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
mlarun="$build_dir/bin/mlarun"
work="$build_dir/server_e2e"
npm_dir="$build_dir/npm-server"
bash "$source_dir/tests/server/setup_npm.sh" "$npm_dir"
export MLARUN_NPM_DIR="$npm_dir"

rm -rf "$work"
mkdir -p "$work"
"$mlarun" make-model --preset tiny-v3 --out "$work/tiny" >/dev/null
if [[ ! -f "$work/tiny/tokenizer.json" ]]; then
  cp "$source_dir/tests/server/testdata/tokenizer.json" "$source_dir/tests/server/testdata/tokenizer_config.json" \
     "$work/tiny/"
fi

pid=""
start_server() {
  local log=$1
  : >"$work/port"
  "$mlarun" serve --model "$work/tiny" --host 127.0.0.1 --port 0 -t 2 --kv-budget 64MiB \
    --max-context 4096 --max-body 1MiB --prefix-cache-dir "$work/cache" \
    >"$work/port" 2>>"$log" &
  pid=$!
  for _ in $(seq 1 200); do
    if grep -q "listening on" "$work/port" 2>/dev/null; then break; fi
    kill -0 "$pid" 2>/dev/null || { echo "server died:"; cat "$log"; exit 1; }
    sleep 0.05
  done
  port=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$work/port")
  [[ -n "$port" ]] || { echo "server did not start"; cat "$log"; exit 1; }
}
stop_server() {
  kill -TERM "$pid"
  local rc=0
  wait "$pid" || rc=$?
  pid=""
  [[ $rc -eq 0 ]] || { echo "server exited with $rc after SIGTERM"; return 1; }
}
trap '[[ -n "$pid" ]] && kill -KILL "$pid" 2>/dev/null; true' EXIT

run_phase() {
  node "$source_dir/tests/server/e2e/server_test.cjs" --base "http://127.0.0.1:$port" --phase "$1" \
    --state "$work/state.json" --out "$work/results.json"
}

status=0
start_server "$work/server1.log"
run_phase main || status=1
stop_server || status=1
grep -q "stopped" "$work/server1.log" || { echo "no graceful stop in the log"; status=1; }
grep -q "warm-up: .*-token prefill" "$work/server1.log" || { echo "no start-up warm-up in the log"; status=1; }
ls "$work/cache"/*.kvb >/dev/null 2>&1 || { echo "no prefix blocks on disk after shutdown"; status=1; }

start_server "$work/server2.log"
run_phase restart || status=1
stop_server || status=1

# Damage every block file (one payload byte near the end): each must fail its checksum.
for f in "$work/cache"/*.kvb; do
  printf '\x55' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") - 5)) conv=notrunc status=none
done
start_server "$work/server3.log"
run_phase corrupt || status=1
stop_server || status=1
if grep -q "checksum mismatch" "$work/server3.log"; then
  echo "ok   corrupt cache file reported: $(grep -m1 'checksum mismatch' "$work/server3.log")"
else
  echo "FAIL no log line for the corrupt cache files"
  status=1
fi
cat "$work/results.json"
exit $status
