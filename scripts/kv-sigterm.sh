#!/usr/bin/env bash
# kv-sigterm.sh: examples/kv on two loops gets SIGTERM while redis-benchmark
# drives commands on random keys (about half of them owned by the other
# loop: cross-loop calls, and their replies, in flight as the loops stop).
# Each round must end with the server's exit within its deadline (kv's
# Shutdown waits at most 5 s; DEADLINE, default 7 s, adds the process's
# own start and exit) and status 0. A loop that lost its wake-up (issue
# 23, fault 3) never exits: the round fails and the server is killed.
#
# It changes nothing on the host: it builds examples/kv into a temporary
# directory, runs it on loopback (port 0) and prints one line per round,
# then a summary; it exits 1 if any round failed.
#
#   scripts/kv-sigterm.sh                    # 40 rounds on each backend
#   ROUNDS=5 BACKENDS=uring scripts/kv-sigterm.sh
#   TREE=/path/to/checkout scripts/kv-sigterm.sh   # another checkout's kv
#   scripts/kv-sigterm.sh --dry-run          # print what it would run
#
# Needs redis-benchmark and redis-cli (Debian's redis-tools;
# scripts/ensure-tools.sh installs them).
set -euo pipefail

dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; fi
here=$(cd "$(dirname "$0")/.." && pwd)
tree=${TREE:-$here}
rounds=${ROUNDS:-40}
backends=${BACKENDS:-uring epoll}
deadline=${DEADLINE:-7}
cores=${CORES:-0,1}

work=$(mktemp -d)
srv=
bench=
cleanup() {
  if [ -n "$bench" ]; then kill "$bench" 2>/dev/null || true; fi
  if [ -n "$srv" ]; then kill -KILL "$srv" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ "$dry" = 1 ]; then
  echo "+ (cd $tree && go build -o $work/kv ./examples/kv)"
  for b in $backends; do
    echo "+ $rounds rounds: $work/kv -addr 127.0.0.1:0 -cores $cores -backend $b; taskset -c 1 redis-benchmark -P 16 -c 50 -r 1000000 -t set,get; kill -TERM after 0.3-1.3 s; exit within ${deadline} s"
  done
  exit 0
fi
for tool in redis-benchmark redis-cli; do
  if ! command -v "$tool" >/dev/null; then
    echo "kv-sigterm: $tool is not installed (apt-get install -y redis-tools)" >&2
    exit 2
  fi
done
(cd "$tree" && go build -o "$work/kv" ./examples/kv)

# now_ms prints the time in milliseconds.
now_ms() { date +%s%3N; }

failed=0
total=0
for b in $backends; do
  worst=0
  for r in $(seq 1 "$rounds"); do
    total=$((total + 1))
    "$work/kv" -addr 127.0.0.1:0 -cores "$cores" -backend "$b" >"$work/out" 2>"$work/err" &
    srv=$!
    port=
    for _ in $(seq 1 100); do
      port=$(sed -n 's/^kv: .* listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/out")
      if [ -n "$port" ]; then break; fi
      sleep 0.05
    done
    if [ -z "$port" ]; then
      echo "$b round $r: the server did not start: $(cat "$work/err")"
      failed=$((failed + 1))
      kill -KILL "$srv" 2>/dev/null || true
      wait "$srv" 2>/dev/null || true
      srv=
      continue
    fi
    taskset -c 1 redis-benchmark -h 127.0.0.1 -p "$port" -P 16 -c 50 -n 100000000 -r 1000000 \
      -t set,get -q >/dev/null 2>&1 &
    bench=$!
    # Let the load run for a while, a different while each round.
    sleep "0.$((3 + RANDOM % 10))"
    cross=$(redis-cli -p "$port" INFO 2>/dev/null | tr -d '\r' | sed -n 's/^percore_cross_loop_commands://p')
    t0=$(now_ms)
    kill -TERM "$srv"
    gone=0
    for _ in $(seq 1 $((deadline * 50))); do
      if ! kill -0 "$srv" 2>/dev/null; then gone=1; break; fi
      sleep 0.02
    done
    took=$(($(now_ms) - t0))
    status=0
    if [ "$gone" = 0 ]; then
      kill -KILL "$srv" 2>/dev/null || true
      wait "$srv" 2>/dev/null || true
      status=killed
    else
      wait "$srv" || status=$?
    fi
    srv=
    kill "$bench" 2>/dev/null || true
    wait "$bench" 2>/dev/null || true
    bench=
    verdict=ok
    if [ "$status" != 0 ]; then
      verdict=FAIL
      failed=$((failed + 1))
    fi
    if [ "$took" -gt "$worst" ]; then worst=$took; fi
    echo "$b round $r: cross-loop commands ${cross:-?}, exit ${status} after ${took} ms: $verdict"
    if [ "$verdict" = FAIL ]; then sed 's/^/    /' "$work/err" | tail -5; fi
  done
  echo "$b: slowest exit ${worst} ms"
done
echo "kv-sigterm: $((total - failed)) of $total rounds exited within ${deadline} s with status 0"
[ "$failed" = 0 ]
