#!/usr/bin/env bash
# Heap profile of examples/ws_gateway holding 18,000 idle subscribed WebSockets (bounded: ~1 min).
# Build first: go build -o /tmp/i27bin/ ./examples/ws_gateway && go build -C examples/bench -o /tmp/i27bin/ ./wsload
# Run through the benchmark lock (/work/wt/bench); it writes /tmp/i27cpu or /tmp/i27prof. Undo: delete them.
set -euo pipefail
ulimit -n "$(ulimit -Hn)"
out=/tmp/i27prof; rm -rf "$out"; mkdir -p "$out"
env GOMAXPROCS=1 taskset -c 0 /tmp/i27bin/ws_gateway -addr 127.0.0.1:28791 -secret s -ping-interval 30s -cores 0 -backend uring -metrics 127.0.0.1:28792 2>"$out/gw.log" &
gw=$!
trap 'kill $gw 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "listening on" "$out/gw.log" && break; sleep 0.2; done
grep VmRSS /proc/$gw/status > "$out/rss-before"
timeout 120 taskset -c 1 /tmp/i27bin/wsload -addr 127.0.0.1:28791 -secret s -mode idle -conns 18000 -settle 25s -json -server-pid $gw > "$out/wsload.json" &
wl=$!
sleep 18
grep -E "VmRSS|RssAnon" /proc/$gw/status > "$out/rss-held"
curl -s -o "$out/heap.pb.gz" http://127.0.0.1:28792/debug/pprof/heap
curl -s http://127.0.0.1:28792/metrics | grep -E "^percore_(connections_open|ws_clients|outbound_pooled)" > "$out/metrics" || true
wait $wl || true
go tool pprof -sample_index=inuse_space -top /tmp/i27bin/ws_gateway "$out/heap.pb.gz" 2>/dev/null | head -30 > "$out/heap-top.txt"
