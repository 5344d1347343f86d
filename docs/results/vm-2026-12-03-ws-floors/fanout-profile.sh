#!/usr/bin/env bash
# prof.sh OUT: where fan-out's time goes in ws_gateway (8405763): 18,000 subscribers, 20 publishes 250 ms apart;
# pprof (5 s) and perf record -g (kernel stacks, cpu-clock) of the gateway during the publishes. Bounded: about 40 s.
set -euo pipefail
out=$1; rm -rf "$out"; mkdir -p "$out"
ulimit -n "$(ulimit -Hn)"
env GOMAXPROCS=1 taskset -c 0 /tmp/i27c/new2/ws_gateway -addr 127.0.0.1:28981 -secret s -ping-interval 30s -cores 0 -backend uring -metrics 127.0.0.1:28982 > "$out/gw.log" 2>&1 &
gw=$!
trap 'kill $gw 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "listening on" "$out/gw.log" && break; sleep 0.1; done
timeout 90 taskset -c 1 /tmp/i27c/wsload -addr 127.0.0.1:28981 -secret s -mode fanout -conns 18000 -publishes 24 -interval 250ms -bytes 64 -json -server-pid $gw > "$out/wsload.json" 2>"$out/wsload.log" &
wl=$!
for _ in $(seq 300); do grep -q "18000 of 18000\|open_s" "$out/wsload.log" "$out/wsload.json" 2>/dev/null && break; c=$(curl -s http://127.0.0.1:28982/metrics | awk '/^percore_connections_open/ {s+=$2} END {print s+0}'); [ "$c" -ge 18000 ] && break; sleep 0.2; done
sleep 1.5
curl -s -o "$out/cpu.pb.gz" "http://127.0.0.1:28982/debug/pprof/profile?seconds=4" &
cu=$!
perf record -e cpu-clock -g -p $gw -o "$out/perf.data" -- sleep 4 2> "$out/perf.log" || true
wait $cu || true
wait $wl || true
go tool pprof -top /tmp/i27c/new2/ws_gateway "$out/cpu.pb.gz" 2>/dev/null | head -45 > "$out/fanout-cpu-top.txt"
perf report -i "$out/perf.data" --no-children --sort symbol --stdio 2>/dev/null | grep -v "^#" | grep "%" | head -60 > "$out/fanout-perf-top.txt" || true
