#!/usr/bin/env bash
# i26j's bench call 2: bench call 1 again for main and life, with a third way of waking the loop,
# interleaved, 4 repeats, at the default GOGC and at GOGC=off, cpu0's steal after each line:
#   main         main (1bc3e82), the pool at nice 19 (the default): /tmp/i26j/runtime-main.test
#   life         this branch at its first commit (bench call 1's): /tmp/i26j/runtime-life.test
#   life-direct  life with Notify called on the worker's lowered thread itself, with no goroutine
#                (life-direct.patch on that commit): /tmp/i26j/runtime-direct.test
#   plain        main's binary with no handshakes (-tls.storm.plain 10), the default GOGC only
# Build: go test -c -o /tmp/i26j/runtime-direct.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime
#        (in a `git archive` of the commit with life-direct.patch applied; the others: bench1.sh)
# Changes nothing on the machine. Run: /work/wt/bench docs/results/vm-2026-12-07-tls/bench2.sh
# (output appended to storm-runs2.txt; summary: python3 summary.py storm-runs2.txt).
set -euo pipefail
M=/tmp/i26j/runtime-main.test
L=/tmp/i26j/runtime-life.test
X=/tmp/i26j/runtime-direct.test
OUT=${OUT:-storm-runs2.txt}
REPS=${REPS:-4}
D=$(cd "$(dirname "$0")" && pwd)
run=(-test.run 'TestTLSStormLag$' -tls.storm 10000)
steal() { awk '$1 == "cpu0" { print $9 }' /proc/stat; }
m() { # rep, name, gogc, then the command
	local rep=$1 name=$2 gogc=$3 s0 s1
	shift 3
	s0=$(steal)
	echo -n "rep$rep $name gogc=$gogc "
	env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 GOGC="$gogc" taskset -c 0 timeout 90 "$@" 2>&1 | grep -E '^tls ' | tr -d '\n' || echo -n "FAILED"
	s1=$(steal)
	echo " cpu0_steal=$(((s1 - s0) * 10))ms"
}
{
	date -u
	for rep in $(seq 1 "$REPS"); do
		for g in 100 off; do
			m "$rep" main $g "$M" "${run[@]}"
			m "$rep" life $g "$L" "${run[@]}"
			m "$rep" life-direct $g "$X" "${run[@]}"
		done
		m "$rep" plain 100 "$M" "${run[@]}" -tls.storm.plain 10
	done
	date -u
} | tee -a "$D/$OUT"
