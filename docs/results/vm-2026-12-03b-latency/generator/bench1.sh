#!/bin/bash
# bench1.sh: the generator's own CPU per request, open loop against the C liburing echo
# (cpu0), load on cpu1, 50 connections, 1 s warm-up + 3 s window; variants interleaved;
# perf stat counts the generator's context switches and io_uring_enter calls over 2 s of
# its window. Output: one JSON line per run in OUT/gen.jsonl.
set -u
OUT=${OUT:-/tmp/i29d/b1}
mkdir -p "$OUT"
uptime > "$OUT/uptime.txt"; ps -eo pid,pcpu,etime,comm --sort=-pcpu | head -8 >> "$OUT/uptime.txt"
declare -A V=(
  [A-old]="/tmp/i29d/load-old"
  [B-new]="/tmp/i29d/load"
  [C-wb20]="/tmp/i29d/load -wait-batch 64 -wait-min 20us"
  [D-wb50]="/tmp/i29d/load -wait-batch 64 -wait-min 50us -pace 50us"
  [E-wb100]="/tmp/i29d/load -wait-batch 64 -wait-min 100us -pace 100us"
)
port=29600
one() { # label rate
  local label=$1 rate=$2 ra=()
  [ "$rate" != 0 ] && ra=(-rate "$rate")
  port=$((port + 1))
  taskset -c 0 /tmp/i29d/liburing-echo 127.0.0.1:$port >/dev/null 2>&1 &
  local spid=$!
  sleep 0.3
  timeout 30 env GOMAXPROCS=1 taskset -c 1 ${V[$label]} -addr 127.0.0.1:$port -conns 50 -bytes 64 "${ra[@]}" -warmup 1 -seconds 3 -json -server-pid $spid >"$OUT/one.json" 2>/dev/null &
  local lpid=$!
  sleep 1.4
  perf stat -x, -e context-switches,syscalls:sys_enter_io_uring_enter -p "$(pgrep -P $lpid)" -- sleep 2 2>"$OUT/perf.txt" >/dev/null
  wait $lpid
  kill $spid; wait $spid 2>/dev/null
  local cs en
  cs=$(awk -F, '/context-switches/ {print $1}' "$OUT/perf.txt"); en=$(awk -F, '/io_uring_enter/ {print $1}' "$OUT/perf.txt")
  printf '{"variant":"%s","target":%s,"perf2s_ctxsw":%s,"perf2s_enters":%s,"load":%s}\n' "$label" "$rate" "${cs:-0}" "${en:-0}" "$(cat "$OUT/one.json")" >>"$OUT/gen.jsonl"
  python3 -c "
import json,sys;d=json.loads(open('$OUT/gen.jsonl').readlines()[-1]);l=d['load'];n=l.get('rps',1)*2
print('%-8s %6s rps %7.0f us/req %5.2f busy %4.1f%% enters/req %.2f ctxsw/req %.2f p50 %7.1f p99 %8.1f late %d steal %.1f other %.1f' % (d['variant'],d['target'],l.get('rps',0),l.get('client_cpu_us_per_req',0),l.get('client_busy_pct',0),d['perf2s_enters']/n,d['perf2s_ctxsw']/n,l.get('p50_us',0),l.get('p99_us',0),l.get('late_sends',0),l.get('steal_pct',0),l.get('other_cpu_pct',0)))" | tee -a "$OUT/table.txt"
}
if [ -n "${TRY:-}" ]; then one E-wb100 60000; one A-old 0; exit 0; fi
for r in 1 2; do for v in A-old B-new C-wb20 D-wb50 E-wb100; do one $v 60000; done; done
for v in A-old B-new D-wb50 E-wb100; do one $v 75000; done
for v in B-new D-wb50 E-wb100; do one $v 10000; done
one A-old 0; one B-new 0
uptime >> "$OUT/uptime.txt"
