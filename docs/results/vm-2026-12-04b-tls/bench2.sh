#!/usr/bin/env bash
# i26i's bench call 5: the handshake thread that keeps cpu0 after it lowers itself. Bench calls 3-4
# (both1.sh, perf2.sh) found most long dispatches at GOGC=off to be the loop runnable while a pool
# thread, woken at nice 0 by the loop's own wake-up of an idle Go thread, lowered itself to nice 19
# and went on computing for about 1 ms: the kernel keeps what a thread is owed across the lowering.
# Variants, interleaved, 4 repeats, at the default GOGC and at GOGC=off, cpu0's steal after each:
#   main   this branch's test flags on main (d358a16): /tmp/i26i/runtime-main.test
#   idle   main with -tls.storm.sched idle (SCHED_IDLE for the pool's stretches, 0064's other class)
#   yield  main with sched_yield right after the lowering (yield.patch): /tmp/i26i/runtime-yield.test
# Build: go test -c -o /tmp/i26i/runtime-main.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime
#        (git apply yield.patch, the same to runtime-yield.test, git checkout runtime/tlsconn)
# Run: /work/wt/bench docs/results/vm-2026-12-04b-tls/bench2.sh (output: storm-runs2.txt)
set -euo pipefail
M=/tmp/i26i/runtime-main.test
Y=/tmp/i26i/runtime-yield.test
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
	for rep in 1 2 3 4; do
		for g in 100 off; do
			m $rep main $g "$M" "${run[@]}"
			m $rep idle $g "$M" "${run[@]}" -tls.storm.sched idle
			m $rep yield $g "$Y" "${run[@]}"
		done
	done
	date -u
} | tee -a "$D/storm-runs2.txt"
