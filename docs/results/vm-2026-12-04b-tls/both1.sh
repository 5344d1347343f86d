#!/usr/bin/env bash
# i26i's bench call 3: the Go trace and the kernel's view of the same storms, so that each
# dispatch over 1 ms is told apart in both (Go: the loop goroutine running, in an assist,
# preempted with its P running something else; kernel: the loop thread on cpu0, preempted, or
# asleep). The diagnosis build of trace1.sh under perf1.sh's perf record. Two storms at the
# default GOGC, one at GOGC=off.
# Run: /work/wt/bench docs/results/vm-2026-12-04b-tls/both1.sh (output: both1-*.txt; traces and perf data in /tmp/i26i)
set -euo pipefail
T=/tmp/i26i/runtime-diag.test
D=$(cd "$(dirname "$0")" && pwd)
run=(-test.run 'TestTLSStormLag$' -tls.storm 10000)
one() { # name, gogc
	local name=$1 gogc=$2
	taskset -c 1 perf record -q -k CLOCK_MONOTONIC -C 0 -F 10000 -g -e cpu-clock -e sched:sched_switch \
		-o "/tmp/i26i/$name.data" -- \
		env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 GOGC="$gogc" taskset -c 0 timeout 120 "$T" "${run[@]}" \
		-test.trace "/tmp/i26i/$name.trace" >"/tmp/i26i/$name.out" 2>&1 || true
	grep -E '^(tls|long dispatch)' "/tmp/i26i/$name.out" >"$D/both1-$name.txt" || true
}
date -u
one both-100a 100
one both-100b 100
one both-off off
date -u
