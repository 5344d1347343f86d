#!/usr/bin/env bash
# CPU profiles of examples/ws_gateway (1 loop, cpu0) under wsload (cpu1): echo of 64 B at
# 1,000 connections, and a publish every 10 ms to 1,000 subscribers. Bounded: about 40 s.
# Build first: go build -o /tmp/i27bin/ ./examples/ws_gateway && go build -C examples/bench -o /tmp/i27bin/ ./wsload
# Run through the benchmark lock (/work/wt/bench); it writes /tmp/i27cpu or /tmp/i27prof. Undo: delete them.
set -euo pipefail
ulimit -n "$(ulimit -Hn)"
out=/tmp/i27cpu; rm -rf "$out"; mkdir -p "$out"
run() { # name, port, wsload args...
  local name=$1 port=$2; shift 2
  env GOMAXPROCS=1 taskset -c 0 /tmp/i27bin/ws_gateway -addr 127.0.0.1:$port -secret s -ping-interval 30s -cores 0 -backend uring -metrics 127.0.0.1:$((port+1)) 2>"$out/$name-gw.log" &
  local gw=$!
  for _ in $(seq 50); do grep -q "listening on" "$out/$name-gw.log" && break; sleep 0.2; done
  timeout 60 taskset -c 1 /tmp/i27bin/wsload -addr 127.0.0.1:$port -secret s "$@" -json -server-pid $gw > "$out/$name.json" &
  local wl=$!
  sleep 3
  curl -s -o "$out/$name.pb.gz" "http://127.0.0.1:$((port+1))/debug/pprof/profile?seconds=5"
  wait $wl || true
  kill $gw; wait $gw || true
  go tool pprof -top /tmp/i27bin/ws_gateway "$out/$name.pb.gz" 2>/dev/null | head -45 > "$out/$name-top.txt"
}
run echo 28801 -mode echo -conns 1000 -bytes 64 -warmup 1s -seconds 9s
run fanout 28811 -mode fanout -conns 1000 -interval 10ms -seconds 10s -bytes 64
