#!/usr/bin/env bash
# heap-profile.sh BIN OUTDIR [CONNS] [PORT]: exact heap profile (GODEBUG=memprofilerate=1) of a ws_gateway
# holding CONNS [18000] idle subscribed websockets (wsload -mode idle from /tmp/i27d/wsload), 3 s after
# all are open: what is in use (inuse_space) and what the CONNS upgrades allocated in all (alloc_space,
# alloc_objects): the difference is the garbage that sets the heap goal. Bounded: about 40 s.
# Changes nothing outside OUTDIR; the gateway and wsload are killed at the end.
set -euo pipefail
bin=$1 out=$2 n=${3:-18000} port=${4:-28891}
ulimit -n "$(ulimit -Hn)"
rm -rf "$out"; mkdir -p "$out"
env GODEBUG=memprofilerate=1 GOMAXPROCS=1 taskset -c 0 "$bin" -addr 127.0.0.1:$port -secret s -ping-interval 30s -cores 0 -backend uring -metrics 127.0.0.1:$((port+1)) 2>"$out/gw.log" &
gw=$!
trap 'kill $gw 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "listening on" "$out/gw.log" && break; sleep 0.2; done
grep VmRSS /proc/$gw/status > "$out/rss-before"
timeout 120 taskset -c 1 /tmp/i27d/wsload -addr 127.0.0.1:$port -secret s -mode idle -conns "$n" -settle 12s -json -server-pid $gw > "$out/wsload.json" &
wl=$!
for _ in $(seq 200); do c=$(curl -s http://127.0.0.1:$((port+1))/metrics | awk '/^percore_connections_open/ {s+=$2} END {print s+0}'); [ "$c" -ge "$n" ] && break; sleep 0.5; done
sleep 3
grep -E "VmRSS|RssAnon" /proc/$gw/status > "$out/rss-held"
curl -s -o "$out/heap.pb.gz" "http://127.0.0.1:$((port+1))/debug/pprof/heap?gc=1"
curl -s "http://127.0.0.1:$((port+1))/debug/pprof/heap?debug=1" | grep -E "^# (HeapAlloc|HeapSys|HeapIdle|HeapInuse|HeapReleased|Sys|NextGC|NumGC|TotalAlloc|Mallocs|Frees)" > "$out/memstats"
wait $wl || true
for idx in inuse_space alloc_space alloc_objects; do
  go tool pprof -sample_index=$idx -top "$bin" "$out/heap.pb.gz" 2>/dev/null | head -45 > "$out/heap-top-$idx.txt"
done
