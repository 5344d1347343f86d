#!/usr/bin/env bash
# count.sh OUT: what one publish to 18,000 subscribers costs ws_gateway's loop, counted: the runtime's
# counters (/metrics: system calls, waits, turns, completions, bytes sent) and the process's CPU time
# (/proc/PID/stat) across 10 publishes 300 ms apart (curl POST /publish?topic=bench, 64-byte body), for
# A (/tmp/i27d/A/ws_gateway) and B (/tmp/i27d/B/ws_gateway), io_uring, GOMAXPROCS=1 on cpu0; the 18,000
# subscribers are wsload -mode idle on cpu1 (it reports the published messages as mismatches: they are not
# its check message; they are counted here instead). Then, for B, a pprof CPU profile (4 s) over 16
# publishes 250 ms apart. About 2 minutes. Writes OUT only.
set -euo pipefail
out=$1 conns=${CONNS:-18000}; rm -rf "$out"; mkdir -p "$out"
ulimit -n "$(ulimit -Hn)"
body=$(printf 'x%.0s' $(seq 64))
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v m="^percore_$2" '$0 ~ m && $1 !~ /#/ {s+=$2} END {printf "%d", s}'; }
cpu() { awk '{print $14+$15}' /proc/$1/stat; } # clock ticks (user+system)
one() { # name bin port publishes interval profile
  local name=$1 bin=$2 port=$3 pubs=$4 gap=$5 prof=$6
  env GOMAXPROCS=1 taskset -c 0 "$bin" -addr 127.0.0.1:$port -secret s -ping-interval 30s -cores 0 -backend uring -metrics 127.0.0.1:$((port+1)) > "$out/$name-gw.log" 2>&1 &
  local gw=$!
  for _ in $(seq 100); do grep -q "listening on" "$out/$name-gw.log" && break; sleep 0.1; done
  timeout 90 taskset -c 1 /tmp/i27d/wsload -addr 127.0.0.1:$port -secret s -mode idle -conns "$conns" -settle 16s -json > "$out/$name-wsload.json" 2>"$out/$name-wsload.log" &
  local wl=$!
  for _ in $(seq 300); do [ "$(metric $((port+1)) connections_open)" -ge "$conns" ] && break; sleep 0.2; done
  sleep 1
  local keys="loop_syscalls_total loop_waits_total loop_turns_total loop_completions_total sent_bytes_total"
  declare -A b
  for k in $keys; do b[$k]=$(metric $((port+1)) $k); done
  local c0; c0=$(cpu $gw)
  local cu=
  if [ "$prof" = 1 ]; then curl -s -o "$out/$name-cpu.pb.gz" "http://127.0.0.1:$((port+1))/debug/pprof/profile?seconds=4" & cu=$!; fi
  local delivered=0
  for _ in $(seq "$pubs"); do
    n=$(curl -s -X POST --data "$body" "http://127.0.0.1:$port/publish?topic=bench"); delivered=$((delivered+n)); sleep "$gap"
  done
  [ -n "$cu" ] && wait $cu
  local c1; c1=$(cpu $gw)
  {
    printf '{"server":"%s","publishes":%d,"delivered":%d,"cpu_ticks":%d' "$name" "$pubs" "$delivered" $((c1-c0))
    for k in $keys; do printf ',"%s":%d' "$k" $(( $(metric $((port+1)) $k) - b[$k] )); done
    printf '}\n'
  } >> "$out/counts.jsonl"
  kill -INT $gw 2>/dev/null || true; wait $wl 2>/dev/null || true; sleep 0.3; kill -KILL $gw 2>/dev/null || true; wait $gw 2>/dev/null || true
  if [ "$prof" = 1 ]; then go tool pprof -top "$bin" "$out/$name-cpu.pb.gz" 2>/dev/null | head -45 > "$out/$name-cpu-top.txt"; fi
}
one A /tmp/i27d/A/ws_gateway 29301 10 0.3 0
one B /tmp/i27d/B/ws_gateway 29305 10 0.3 0
one Bprof /tmp/i27d/B/ws_gateway 29309 16 0.25 1
