#!/usr/bin/env bash
# ab.sh OUT [REPEATS] [ROWS]: issue 27's idle floor, the lead's window of 2026-12-04 (part 6): examples/ws_gateway
# at several commits, interleaved, with nbio in the same window (part 5's ab.sh, docs/results/vm-2026-12-04c-ws/,
# with the servers named by commit). A server NAME is /tmp/i27l/ws/NAME/ws_gateway on io_uring, NAMEepoll the
# same on epoll, wsnbio /tmp/i27l/ws/wsnbio (examples/bench/baseline/wsnbio).
# ROWS (default "idle echo fanout1"): idle (18,000 subscribed, RSS growth per connection after 3 s), echo
# (1,000 connections, 64-byte binary messages, 5 s after 1 s), fanout1 (one publish to 18,000). Servers per
# row: SERVERS_IDLE, SERVERS_ECHO, SERVERS_FANOUT. REPEATS (default 3) interleaved repeats. Server
# GOMAXPROCS=1 on cpu0, wsload (/tmp/i27l/ws/wsload) on cpu1.
# The names of the windows: baa222b (part 4's main), 098dcf8_1 (098dcf8's parent, fb2cda9), 098dcf8, d358a16 (the
# session's start), HEAD (13d3f61: i27h's and i27i's merges, the return's review), shed (HEAD with the loops' spares
# shed before the return), shed2 (shed and the drained connections' write timers), final (9382b61: shed2 and the
# arrays shrunk; built from the tree, not an archive).
# Build: for C in baa222b 098dcf8~1 098dcf8 d358a16 HEAD: git archive C | tar -x -C /tmp/i27l/ws/src-N (N: C with ~ as _);
#        (cd /tmp/i27l/ws/src-N && go build -o ../N/ws_gateway ./examples/ws_gateway/);
#        (cd /tmp/i27l/ws/src-HEAD/examples/bench && go build -o /tmp/i27l/ws/wsload ./wsload/ && go build -o /tmp/i27l/ws/wsnbio ./baseline/wsnbio/)
# Writes OUT/runs.jsonl and a log per run; changes nothing else.
# 2026-12-07 (i27l): this copy, with /tmp/lead/ws as /tmp/i27l/ws, ran part 7's window: servers main (1bc3e82)
# and i27l (6d04c7a), SERVERS_IDLE="main i27l mainepoll i27lepoll", 3 repeats, the idle row.
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
    # NAME (uring) or NAMEepoll: /tmp/i27l/ws/NAME/ws_gateway with its defaults.
    *epoll) bin=("/tmp/i27l/ws/${s%epoll}/ws_gateway" -cores 0 -backend epoll);;
    wsnbio) bin=(/tmp/i27l/ws/wsnbio);;
    *) bin=("/tmp/i27l/ws/$s/ws_gateway" -cores 0 -backend uring);;
  esac
  env GOMAXPROCS=1 taskset -c 0 "${bin[@]}" -addr 127.0.0.1:$port -secret s -ping-interval 30s > "$out/$s-$row-$port.log" 2>&1 &
  local gw=$!
  for _ in $(seq 100); do grep -q "listening on" "$out/$s-$row-$port.log" && break; sleep 0.1; done
  local j
  j=$(timeout 100 taskset -c 1 /tmp/i27l/ws/wsload -addr 127.0.0.1:$port -secret s "$@" -json -server-pid $gw || echo '{"failed":true}')
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
