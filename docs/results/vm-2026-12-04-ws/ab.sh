#!/usr/bin/env bash
# ab.sh OUT [REPEATS] [ROWS]: issue 27 floors, part 3: A/B of examples/ws_gateway, interleaved, with nbio
# in the same window. A = /tmp/i27f/A/ws_gateway (main at c621f99, the branch's base), B =
# /tmp/i27f/B/ws_gateway (branch i27f), nbio = /tmp/i27f/wsnbio (examples/bench/baseline/wsnbio).
# ROWS (default "idle echo fanout1") picks the rows: idle (18,000 subscribed, RSS growth per connection
# after 3 s) on io_uring (A, Bcore, Bkeep, B, nbio) and epoll (Aepoll, Bepollcore, Bepoll); echo (1,000 connections, 64-byte binary
# messages, 5 s after 1 s; A, Bcore, B); fanout1 (one publish to 18,000; A, Bcore, B). REPEATS (default 3) interleaved
# repeats. Server GOMAXPROCS=1 on cpu0, wsload (/tmp/i27f/wsload) on cpu1.
# Build: git archive c621f99 | tar -x -C /tmp/i27f/basesrc; (cd /tmp/i27f/basesrc && go build -o /tmp/i27f/A/ws_gateway ./examples/ws_gateway/);
#        go build -o /tmp/i27f/B/ws_gateway ./examples/ws_gateway/; (cd examples/bench && go build -o /tmp/i27f/wsload ./wsload/ && go build -o /tmp/i27f/wsnbio ./baseline/wsnbio/)
# Other servers (B16: -recv-buffers 16): set SERVERS_IDLE / SERVERS_ECHO / SERVERS_FANOUT (names from the
# case below), e.g. SERVERS_IDLE="B16 B" SERVERS_ECHO="B16 B" SERVERS_FANOUT="B16 B" ab.sh OUT 1 (ws-b16-*).
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
    A) bin=(/tmp/i27f/A/ws_gateway -cores 0 -backend uring);; B) bin=(/tmp/i27f/B/ws_gateway -cores 0 -backend uring);;
    Aepoll) bin=(/tmp/i27f/A/ws_gateway -cores 0 -backend epoll);; Bepoll) bin=(/tmp/i27f/B/ws_gateway -cores 0 -backend epoll);;
    # B's defaults: -recv-buffers 64, -return-after 1000. Bcore: the runtime's changes alone (the
    # runtime's 512 receive buffers, nothing returned); Bkeep: 64 buffers, nothing returned.
    Bcore) bin=(/tmp/i27f/B/ws_gateway -cores 0 -backend uring -recv-buffers 0 -return-after 0);;
    Bkeep) bin=(/tmp/i27f/B/ws_gateway -cores 0 -backend uring -return-after 0);;
    B16) bin=(/tmp/i27f/B/ws_gateway -cores 0 -backend uring -recv-buffers 16);;
    Bepollcore) bin=(/tmp/i27f/B/ws_gateway -cores 0 -backend epoll -return-after 0);;
    *) bin=("/tmp/i27f/$s");;
  esac
  env GOMAXPROCS=1 taskset -c 0 "${bin[@]}" -addr 127.0.0.1:$port -secret s -ping-interval 30s > "$out/$s-$row-$port.log" 2>&1 &
  local gw=$!
  for _ in $(seq 100); do grep -q "listening on" "$out/$s-$row-$port.log" && break; sleep 0.1; done
  local j
  j=$(timeout 100 taskset -c 1 /tmp/i27f/wsload -addr 127.0.0.1:$port -secret s "$@" -json -server-pid $gw || echo '{"failed":true}')
  kill -INT $gw 2>/dev/null || true; sleep 0.3; kill -KILL $gw 2>/dev/null || true; wait $gw 2>/dev/null || true
  echo "{\"server\":\"$s\",\"row\":\"$row\",\"load\":$j}" >> "$out/runs.jsonl"
}
read -r -a idle <<< "${SERVERS_IDLE:-A Bcore Bkeep B wsnbio Aepoll Bepollcore Bepoll}"
read -r -a echo_ <<< "${SERVERS_ECHO:-A Bcore B}"
read -r -a fan <<< "${SERVERS_FANOUT:-A Bcore B}"
for _ in $(seq "$reps"); do
  for row in $rows; do
    case $row in
      idle) for s in "${idle[@]}"; do run "$s" idle -mode idle -conns 18000 -settle 3s; done;;
      echo) for s in "${echo_[@]}"; do run "$s" echo -mode echo -conns 1000 -bytes 64 -warmup 1s -seconds 5s; done;;
      fanout1) for s in "${fan[@]}"; do run "$s" fanout1 -mode fanout -conns 18000 -publishes 1 -bytes 64; done;;
    esac
  done
done
