#!/usr/bin/env bash
# i26i's bench call 9: the ~100 ms pings. Bench calls 5 and 7 each had one ping of 97-99 ms in a
# yield run at the default GOGC (2 of 9 such runs; main's maxima 15-34 ms). Four storms of this
# branch's code at 8e5f2ff, with the yield (/tmp/i26i/runtime-fix.test, bench4.sh's) at the default GOGC under a Go
# execution trace; yieldwaits.py lists the loop goroutine's longest waits for its P in each.
# Run: /work/wt/bench docs/results/vm-2026-12-04b-tls/trace2.sh (output: trace2-*.txt; traces in /tmp/i26i)
set -euo pipefail
F=/tmp/i26i/runtime-fix.test
D=$(cd "$(dirname "$0")" && pwd)
date -u
for rep in 1 2 3 4; do
	env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 taskset -c 0 timeout 120 "$F" -test.run 'TestTLSStormLag$' -tls.storm 10000 \
		-test.trace "/tmp/i26i/fix-$rep.trace" 2>&1 | grep -E '^tls ' >"$D/trace2-fix-$rep.txt" || true
done
date -u
