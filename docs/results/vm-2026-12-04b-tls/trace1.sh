#!/usr/bin/env bash
# i26i's bench call 1: where the storm's long dispatches go, in Go's own terms. One storm of
# 10,000 handshakes at the default GOGC and one at GOGC=off, each under a Go execution trace
# (-test.trace) with the CPU profiler on (its samples land in the trace with their goroutine),
# on main (d358a16) with the diagnosis of docs/results/vm-2026-12-04-tls/diag.patch plus a
# trace.Log("longdispatch", "START DUR") on the loop's goroutine at the end of each dispatch
# over 1 ms (diag-trace.patch here). trace.py lines the marks up with the trace's events.
# Build: git apply diag-trace.patch
#        go test -c -o /tmp/i26i/runtime-diag.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime
# Run:   /work/wt/bench docs/results/vm-2026-12-04b-tls/trace1.sh (output: trace1-*.txt; the traces stay in /tmp/i26i)
set -euo pipefail
T=/tmp/i26i/runtime-diag.test
D=$(cd "$(dirname "$0")" && pwd)
run=(-test.run 'TestTLSStormLag$' -tls.storm 10000)
one() { # name, gogc
	local name=$1 gogc=$2
	env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 GOGC="$gogc" taskset -c 0 timeout 120 "$T" "${run[@]}" \
		-test.trace "/tmp/i26i/$name.trace" -test.cpuprofile "/tmp/i26i/$name.cpu" >"/tmp/i26i/$name.out" 2>&1 || true
	grep -E '^(tls|long dispatch)' "/tmp/i26i/$name.out" >"$D/trace1-$name.txt" || true
}
date -u
one main-100 100
one main-off off
date -u
