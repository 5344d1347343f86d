#!/usr/bin/env bash
# i26j's bench call 1: the handshake pool's workers on threads of their own, lowered once for
# life (tlsconn's worker.lower), against main and against the no-handshake control, interleaved,
# 4 repeats, at the default GOGC and at GOGC=off, cpu0's steal after each line. Variants:
#   main       main (1bc3e82), the pool at nice 19 (the default): /tmp/i26j/runtime-main.test
#   life       this branch: the workers locked to their threads for life, lowered once, Notify on
#              a goroutine of its own: /tmp/i26j/runtime-life.test
#   life-idle  life with the workers at SCHED_IDLE (-tls.storm.sched idle)
#   plain      main's binary, the same storm with no handshakes (-tls.storm.plain 10: 10 rounds of
#              10,000 plain connections, about as long as a TLS storm): the host's floor
# Build: go test -c -o /tmp/i26j/runtime-life.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime
#        (likewise runtime-main.test from `git archive main`, unpacked in /tmp/i26j/mainsrc)
# Changes nothing on the machine. Run: /work/wt/bench docs/results/vm-2026-12-07-tls/bench1.sh
# (output appended to storm-runs1.txt; summary: python3 summary.py storm-runs1.txt).
set -euo pipefail
M=/tmp/i26j/runtime-main.test
L=/tmp/i26j/runtime-life.test
OUT=${OUT:-storm-runs1.txt}
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
			m "$rep" life-idle $g "$L" "${run[@]}" -tls.storm.sched idle
			m "$rep" plain $g "$M" "${run[@]}" -tls.storm.plain 10
		done
	done
	date -u
} | tee -a "$D/$OUT"
