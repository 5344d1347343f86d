#!/usr/bin/env bash
# i26i's bench call 4: does a handshake that holds cpu0 while the loop waits compute lowered?
# One storm at GOGC=off (diagnosis build of trace1.sh) under perf record of cpu0 with the
# scheduler's switches and wake-ups, the entries and exits of sched_setattr (the pool lowering and
# putting back its threads) and cpu-clock samples at 10 kHz; setattr.py follows each handshake
# thread through the long dispatches.
# Run: /work/wt/bench docs/results/vm-2026-12-04b-tls/perf2.sh (output: perf2-*.txt; perf data in /tmp/i26i)
set -euo pipefail
T=/tmp/i26i/runtime-diag.test
D=$(cd "$(dirname "$0")" && pwd)
ev=sched:sched_switch,sched:sched_waking,syscalls:sys_enter_sched_setattr,syscalls:sys_exit_sched_setattr
date -u
taskset -c 1 perf record -q -k CLOCK_MONOTONIC -a -F 10000 -g -e cpu-clock -e "$ev" -o /tmp/i26i/setattr-off.data -- \
	env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 GOGC=off taskset -c 0 timeout 120 "$T" -test.run 'TestTLSStormLag$' -tls.storm 10000 \
	>/tmp/i26i/setattr-off.out 2>&1 || true
grep -E '^(tls|long dispatch)' /tmp/i26i/setattr-off.out >"$D/perf2-setattr-off.txt" || true
date -u
