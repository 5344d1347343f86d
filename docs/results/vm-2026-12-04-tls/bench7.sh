#!/usr/bin/env bash
# i26g's bench call 7: the branch as it ends (no experiment code left) against main, the default
# GOGC and GOGC=off, 3 interleaved repeats, cpu0's steal after each line.
#   main  /tmp/i26g/runtime-main.test (c621f99, as in bench1.sh)
#   head  /tmp/i26g/runtime-head.test: go test -c -o /tmp/i26g/runtime-head.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime
#         at 5046230
# Run: /work/wt/bench docs/results/vm-2026-12-04-tls/bench7.sh (its output: storm-runs7.txt)
set -euo pipefail
M=/tmp/i26g/runtime-main.test
H=/tmp/i26g/runtime-head.test
D=/work/wt/i26g/docs/results/vm-2026-12-04-tls
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
	for rep in 1 2 3; do
		for g in 100 off; do
			m $rep main $g "$M" "${run[@]}"
			m $rep head $g "$H" "${run[@]}"
		done
	done
	date -u
} | tee -a "$D/storm-runs7.txt"
