#!/usr/bin/env bash
# ab.sh OUT [REPEATS] [ROWS]: the runtime's Conn from 192 to 160 B (decision 0075): A/B of
# examples/ws_gateway, interleaved (part 4's ab.sh, docs/results/vm-2026-12-04b-ws/, with this
# branch's servers). A = /tmp/i27i/A/ws_gateway (main at d358a16, the branch's base),
# C = /tmp/i27i/C/ws_gateway (branch i27i), nbio = /tmp/i27i/wsnbio (examples/bench/baseline/wsnbio).
# ROWS (default "idle echo fanout1") picks the rows: idle (18,000 subscribed, RSS growth per connection
# after 3 s), echo (1,000 connections, 64-byte binary messages, 5 s after 1 s), fanout1 (one publish to
# 18,000). Servers per row: SERVERS_IDLE, SERVERS_ECHO, SERVERS_FANOUT (names from the case below).
# REPEATS (default 3) interleaved repeats. Server GOMAXPROCS=1 on cpu0, wsload (/tmp/i27i/wsload) on cpu1.
# Build: git archive d358a16 | tar -x -C /tmp/i27i/basesrc; (cd /tmp/i27i/basesrc && go build -o /tmp/i27i/A/ws_gateway ./examples/ws_gateway/
#        && cd examples/bench && go build -o /tmp/i27i/wsload ./wsload/ && go build -o /tmp/i27i/wsnbio ./baseline/wsnbio/);
#        go build -o /tmp/i27i/C/ws_gateway ./examples/ws_gateway/ (in the branch's worktree)
# Writes OUT/runs.jsonl and a log per run; changes nothing else.
set -euo pipefail
out=$1 reps=${2:-3} rows=${3:-idle echo fanout1}
mkdir -p "$out"; touch "$out/runs.jsonl"
ulimit -n "$(ulimit -Hn)"
port=$((29600 + RANDOM % 200 * 10))
run() { # server row wsload-args...
  local s=$1 row=$2; shift 2
  port=$((port+1))
  local bin
  case $s in
    # A: main's gateway and runtime; C: the same gateway on this branch's runtime (Conn 160 B).
    A) bin=(/tmp/i27i/A/ws_gateway -cores 0 -backend uring);;
    Aepoll) bin=(/tmp/i27i/A/ws_gateway -cores 0 -backend epoll);;
    C) bin=(/tmp/i27i/C/ws_gateway -cores 0 -backend uring);;
    Cepoll) bin=(/tmp/i27i/C/ws_gateway -cores 0 -backend epoll);;
    *) bin=("/tmp/i27i/$s");;
  esac
  env GOMAXPROCS=1 taskset -c 0 "${bin[@]}" -addr 127.0.0.1:$port -secret s -ping-interval 30s > "$out/$s-$row-$port.log" 2>&1 &
  local gw=$!
  for _ in $(seq 100); do grep -q "listening on" "$out/$s-$row-$port.log" && break; sleep 0.1; done
  local j
  j=$(timeout 100 taskset -c 1 /tmp/i27i/wsload -addr 127.0.0.1:$port -secret s "$@" -json -server-pid $gw || echo '{"failed":true}')
  kill -INT $gw 2>/dev/null || true; sleep 0.3; kill -KILL $gw 2>/dev/null || true; wait $gw 2>/dev/null || true
  echo "{\"server\":\"$s\",\"row\":\"$row\",\"load\":$j}" >> "$out/runs.jsonl"
}
read -r -a idle <<< "${SERVERS_IDLE:-A C wsnbio Aepoll Cepoll}"
read -r -a echo_ <<< "${SERVERS_ECHO:-A C}"
read -r -a fan <<< "${SERVERS_FANOUT:-A C}"
for _ in $(seq "$reps"); do
  for row in $rows; do
    case $row in
      idle) for s in "${idle[@]}"; do run "$s" idle -mode idle -conns 18000 -settle 3s; done;;
      echo) for s in "${echo_[@]}"; do run "$s" echo -mode echo -conns 1000 -bytes 64 -warmup 1s -seconds 5s; done;;
      fanout1) for s in "${fan[@]}"; do run "$s" fanout1 -mode fanout -conns 18000 -publishes 1 -bytes 64; done;;
    esac
  done
done
