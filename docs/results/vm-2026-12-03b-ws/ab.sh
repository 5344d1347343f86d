#!/usr/bin/env bash
# ab.sh OUT: issue 27 floors, part 2: A/B of examples/ws_gateway with nbio in the same window.
# A = /tmp/i27d/A/ws_gateway (i27d's base, main at ac8c1e4), B = /tmp/i27d/B/ws_gateway (branch i27d),
# nbio = /tmp/i27d/wsnbio (examples/bench/baseline/wsnbio). Rows idle (18,000 subscribed, RSS growth per
# connection after 3 s) and fanout1 (one publish to 18,000), 3 interleaved repeats (A B nbio per row),
# then fanout1 on epoll for A and B once. Server GOMAXPROCS=1 on cpu0, wsload (/tmp/i27d/wsload) on cpu1.
# Build: git archive ac8c1e4 | tar -x -C /tmp/i27d/basesrc; (cd /tmp/i27d/basesrc && go build -o /tmp/i27d/A/ws_gateway ./examples/ws_gateway/);
#        go build -o /tmp/i27d/B/ws_gateway ./examples/ws_gateway/; (cd examples/bench && go build -o /tmp/i27d/wsload ./wsload/ && go build -o /tmp/i27d/wsnbio ./baseline/wsnbio/)
# About 5 minutes. Writes OUT/runs.jsonl and a log per run; changes nothing else.
set -euo pipefail
out=$1; mkdir -p "$out"; : > "$out/runs.jsonl"
ulimit -n "$(ulimit -Hn)"
port=29150
run() { # server row wsload-args...
  local s=$1 row=$2; shift 2
  port=$((port+1))
  local bin
  case $s in
    A) bin=(/tmp/i27d/A/ws_gateway -cores 0 -backend uring);; B) bin=(/tmp/i27d/B/ws_gateway -cores 0 -backend uring);;
    Aepoll) bin=(/tmp/i27d/A/ws_gateway -cores 0 -backend epoll);; Bepoll) bin=(/tmp/i27d/B/ws_gateway -cores 0 -backend epoll);;
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
  for s in A B wsnbio; do run $s idle -mode idle -conns 18000 -settle 3s; done
  for s in A B wsnbio; do run $s fanout1 -mode fanout -conns 18000 -publishes 1 -bytes 64; done
done
for s in Aepoll Bepoll; do run $s fanout1 -mode fanout -conns 18000 -publishes 1 -bytes 64; done
