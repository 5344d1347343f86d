#!/usr/bin/env bash
# i26g's bench call 5: the post lock. bench call 4's trace found the loop asleep in a dispatch on
# Loop.postMu, held by a handshake goroutine preempted inside Loop.post's wake-up (the eventfd
# write that wakes the loop on the CPU they share). Variants, each at the default GOGC and at
# GOGC=off, interleaved, 5 repeats, cpu0's steal after each line:
#   main     main as it is (/tmp/i26g/runtime-main.test, as in bench1.sh)
#   fix      the wake-up written after postMu is unlocked (its own lock, wakeMu, for the
#            descriptor's lifetime): /tmp/i26g/runtime-fix.test, this branch's runtime/post.go
#   fixa2    fix, and the loop's thread at a 100 us slice and nice -10 (bench1.sh's a2)
# Build (at 2f57bcc, which still has 0cc5265's flags): go test -c -o /tmp/i26g/runtime-fix.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime
# Run: /work/wt/bench docs/results/vm-2026-12-04-tls/bench5.sh (its output: storm-runs5.txt)
set -euo pipefail
M=/tmp/i26g/runtime-main.test
F=/tmp/i26g/runtime-fix.test
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
	for rep in 1 2 3 4 5; do
		for g in 100 off; do
			m $rep main $g "$M" "${run[@]}"
			m $rep fix $g "$F" "${run[@]}"
			m $rep fixa2 $g "$F" "${run[@]}" -tls.storm.loop.slice 100us -tls.storm.loop.nice -10
		done
	done
	date -u
} | tee -a "$D/storm-runs5.txt"
