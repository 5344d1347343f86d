#!/usr/bin/env bash
# ab.sh OUT [REPEATS] [ROWS]: issue 27's floors, the lead's windows of 2026-12-07 (part 9): examples/ws_gateway
# at the session's start (m1bc: main at 1bc3e82) and its end (fin: b00eba8, with i27l, i27m and i27k merged),
# interleaved, with nbio in the same window. Part 6's ab.sh (docs/results/vm-2026-12-04e-ws/) with a storm row.
# A server NAME is /tmp/lead/ws/NAME/ws_gateway on io_uring, NAMEepoll the same on epoll, wsnbio
# /tmp/lead/ws/wsnbio (examples/bench/baseline/wsnbio).
# ROWS (default "idle echo fanout1"): idle (18,000 subscribed, RSS growth per connection after 3 s), echo
# (1,000 connections, 64-byte binary messages, 5 s after 1 s), fanout1 (one publish to 18,000), storm (15,000
# subscribers close at once and resubscribe, a live client's round trips meanwhile). Servers per row:
# SERVERS_IDLE, SERVERS_ECHO, SERVERS_FANOUT, SERVERS_STORM. REPEATS (default 3) interleaved repeats. Server
# GOMAXPROCS=1 on cpu0, wsload (/tmp/lead/ws/wsload) on cpu1.
# Build: for C in 1bc3e82 b00eba8: git archive C | tar -x -C /tmp/lead/ws/src-N; (cd /tmp/lead/ws/src-N &&
#        go build -o ../N/ws_gateway ./examples/ws_gateway/) (N: m1bc, fin);
#        (cd /tmp/lead/ws/src-m1bc/examples/bench && go build -o /tmp/lead/ws/wsload ./wsload/ && go build -o /tmp/lead/ws/wsnbio ./baseline/wsnbio/)
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
    # NAME (uring) or NAMEepoll: /tmp/lead/ws/NAME/ws_gateway with its defaults.
    *epoll) bin=("/tmp/lead/ws/${s%epoll}/ws_gateway" -cores 0 -backend epoll);;
    wsnbio) bin=(/tmp/lead/ws/wsnbio);;
    *) bin=("/tmp/lead/ws/$s/ws_gateway" -cores 0 -backend uring);;
  esac
  env GOMAXPROCS=1 taskset -c 0 "${bin[@]}" -addr 127.0.0.1:$port -secret s -ping-interval 30s > "$out/$s-$row-$port.log" 2>&1 &
  local gw=$!
  for _ in $(seq 100); do grep -q "listening on" "$out/$s-$row-$port.log" && break; sleep 0.1; done
  local j
  j=$(timeout 100 taskset -c 1 /tmp/lead/ws/wsload -addr 127.0.0.1:$port -secret s "$@" -json -server-pid $gw || echo '{"failed":true}')
  kill -INT $gw 2>/dev/null || true; sleep 0.3; kill -KILL $gw 2>/dev/null || true; wait $gw 2>/dev/null || true
  echo "{\"server\":\"$s\",\"row\":\"$row\",\"load\":$j}" >> "$out/runs.jsonl"
}
read -r -a idle <<< "${SERVERS_IDLE:-m1bc fin wsnbio}"
read -r -a echo_ <<< "${SERVERS_ECHO:-m1bc fin}"
read -r -a fan <<< "${SERVERS_FANOUT:-m1bc fin}"
read -r -a storm <<< "${SERVERS_STORM:-m1bc fin}"
for _ in $(seq "$reps"); do
  for row in $rows; do
    case $row in
      idle) for s in "${idle[@]}"; do run "$s" idle -mode idle -conns 18000 -settle 3s; done;;
      echo) for s in "${echo_[@]}"; do run "$s" echo -mode echo -conns 1000 -bytes 64 -warmup 1s -seconds 5s; done;;
      fanout1) for s in "${fan[@]}"; do run "$s" fanout1 -mode fanout -conns 18000 -publishes 1 -bytes 64; done;;
      storm) for s in "${storm[@]}"; do run "$s" storm -mode storm -conns 15000; done;;
    esac
  done
done
