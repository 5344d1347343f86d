#!/usr/bin/env bash
# i26h's bench call: TestTLSIdleMemory at 18,000 idle TLS connections (docs/performance.md
# "TLS, idle memory with the return"), the server process on cpu0, the idle client on cpu1,
# GOMAXPROCS=2, GOGC=100 (the default). Variants, interleaved:
#   ret    percore with the return after a storm on (Config.ReturnAfterStorm's default): the RSS is
#          read once the return has fired by itself (-tls.idle.return waits for HeapReturns)
#   noret  percore with the return off (ReturnAfterStorm -1): the heap as GOGC leaves it
#   nbio   examples/bench/baseline/tlsnbio in a child process (-tls.idle.mode exec)
#   retping, noretping  ret and noret with -tls.idle.ping: a plain connection to the loop pinged
#          every millisecond (from cpu1, SCHED_FIFO) from after the storm until the return fired
#          (noret: for 2 s), with the collector's pauses over that window (the return's cost on
#          the loop; their RSS is not the table's)
# Usage: tlsidle.sh OUT REPEATS "VARIANTS" (e.g. tlsidle.sh runs.txt 3 "ret noret"). Appends to OUT;
# changes nothing else.
# Builds (before the call, at the branch's commit):
#   go test -c -o /tmp/i26h/runtime.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime
#   (cd examples/bench && go build -o /tmp/i26h/tlsnbio ./baseline/tlsnbio/)
# Run: /work/wt/bench docs/results/vm-2026-12-04-tlsidle/tlsidle.sh OUT 3 "ret noret"
set -euo pipefail
out=${1:?out file} reps=${2:-3} variants=${3:-ret noret}
T=/tmp/i26h/runtime.test
run=(-test.run 'TestTLSIdleMemory$' -tls.idle 18000)
ulimit -n "$(ulimit -Hn)"
m() { # name, then the arguments
	local name=$1
	shift
	echo -n "rep$rep $name "
	env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 GOGC=100 taskset -c 0 timeout 400 "$T" "${run[@]}" "$@" 2>&1 | grep -E '^tls |FAIL|panic' || echo "FAILED"
}
{
	date -u
	for rep in $(seq "$reps"); do
		for v in $variants; do
			case $v in
			ret) m ret -tls.idle.mode percore -tls.idle.return ;;
			noret) m noret -tls.idle.mode percore ;;
			nbio) m nbio -tls.idle.mode exec -tls.idle.exec /tmp/i26h/tlsnbio ;;
			retping) m retping -tls.idle.mode percore -tls.idle.return -tls.idle.ping ;;
			noretping) m noretping -tls.idle.mode percore -tls.idle.ping ;;
			esac
		done
	done
	date -u
} | tee -a "$out"
