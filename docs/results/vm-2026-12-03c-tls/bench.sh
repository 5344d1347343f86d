#!/usr/bin/env bash
# i26f's bench call: the 10,000-handshake storm (TestTLSStormLag, the process on cpu0, the client
# and the pinger on cpu1, GOMAXPROCS=2, the pool at nice 19), interleaved, 3 repeats:
#   before   the code before this branch (commit 0ce4a39, /tmp/i26f/runtime-before.test)
#   gogc400  this branch at 7e6d0c0, Config.TLSPool.StormGOGC 400 (-tls.storm.gogc 400; both
#            measured here and removed after it, at no gain: docs/performance.md)
#   gogc800  this branch, StormGOGC 800
#   gcoff    this branch with GOGC=off for the whole process: no collection at all, the bound
#            of what pacing the collector can give
# Builds (before the call):
#   git archive 0ce4a39 | tar -x -C /tmp/i26f/base
#   (cd /tmp/i26f/base && go test -c -o /tmp/i26f/runtime-before.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime)
#   go test -c -o /tmp/i26f/runtime.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime
# Run: /work/wt/bench docs/results/vm-2026-12-03c-tls/bench.sh (its output: storm-runs.txt)
set -euo pipefail
B=/tmp/i26f/runtime-before.test
T=/tmp/i26f/runtime.test
D=/work/wt/i26f/docs/results/vm-2026-12-03c-tls
m() { # name, then the command
	local name=$1
	shift
	echo -n "$name "
	env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 "$@" 2>&1 | grep -E '^tls ' || echo "FAILED"
}
run=(-test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.sched nice)
storm() {
	case $1 in
	before) m before taskset -c 0 timeout 60 "$B" "${run[@]}" ;;
	gogc400) m gogc400 taskset -c 0 timeout 60 "$T" "${run[@]}" -tls.storm.gogc 400 ;;
	gogc800) m gogc800 taskset -c 0 timeout 60 "$T" "${run[@]}" -tls.storm.gogc 800 ;;
	gcoff) m gcoff GOGC=off taskset -c 0 timeout 60 "$T" "${run[@]}" ;;
	esac
}
{
	date -u
	for rep in 1 2 3; do
		for v in before gogc400 gogc800 gcoff; do
			echo -n "rep$rep "
			storm $v
		done
	done
	date -u
} | tee "$D/storm-runs.txt"
