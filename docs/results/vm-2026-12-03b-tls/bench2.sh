#!/usr/bin/env bash
# i26d bench call 2, after commit 11f5419 (Notify after the stretch of work, on a thread back at
# its priority): (1) the 10,000-handshake storm (TestTLSStormLag, the process on cpu0, client and
# pinger on cpu1, GOMAXPROCS=2), interleaved, 3 repeats: base (Sched normal), idle (the default),
# nice, idle-defer (an experiment binary: a handshake that takes its CPU place yields once,
# PERCORE_EXP_DEFER=1, not committed); (2) memory per idle TLS connection at 18,000
# (TestTLSIdleMemory): percore at GOGC=100 and 50, net/http + crypto/tls, and nbio
# (examples/bench/baseline/tlsnbio, the exec mode), each once.
set -euo pipefail
T=/tmp/i26d/runtime.test
X=/tmp/i26d/exp2.test
D=/work/wt/i26d/docs/results/vm-2026-12-03b-tls
m() { # name, then the command
	local name=$1
	shift
	echo -n "$name "
	env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 "$@" 2>&1 | grep -E '^tls ' || echo "FAILED"
}
storm() {
	case $1 in
	base) m base taskset -c 0 timeout 60 $T -test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.sched normal ;;
	idle) m idle taskset -c 0 timeout 60 $T -test.run 'TestTLSStormLag$' -tls.storm 10000 ;;
	nice) m nice taskset -c 0 timeout 60 $T -test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.sched nice ;;
	idle-defer) m idle-defer PERCORE_EXP_DEFER=1 taskset -c 0 timeout 60 $X -test.run 'TestTLSStormLag$' -tls.storm 10000 ;;
	esac
}
{
	date -u
	for rep in 1 2 3; do
		for v in base idle nice idle-defer; do
			echo -n "rep$rep "
			storm $v
		done
	done
	date -u
} | tee "$D/storm-runs-2.txt"
{
	date -u
	m percore taskset -c 0 timeout 150 $T -test.run 'TestTLSIdleMemory$' -tls.idle 18000 -tls.idle.mode percore
	m nbio taskset -c 0 timeout 150 $T -test.run 'TestTLSIdleMemory$' -tls.idle 18000 -tls.idle.mode exec -tls.idle.exec /tmp/i26d/tlsnbio
	m nethttp taskset -c 0 timeout 150 $T -test.run 'TestTLSIdleMemory$' -tls.idle 18000 -tls.idle.mode nethttp
	m percore-gogc50 GOGC=50 taskset -c 0 timeout 150 $T -test.run 'TestTLSIdleMemory$' -tls.idle 18000 -tls.idle.mode percore
	date -u
} | tee "$D/memory-18000.txt"
