#!/usr/bin/env bash
# ab.sh OUT [REPEATS] [ROWS]: issue 27 floors, part 5: A/B of examples/ws_gateway, interleaved, with nbio
# in the same window (part 4's ab.sh, docs/results/vm-2026-12-04b-ws/, with part 5's servers).
# A = /tmp/i27h/A/ws_gateway (main at d358a16, the branch's base), B = /tmp/i27h/B/ws_gateway (branch i27h
# at 4d25a2e: part 4's client-shrink.patch with the decoder's fix, a 128-byte client), C = /tmp/i27h/C/ws_gateway
# (branch i27h with the decoder's progress in a side state: an 80-byte client), nbio = /tmp/i27h/wsnbio
# (examples/bench/baseline/wsnbio).
# ROWS (default "idle echo fanout1") picks the rows: idle (18,000 subscribed, RSS growth per connection
# after 3 s), echo (1,000 connections, 64-byte binary messages, 5 s after 1 s), fanout1 (one publish to
# 18,000). Servers per row: SERVERS_IDLE, SERVERS_ECHO, SERVERS_FANOUT (names from the case below).
# REPEATS (default 3) interleaved repeats. Server GOMAXPROCS=1 on cpu0, wsload (/tmp/i27h/wsload) on cpu1.
# Build: git archive d358a16 | tar -x -C /tmp/i27h/base; (cd /tmp/i27h/base && go build -o /tmp/i27h/A/ws_gateway ./examples/ws_gateway/);
#        git archive 4d25a2e | tar -x -C /tmp/i27h/Bsrc; (cd /tmp/i27h/Bsrc && go build -o /tmp/i27h/B/ws_gateway ./examples/ws_gateway/);
#        go build -o /tmp/i27h/C/ws_gateway ./examples/ws_gateway/;
#        (cd /tmp/i27h/base/examples/bench && go build -o /tmp/i27h/wsload ./wsload/ && go build -o /tmp/i27h/wsnbio ./baseline/wsnbio/)
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
    # A: main's defaults (64 receive buffers of 16 KiB, 64 httpd spare states, free pages returned after a storm).
    A) bin=(/tmp/i27h/A/ws_gateway -cores 0 -backend uring);;
    Aepoll) bin=(/tmp/i27h/A/ws_gateway -cores 0 -backend epoll);;
    # B: the 128-byte client (-spare-states 8); C: the 80-byte client (the same flags).
    B) bin=(/tmp/i27h/B/ws_gateway -cores 0 -backend uring);;
    Bepoll) bin=(/tmp/i27h/B/ws_gateway -cores 0 -backend epoll);;
    C) bin=(/tmp/i27h/C/ws_gateway -cores 0 -backend uring);;
    Cepoll) bin=(/tmp/i27h/C/ws_gateway -cores 0 -backend epoll);;
    # Cspare64: C with httpd's 64 spare states, as on main.
    Cspare64) bin=(/tmp/i27h/C/ws_gateway -cores 0 -backend uring -spare-states 64);;
    Cspare64epoll) bin=(/tmp/i27h/C/ws_gateway -cores 0 -backend epoll -spare-states 64);;
    *) bin=("/tmp/i27h/$s");;
  esac
  env GOMAXPROCS=1 taskset -c 0 "${bin[@]}" -addr 127.0.0.1:$port -secret s -ping-interval 30s > "$out/$s-$row-$port.log" 2>&1 &
  local gw=$!
  for _ in $(seq 100); do grep -q "listening on" "$out/$s-$row-$port.log" && break; sleep 0.1; done
  local j
  j=$(timeout 100 taskset -c 1 /tmp/i27h/wsload -addr 127.0.0.1:$port -secret s "$@" -json -server-pid $gw || echo '{"failed":true}')
  kill -INT $gw 2>/dev/null || true; sleep 0.3; kill -KILL $gw 2>/dev/null || true; wait $gw 2>/dev/null || true
  echo "{\"server\":\"$s\",\"row\":\"$row\",\"load\":$j}" >> "$out/runs.jsonl"
}
read -r -a idle <<< "${SERVERS_IDLE:-A B C wsnbio Aepoll Bepoll Cepoll}"
read -r -a echo_ <<< "${SERVERS_ECHO:-A B C}"
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
