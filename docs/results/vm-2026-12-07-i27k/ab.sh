#!/usr/bin/env bash
# ab.sh OUT [REPEATS] [ROWS]: issue 27's idle floor, brief i27k's window of 2026-12-07 (the client in 64 bytes,
# decision 0079): the lead's ab.sh of docs/results/vm-2026-12-04e-ws/ with the binaries under $WS (default /tmp/i27k/ws)
# instead of /tmp/lead/ws. A server NAME is $WS/NAME/ws_gateway on io_uring, NAMEepoll the same on epoll, wsnbio
# $WS/wsnbio (examples/bench/baseline/wsnbio).
# ROWS (default "idle echo fanout1"): idle (18,000 subscribed, RSS growth per connection after 3 s), echo
# (1,000 connections, 64-byte binary messages, 5 s after 1 s), fanout1 (one publish to 18,000). Servers per
# row: SERVERS_IDLE, SERVERS_ECHO, SERVERS_FANOUT. REPEATS (default 3) interleaved repeats. Server
# GOMAXPROCS=1 on cpu0, wsload ($WS/wsload) on cpu1.
# The names of the window: main (1bc3e82), i27k (the branch's tree).
# Build: git archive main | tar -x -C $WS/src-main; (cd $WS/src-main && go build -o ../main/ws_gateway ./examples/ws_gateway/);
#        go build -o $WS/i27k/ws_gateway ./examples/ws_gateway/ (in the worktree);
#        (cd examples/bench && go build -o $WS/wsload ./wsload/)
# Writes OUT/runs.jsonl and a log per run; changes nothing else.
set -euo pipefail
out=$1 reps=${2:-3} rows=${3:-idle echo fanout1} ws=${WS:-/tmp/i27k/ws}
mkdir -p "$out"; touch "$out/runs.jsonl"
ulimit -n "$(ulimit -Hn)"
port=$((29600 + RANDOM % 200 * 10))
run() { # server row wsload-args...
  local s=$1 row=$2; shift 2
  port=$((port+1))
  local bin
  case $s in
    # NAME (uring) or NAMEepoll: $ws/NAME/ws_gateway with its defaults.
    *epoll) bin=("$ws/${s%epoll}/ws_gateway" -cores 0 -backend epoll);;
    wsnbio) bin=("$ws/wsnbio");;
    *) bin=("$ws/$s/ws_gateway" -cores 0 -backend uring);;
  esac
  env GOMAXPROCS=1 taskset -c 0 "${bin[@]}" -addr 127.0.0.1:$port -secret s -ping-interval 30s > "$out/$s-$row-$port.log" 2>&1 &
  local gw=$!
  for _ in $(seq 100); do grep -q "listening on" "$out/$s-$row-$port.log" && break; sleep 0.1; done
  local j
  j=$(timeout 100 taskset -c 1 "$ws/wsload" -addr 127.0.0.1:$port -secret s "$@" -json -server-pid $gw || echo '{"failed":true}')
  kill -INT $gw 2>/dev/null || true; sleep 0.3; kill -KILL $gw 2>/dev/null || true; wait $gw 2>/dev/null || true
  echo "{\"server\":\"$s\",\"row\":\"$row\",\"load\":$j}" >> "$out/runs.jsonl"
}
read -r -a idle <<< "${SERVERS_IDLE:-d358a16 HEAD wsnbio}"
read -r -a echo_ <<< "${SERVERS_ECHO:-d358a16 HEAD}"
read -r -a fan <<< "${SERVERS_FANOUT:-d358a16 HEAD}"
for _ in $(seq "$reps"); do
  for row in $rows; do
    case $row in
      idle) for s in "${idle[@]}"; do run "$s" idle -mode idle -conns 18000 -settle 3s; done;;
      echo) for s in "${echo_[@]}"; do run "$s" echo -mode echo -conns 1000 -bytes 64 -warmup 1s -seconds 5s; done;;
      fanout1) for s in "${fan[@]}"; do run "$s" fanout1 -mode fanout -conns 18000 -publishes 1 -bytes 64; done;;
    esac
  done
done
