#!/usr/bin/env bash
# i26i's bench call 2: what the loop's thread runs in a long dispatch. The same diagnosis build as
# trace1.sh (without the Go trace), one storm of 10,000 handshakes at the default GOGC and one at
# GOGC=off, under perf record of cpu0: cpu-clock samples at 10 kHz with frame-pointer call
# chains, and the scheduler's switches, on CLOCK_MONOTONIC (the diagnosis's clock), so that
# samples.py can take each dispatch over 1 ms and list what the loop's thread was sampled in.
# Run: /work/wt/bench docs/results/vm-2026-12-04b-tls/perf1.sh (output: perf1-*.txt; perf data in /tmp/i26i)
set -euo pipefail
T=/tmp/i26i/runtime-diag.test
D=$(cd "$(dirname "$0")" && pwd)
run=(-test.run 'TestTLSStormLag$' -tls.storm 10000)
one() { # name, gogc
	local name=$1 gogc=$2
	taskset -c 1 perf record -q -k CLOCK_MONOTONIC -C 0 -F 10000 -g -e cpu-clock -e sched:sched_switch \
		-o "/tmp/i26i/$name.data" -- \
		env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 GOGC="$gogc" taskset -c 0 timeout 120 "$T" "${run[@]}" \
		>"/tmp/i26i/$name.out" 2>&1 || true
	grep -E '^(tls|long dispatch)' "/tmp/i26i/$name.out" >"$D/perf1-$name.txt" || true
}
date -u
one perf-100 100
one perf-off off
date -u
