#!/usr/bin/env bash
# i26g's bench call 3: bench1.sh's main, a2 and a2b at the default GOGC only, 5 interleaved
# repeats, each line followed by cpu0's steal time over the run (/proc/stat, the host running
# something else on the vCPU), to firm up call 1's LagMax medians. Binaries as in bench1.sh.
# Run: /work/wt/bench docs/results/vm-2026-12-04-tls/bench3.sh (its output: storm-runs3.txt)
set -euo pipefail
M=/tmp/i26g/runtime-main.test
T=/tmp/i26g/runtime.test
D=/work/wt/i26g/docs/results/vm-2026-12-04-tls
run=(-test.run 'TestTLSStormLag$' -tls.storm 10000)
steal() { awk '$1 == "cpu0" { print $9 }' /proc/stat; }
m() { # rep, name, then the command
	local rep=$1 name=$2 s0 s1
	shift 2
	s0=$(steal)
	echo -n "rep$rep $name gogc=100 "
	env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 taskset -c 0 timeout 90 "$@" 2>&1 | grep -E '^tls ' | tr -d '\n' || echo -n "FAILED"
	s1=$(steal)
	echo " cpu0_steal=$(((s1 - s0) * 10))ms"
}
{
	date -u
	for rep in 1 2 3 4 5; do
		m $rep main "$M" "${run[@]}"
		m $rep a2 "$T" "${run[@]}" -tls.storm.loop.slice 100us -tls.storm.loop.nice -10
		m $rep a2b "$T" "${run[@]}" -tls.storm.loop.slice 100us -tls.storm.loop.nice -10 -tls.storm.pool.slice 100us
	done
	date -u
} | tee -a "$D/storm-runs3.txt"
