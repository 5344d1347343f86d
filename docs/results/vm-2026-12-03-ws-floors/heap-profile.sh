#!/usr/bin/env bash
# heap.sh BIN OUTDIR [CONNS]: exact heap profile (GODEBUG=memprofilerate=1) of a ws_gateway holding CONNS idle subscribed websockets.
set -euo pipefail
bin=$1 out=$2 n=${3:-18000}
ulimit -n "$(ulimit -Hn)"
rm -rf "$out"; mkdir -p "$out"
env GODEBUG=memprofilerate=1 GOMAXPROCS=1 taskset -c 0 "$bin" -addr 127.0.0.1:28891 -secret s -ping-interval 30s -cores 0 -backend uring -metrics 127.0.0.1:28892 2>"$out/gw.log" &
gw=$!
trap 'kill $gw 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "listening on" "$out/gw.log" && break; sleep 0.2; done
grep VmRSS /proc/$gw/status > "$out/rss-before"
timeout 120 taskset -c 1 /tmp/i27c/wsload -addr 127.0.0.1:28891 -secret s -mode idle -conns $n -settle 20s -json -server-pid $gw > "$out/wsload.json" &
wl=$!
for _ in $(seq 100); do c=$(curl -s http://127.0.0.1:28892/metrics | awk '/^percore_connections_open/ {s+=$2} END {print s+0}'); [ "$c" -ge "$n" ] && break; sleep 0.5; done
sleep 3
grep -E "VmRSS|RssAnon" /proc/$gw/status > "$out/rss-held"
curl -s -o "$out/heap.pb.gz" "http://127.0.0.1:28892/debug/pprof/heap?gc=1"
curl -s "http://127.0.0.1:28892/debug/pprof/heap?debug=1" | grep -E "^# (HeapAlloc|HeapSys|HeapIdle|HeapInuse|HeapReleased|Sys|NextGC|NumGC|Stack|MSpan|GCSys|OtherSys)" > "$out/memstats"
wait $wl || true
go tool pprof -sample_index=inuse_space -top "$bin" "$out/heap.pb.gz" 2>/dev/null | head -40 > "$out/heap-top.txt"
