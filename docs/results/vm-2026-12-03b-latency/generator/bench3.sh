#!/bin/bash
# bench3.sh: (A) the generator sleeping against polling (-spin 1ms), open loop against the
# C liburing echo on cpu0, load on cpu1, 50 connections, 1 s + 3 s, interleaved; then a
# perf sched trace of one run of each (diagnostic, not quoted for latency); (B) the paired
# floor run with the polling generator.
set -u
cd /work/wt/i29d
D=docs/results/vm-2026-12-03b-latency
A=$D/generator; mkdir -p $A
{ echo "== bench3 before: $(date -u +%FT%TZ)"; uptime; ps -eo pid,pcpu,etime,comm --sort=-pcpu | head -6; } >> $D/machine.txt
declare -A V=([sleep]="" [spin]="-spin 1ms")
port=29700
one() { # variant rate [sched]
  local v=$1 rate=$2 sched=${3:-}
  port=$((port + 1))
  taskset -c 0 /tmp/i29d/liburing-echo 127.0.0.1:$port >/dev/null 2>&1 &
  local spid=$!
  sleep 0.3
  timeout 30 env GOMAXPROCS=1 taskset -c 1 /tmp/i29d/load -addr 127.0.0.1:$port -conns 50 -bytes 64 -rate $rate ${V[$v]} -warmup 1 -seconds 3 -json -server-pid $spid >/tmp/i29d/one.json 2>/dev/null &
  local lpid=$!
  local cs=0 en=0
  sleep 1.4
  if [ -n "$sched" ]; then
    perf sched record -a -o /tmp/i29d/sched-$v.data -- sleep 2 >/dev/null 2>&1
  else
    perf stat -x, -e context-switches,syscalls:sys_enter_io_uring_enter -p "$(pgrep -P $lpid)" -- sleep 2 2>/tmp/i29d/perf.txt >/dev/null
    cs=$(awk -F, '/context-switches/ {print $1}' /tmp/i29d/perf.txt); en=$(awk -F, '/io_uring_enter/ {print $1}' /tmp/i29d/perf.txt)
  fi
  wait $lpid
  kill $spid; wait $spid 2>/dev/null
  printf '{"variant":"%s","target":%s,"sched_trace":%s,"perf2s_ctxsw":%s,"perf2s_enters":%s,"load":%s}\n' "$v" "$rate" "${sched:-0}" "${cs:-0}" "${en:-0}" "$(cat /tmp/i29d/one.json)" >>$A/generator-runs.jsonl
}
for r in 1 2; do for rate in 60000 72000; do for v in sleep spin; do one $v $rate; done; done; done
for v in sleep spin; do one $v 10000; done
for v in sleep spin; do one $v 60000 1; done
for v in sleep spin; do
  perf sched latency -i /tmp/i29d/sched-$v.data --sort max 2>/dev/null | head -16 > $A/sched-latency-$v.txt
done
# (B) the floors with the polling generator
env OUT=$D/floors-spin LOAD_ARGS="-spin 1ms" PROTOCOLS=echo CONNS=50 REPEATS=3 FRACTIONS=80 ECHO_SERVERS="percore-uring percore-epoll netpoll liburing" VEGETA=0 scripts/bench-latency.sh
{ echo "== bench3 after: $(date -u +%FT%TZ)"; uptime; ps -eo pid,pcpu,etime,comm --sort=-pcpu | head -6; } >> $D/machine.txt
