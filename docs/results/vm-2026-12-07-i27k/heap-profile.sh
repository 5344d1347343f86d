#!/usr/bin/env bash
# heap-profile.sh BIN OUTDIR [CONNS] [PORT] [RATE]: exact heap profile (GODEBUG=memprofilerate=RATE, 1 unless given) of a ws_gateway
# holding CONNS [18000] idle subscribed websockets (wsload -mode idle from "${WS:-/tmp/i27k/ws}/wsload"), 3 s after
# all are open: what is in use (inuse_space) and what the CONNS upgrades allocated in all (alloc_space,
# alloc_objects): the difference is the garbage that sets the heap goal. Bounded: about 40 s.
# BACKEND (uring) and GWFLAGS (extra gateway flags, split on spaces) pick the gateway configuration.
# Changes nothing outside OUTDIR; the gateway and wsload are killed at the end.
set -euo pipefail
bin=$1 out=$2 n=${3:-18000} port=${4:-28891} rate=${5:-1}
ulimit -n "$(ulimit -Hn)"
rm -rf "$out"; mkdir -p "$out"
read -r -a extra <<< "${GWFLAGS:-}"
env GODEBUG=memprofilerate="$rate" GOMAXPROCS=1 taskset -c 0 "$bin" -addr 127.0.0.1:"$port" -secret s -ping-interval 30s -cores 0 -backend "${BACKEND:-uring}" "${extra[@]}" -metrics 127.0.0.1:$((port+1)) 2>"$out/gw.log" &
gw=$!
trap 'kill $gw 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "listening on" "$out/gw.log" && break; sleep 0.2; done
grep VmRSS /proc/$gw/status > "$out/rss-before"
awk '/^[0-9a-f]+-[0-9a-f]+ / {m=$0} /^Rss:/ && $2 > 512 {print $2 " kB  " m}' /proc/$gw/smaps > "$out/smaps-big-before" 2>/dev/null || true
timeout 120 taskset -c 1 "${WS:-/tmp/i27k/ws}/wsload" -addr 127.0.0.1:"$port" -secret s -mode idle -conns "$n" -settle 12s -json -server-pid $gw > "$out/wsload.json" &
wl=$!
for _ in $(seq 200); do c=$(curl -s http://127.0.0.1:$((port+1))/metrics | awk '/^percore_connections_open/ {s+=$2} END {print s+0}'); [ "$c" -ge "$n" ] && break; sleep 0.5; done
sleep 3
grep -E "VmRSS|RssAnon" /proc/$gw/status > "$out/rss-held"
cat /proc/$gw/smaps_rollup > "$out/smaps-rollup" 2>/dev/null || true
# the mappings with more than 512 KiB resident: the Go heap's arenas, the io_uring rings and buffers
awk '/^[0-9a-f]+-[0-9a-f]+ / {m=$0} /^Rss:/ && $2 > 512 {print $2 " kB  " m}' /proc/$gw/smaps > "$out/smaps-big" 2>/dev/null || true
curl -s "http://127.0.0.1:$((port+1))/metrics" | grep -E "^go_memstats|^go_gc|^go_goroutines|^go_threads" > "$out/go-metrics" || true
curl -s -o "$out/heap.pb.gz" "http://127.0.0.1:$((port+1))/debug/pprof/heap?gc=1"
curl -s "http://127.0.0.1:$((port+1))/debug/pprof/heap?debug=1" | grep -E "^# (HeapAlloc|HeapSys|HeapIdle|HeapInuse|HeapReleased|Sys|NextGC|NumGC|TotalAlloc|Mallocs|Frees|Stack|MSpan|MCache|BuckHash|GCSys|OtherSys)" > "$out/memstats"
wait $wl || true
for idx in inuse_space alloc_space alloc_objects; do
  go tool pprof -sample_index=$idx -top "$bin" "$out/heap.pb.gz" 2>/dev/null | head -45 > "$out/heap-top-$idx.txt"
done
