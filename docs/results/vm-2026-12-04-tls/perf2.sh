#!/usr/bin/env bash
# i26g's bench call 2: where the storm's long loop turns go, from the kernel's side. One
# 10,000-handshake storm per variant (TestTLSStormLag as in bench1.sh) under
#   perf record -a -e sched:sched_switch,sched:sched_waking,syscalls:sys_enter_futex,syscalls:sys_enter_io_uring_enter
# (perf itself on cpu1), then sched.py reads `perf script` for the loop's thread: its
# off-CPU stretches (preempted, or asleep in futex = Go's scheduler, or in io_uring_enter =
# waiting for work), its waits from wake-up to CPU, and which threads held cpu0 meanwhile.
# Variants (the binary is bench1.sh's, built at 0cc5265): main-100 (no flags: main's code), main-off (GOGC=off),
# a2b-100 (loop 100 us slice at nice -10, pool 100 us slice).
# Run: /work/wt/bench docs/results/vm-2026-12-04-tls/perf2.sh (output: perf2-*.txt; the perf
# data stays in /tmp/i26g)
set -euo pipefail
T=/tmp/i26g/runtime.test
D=/work/wt/i26g/docs/results/vm-2026-12-04-tls
ev=sched:sched_switch,sched:sched_waking,syscalls:sys_enter_futex,syscalls:sys_enter_io_uring_enter
run=(-test.run 'TestTLSStormLag$' -tls.storm 10000)
one() { # name, gogc, extra flags
	local name=$1 gogc=$2
	shift 2
	taskset -c 1 perf record -q -a -e "$ev" -o "/tmp/i26g/$name.data" -- \
		env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 GOGC="$gogc" taskset -c 0 timeout 90 "$T" "${run[@]}" "$@" \
		>"/tmp/i26g/$name.out" 2>&1
	grep -E '^(tls|loop thread)' "/tmp/i26g/$name.out" >"$D/perf2-$name.txt"
}
date -u
one main-100 100
one main-off off
one a2b-100 100 -tls.storm.loop.slice 100us -tls.storm.loop.nice -10 -tls.storm.pool.slice 100us
date -u
