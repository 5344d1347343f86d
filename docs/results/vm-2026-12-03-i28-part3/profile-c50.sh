#!/usr/bin/env bash
# Where the echo's CPU goes at 50 connections, 64 B: percore with the default features, percore
# with skipped sends as well, and the C liburing echo; perf record of the server (its one loop
# thread does all the work) for 4 s under load. Run under /work/wt/bench; it changes nothing on
# the host (a temporary directory, loopback ports 28960-28962).
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1 # the checkout
w=$(mktemp -d); trap 'rm -rf "$w"' EXIT
GOFLAGS=-ldflags=-checklinkname=0 go build -o "$w/echo" ./examples/echo
go build -C examples/bench -o "$w/load" ./load
gcc -O2 -o "$w/cecho" examples/bench/baseline/uringc/echo.c -luring
port=28959
for side in default skip_sends liburing; do
  port=$((port + 1))
  case $side in
    default) taskset -c 0 "$w/echo" -addr 127.0.0.1:$port -cores 0 -backend uring >/dev/null 2>&1 & ;;
    skip_sends) taskset -c 0 "$w/echo" -addr 127.0.0.1:$port -cores 0 -backend uring \
      -uring-features registered_ring,skip_sends >/dev/null 2>&1 & ;;
    liburing) taskset -c 0 "$w/cecho" 127.0.0.1:$port >/dev/null 2>&1 & ;;
  esac
  srv=$!
  sleep 0.5
  taskset -c 1 "$w/load" -addr 127.0.0.1:$port -conns 50 -bytes 64 -warmup 1 -seconds 8 -json -server-pid $srv >"$w/$side.json" 2>/dev/null &
  ld=$!
  sleep 3
  perf record -F 999 -p $srv -o "$w/$side.data" -- sleep 4 >/dev/null 2>&1
  wait $ld
  kill -TERM $srv; wait $srv 2>/dev/null
  echo "== $side: $(sed -n 's/.*"rps":\([0-9.]*\).*"server_cpu_us_per_req":\([0-9.]*\).*/rps \1 cpu_us_per_req \2/p' "$w/$side.json")"
  perf report -i "$w/$side.data" --sort dso --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -6
  perf report -i "$w/$side.data" --sort sym --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -30
done
