#!/usr/bin/env bash
# ab2.sh OUT: issue 27 floors, part 2, second window: idle on both backends (A, B) and echo against gws.
# A = /tmp/i27d/A/ws_gateway (i27d's base, main at ac8c1e4), B = /tmp/i27d/B/ws_gateway (branch i27d),
# gws = /tmp/i27d/wsgws (examples/bench/baseline/wsgws). Rows idle (18,000 subscribed, RSS growth per
# connection after 3 s) on epoll and io_uring for A and B, and echo (1,000 connections, 64-byte
# binary messages, 5 s after 1 s) for A, B and gws, 3 interleaved repeats; B64 is B with -recv-buffers 64
# (64 receive buffers of 16 KiB instead of 512) in both rows. Server GOMAXPROCS=1 on cpu0, wsload (/tmp/i27d/wsload) on cpu1.
# Build: git archive ac8c1e4 | tar -x -C /tmp/i27d/basesrc; (cd /tmp/i27d/basesrc && go build -o /tmp/i27d/A/ws_gateway ./examples/ws_gateway/);
#        go build -o /tmp/i27d/B/ws_gateway ./examples/ws_gateway/; (cd examples/bench && go build -o /tmp/i27d/wsload ./wsload/ && go build -o /tmp/i27d/wsgws ./baseline/wsgws/)
# About 3 minutes. Writes OUT/runs.jsonl and a log per run; changes nothing else.
set -euo pipefail
out=$1; mkdir -p "$out"; : > "$out/runs.jsonl"
ulimit -n "$(ulimit -Hn)"
port=29450
run() { # server row wsload-args...
  local s=$1 row=$2; shift 2
  port=$((port+1))
  local bin
  case $s in
    A) bin=(/tmp/i27d/A/ws_gateway -cores 0 -backend uring);; B) bin=(/tmp/i27d/B/ws_gateway -cores 0 -backend uring);;
    Aepoll) bin=(/tmp/i27d/A/ws_gateway -cores 0 -backend epoll);; Bepoll) bin=(/tmp/i27d/B/ws_gateway -cores 0 -backend epoll);;
    B64) bin=(/tmp/i27d/B/ws_gateway -cores 0 -backend uring -recv-buffers 64);;
    *) bin=("/tmp/i27d/$s");;
  esac
  env GOMAXPROCS=1 taskset -c 0 "${bin[@]}" -addr 127.0.0.1:$port -secret s -ping-interval 30s > "$out/$s-$row-$port.log" 2>&1 &
  local gw=$!
  for _ in $(seq 100); do grep -q "listening on" "$out/$s-$row-$port.log" && break; sleep 0.1; done
  local j
  j=$(timeout 100 taskset -c 1 /tmp/i27d/wsload -addr 127.0.0.1:$port -secret s "$@" -json -server-pid $gw || echo '{"failed":true}')
  kill -INT $gw 2>/dev/null || true; sleep 0.3; kill -KILL $gw 2>/dev/null || true; wait $gw 2>/dev/null || true
  echo "{\"server\":\"$s\",\"row\":\"$row\",\"load\":$j}" >> "$out/runs.jsonl"
}
for _ in 1 2 3; do
  for s in Aepoll Bepoll A B B64; do run $s idle -mode idle -conns 18000 -settle 3s; done
  for s in A B B64 wsgws; do run $s echo -mode echo -conns 1000 -bytes 64 -warmup 1s -seconds 5s; done
done
