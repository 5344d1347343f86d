#!/usr/bin/env bash
# i26i's bench call 7: the final code against main, interleaved, 5 repeats, at the default GOGC
# and at GOGC=off, cpu0's steal after each line.
#   main   main (d358a16) with this branch's test flags: /tmp/i26i/runtime-main.test (bench2.sh's)
#   fix    a pool thread yields right after it lowers itself (tlsconn's enter, yieldLowered;
#          yield-final.patch, this branch at 8e5f2ff, taken out again at a9fd3e4):
#          /tmp/i26i/runtime-fix.test
# Build (at 8e5f2ff): go test -c -o /tmp/i26i/runtime-fix.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime
# Run: /work/wt/bench docs/results/vm-2026-12-04b-tls/bench4.sh (output: storm-runs4.txt)
set -euo pipefail
M=/tmp/i26i/runtime-main.test
F=/tmp/i26i/runtime-fix.test
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
	for rep in 1 2 3 4 5; do
		for g in 100 off; do
			m $rep main $g "$M" "${run[@]}"
			m $rep fix $g "$F" "${run[@]}"
		done
	done
	date -u
} | tee -a "$D/storm-runs4.txt"
