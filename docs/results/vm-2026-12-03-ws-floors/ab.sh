#!/usr/bin/env bash
# ab.sh OUT: issue 27 floors A/B. A = /tmp/i27c/base/ws_gateway (main at addc9b9), B = /tmp/i27c/new/ws_gateway (i27c 61d5475: WriteShared), C = /tmp/i27c/new2 (8405763: + write timer),
# peers nbio (fanout1) and gws (echo), 3 interleaved repeats; gateway GOMAXPROCS=1 on cpu0, wsload on cpu1.
set -euo pipefail
out=$1; mkdir -p "$out"; : > "$out/runs.jsonl"
ulimit -n "$(ulimit -Hn)"
port=28950
run() { # server row wsload-args...
  local s=$1 row=$2; shift 2
  port=$((port+1))
  local bin
  case $s in A) bin=(/tmp/i27c/base/ws_gateway -cores 0 -backend uring);; B) bin=(/tmp/i27c/new/ws_gateway -cores 0 -backend uring);;
    C) bin=(/tmp/i27c/new2/ws_gateway -cores 0 -backend uring);;
    Cepoll) bin=(/tmp/i27c/new2/ws_gateway -cores 0 -backend epoll);; Aepoll) bin=(/tmp/i27c/base/ws_gateway -cores 0 -backend epoll);;
    *) bin=(/tmp/i27c/$s);; esac
  env GOMAXPROCS=1 taskset -c 0 "${bin[@]}" -addr 127.0.0.1:$port -secret s -ping-interval 30s > "$out/$s-$row-$port.log" 2>&1 &
  local gw=$!
  for _ in $(seq 100); do grep -q "listening on" "$out/$s-$row-$port.log" && break; sleep 0.1; done
  local j
  j=$(timeout 100 taskset -c 1 /tmp/i27c/wsload -addr 127.0.0.1:$port -secret s "$@" -json -server-pid $gw || echo '{"failed":true}')
  kill -INT $gw 2>/dev/null || true; sleep 0.3; kill -KILL $gw 2>/dev/null || true; wait $gw 2>/dev/null || true
  echo "{\"server\":\"$s\",\"row\":\"$row\",\"load\":$j}" >> "$out/runs.jsonl"
}
for r in 1 2 3; do
  for s in A B C wsnbio; do run $s fanout1 -mode fanout -conns 18000 -publishes 1 -bytes 64; done
  for s in A C wsgws; do run $s echo -mode echo -conns 1000 -bytes 64 -warmup 1s -seconds 5s; done
  for s in A C; do run $s idle -mode idle -conns 18000 -settle 3s; done
done
for s in Aepoll Cepoll; do run $s fanout1 -mode fanout -conns 18000 -publishes 1 -bytes 64; done
