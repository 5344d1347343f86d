#!/usr/bin/env bash
# i26d bench call 3, at commit 1c14d41 (SCHED_IDLE, Notify after the stretch, the yield at the CPU
# place): (1) the 10,000-handshake storm, the process on cpu0 (TestTLSStormLag, GOMAXPROCS=2,
# client and pinger on cpu1), interleaved, 3 repeats: before (the binary of bench call 1 with
# -tls.storm.sched normal: the code of main) against after (final.test, the defaults);
# (2) the loop alone pinned to cpu0, the process free on 0-1, so the pool computes on cpu1 (with
# the client): after, SCHED_IDLE against Sched normal, 2 repeats; (3) memory per idle TLS
# connection at 18,000, percore at the defaults, twice more.
set -euo pipefail
B=/tmp/i26d/exp.test
T=/tmp/i26d/final.test
D=/work/wt/i26d/docs/results/vm-2026-12-03b-tls
m() {
	local name=$1
	shift
	echo -n "$name "
	env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 "$@" 2>&1 | grep -E '^tls ' || echo "FAILED"
}
{
	date -u
	for rep in 1 2 3; do
		echo -n "rep$rep "
		m before taskset -c 0 timeout 60 $B -test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.sched normal
		echo -n "rep$rep "
		m after taskset -c 0 timeout 60 $T -test.run 'TestTLSStormLag$' -tls.storm 10000
	done
	for rep in 1 2; do
		echo -n "rep$rep "
		m B-after-idle timeout 60 $T -test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.cpu 0
		echo -n "rep$rep "
		m B-after-normal timeout 60 $T -test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.cpu 0 -tls.storm.sched normal
	done
	date -u
} | tee "$D/storm-runs-3.txt"
{
	date -u
	for rep in 1 2; do
		m percore taskset -c 0 timeout 150 $T -test.run 'TestTLSIdleMemory$' -tls.idle 18000 -tls.idle.mode percore
	done
	date -u
} | tee "$D/memory-18000-3.txt"
