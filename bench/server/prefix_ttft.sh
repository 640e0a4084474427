#!/usr/bin/env bash
# Time to first token with and without the prefix cache, through `mlarun serve` on loopback:
# a 1,000-token prefix (token ids) + 2 different tokens, max_tokens 1 (so the request time is the
# time to the first token): cold, then warm (prefix in memory), then after a restart with the disk
# cache. Usage: bench/server/prefix_ttft.sh MODEL_DIR [BUILD_DIR] [extra serve options...]
set -euo pipefail
model=${1:?usage: prefix_ttft.sh MODEL_DIR [BUILD_DIR] [serve options...]}
build=${2:-build}
shift $(( $# >= 2 ? 2 : 1 ))
work=$(mktemp -d)
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT

start() {
  "$build/bin/mlarun" serve --model "$model" --port 0 --prefix-cache-dir "$work/cache" "$@" \
    >"$work/port" 2>>"$work/log" &
  pid=$!
  until grep -q "listening on" "$work/port" 2>/dev/null; do
    kill -0 $pid 2>/dev/null || { cat "$work/log"; exit 1; }
    sleep 0.2
  done
  port=$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$work/port")
}
body() {  # body LAST_TOKEN
  python3 -c "import json,random; r=random.Random(7); p=[r.randrange(1000) for _ in range(1000)]
print(json.dumps({'prompt': p + [$1, $1 + 1], 'max_tokens': 1, 'temperature': 0}))"
}
ask() {  # ask LABEL LAST_TOKEN
  body "$2" >"$work/body.json"
  curl -s -o "$work/out.json" -w "%{time_total}" "http://127.0.0.1:$port/v1/completions" \
    -H 'Content-Type: application/json' --data-binary @"$work/body.json" >"$work/time"
  python3 -c "import json; u=json.load(open('$work/out.json'))['usage']
print('%-28s %8.3f s   prompt %d, cached %d' % ('$1', float(open('$work/time').read()), u['prompt_tokens'], u['prompt_tokens_details']['cached_tokens']))"
}
start "$@"
ask "cold (no cache)" 11
ask "warm (memory prefix cache)" 21
kill -TERM $pid; wait $pid
start "$@"
ask "after restart (disk cache)" 31
