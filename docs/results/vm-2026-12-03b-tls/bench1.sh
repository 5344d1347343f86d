#!/usr/bin/env bash
# i26d bench call 1: the 10,000-handshake storm (TestTLSStormLag, the process on cpu0, client and
# pinger on cpu1), six variants of the handshake threads' scheduling, interleaved, 3 repeats.
# base: the threads as they are (Sched normal); idle: SCHED_IDLE while computing; nice: nice 19;
# defer: a handshake that takes its CPU place first yields once (experiment switch
# PERCORE_EXP_DEFER, not kept as a switch); P3: GOMAXPROCS=3 instead of 2.
set -euo pipefail
T=/tmp/i26d/exp.test
OUT=${OUT:-/work/wt/i26d/docs/results/vm-2026-12-03b-tls/storm-runs.txt}
m() { # name, env..., -- args
	local name=$1
	shift
	echo -n "$name "
	env PERCORE_CLIENT_CPU=1 "$@" 2>&1 | grep -E '^tls ' || echo "FAILED"
}
run() {
	local v=$1
	case $v in
	base) m base GOMAXPROCS=2 taskset -c 0 timeout 60 $T -test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.sched normal ;;
	idle) m idle GOMAXPROCS=2 taskset -c 0 timeout 60 $T -test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.sched idle ;;
	nice) m nice GOMAXPROCS=2 taskset -c 0 timeout 60 $T -test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.sched nice ;;
	defer) m defer GOMAXPROCS=2 PERCORE_EXP_DEFER=1 taskset -c 0 timeout 60 $T -test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.sched normal ;;
	idle-defer) m idle-defer GOMAXPROCS=2 PERCORE_EXP_DEFER=1 taskset -c 0 timeout 60 $T -test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.sched idle ;;
	idle-defer-p3) m idle-defer-p3 GOMAXPROCS=3 PERCORE_EXP_DEFER=1 taskset -c 0 timeout 60 $T -test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.sched idle ;;
	esac
}
{
	date -u
	for rep in 1 2 3; do
		for v in base idle nice defer idle-defer idle-defer-p3; do
			echo -n "rep$rep "
			run $v
		done
	done
	date -u
} | tee "$OUT"
