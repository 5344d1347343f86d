#!/usr/bin/env bash
# i26g's bench call 1 (one repeat per call: bench1.sh REP): the 10,000-handshake storm
# (TestTLSStormLag, the process on cpu0, the client and the pinger on cpu1, GOMAXPROCS=2, the
# pool at nice 19, its default), each variant at the default GOGC and at GOGC=off, interleaved:
#   main     main as it is (c621f99, /tmp/i26g/runtime-main.test)
#   a1       the loop's thread with a 100 us kernel slice (sched_setattr's sched_runtime)
#   a2       a1 and the loop's thread at nice -10
#   b        the pool's lowered threads with a 100 us slice (PoolConfig.Slice, an experiment)
#   a2b      a2 and b
#   c        every thread but the loop's with a 100 us slice, set once after start (new Ms are
#            cloned from Go's template thread and inherit it), with a2
# Builds (before the call):
#   git archive c621f99 | tar -x -C /tmp/i26g/base
#   (cd /tmp/i26g/base && go test -c -o /tmp/i26g/runtime-main.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime)
#   go test -c -o /tmp/i26g/runtime.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime   (at 0cc5265: the flags)
# Run: for r in 1 2 3; do /work/wt/bench docs/results/vm-2026-12-04-tls/bench1.sh $r; done
# (its output: storm-runs1.txt)
set -euo pipefail
rep=${1:?repeat number}
M=/tmp/i26g/runtime-main.test
T=/tmp/i26g/runtime.test
D=/work/wt/i26g/docs/results/vm-2026-12-04-tls
run=(-test.run 'TestTLSStormLag$' -tls.storm 10000)
s100=100us
m() { # name, gogc, then the command
	local name=$1 gogc=$2
	shift 2
	echo -n "rep$rep $name gogc=$gogc "
	env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 GOGC="$gogc" taskset -c 0 timeout 90 "$@" 2>&1 | grep -E '^tls ' || echo "FAILED"
}
storm() {
	local g=$2
	case $1 in
	main) m main "$g" "$M" "${run[@]}" ;;
	a1) m a1 "$g" "$T" "${run[@]}" -tls.storm.loop.slice $s100 ;;
	a2) m a2 "$g" "$T" "${run[@]}" -tls.storm.loop.slice $s100 -tls.storm.loop.nice -10 ;;
	b) m b "$g" "$T" "${run[@]}" -tls.storm.pool.slice $s100 ;;
	a2b) m a2b "$g" "$T" "${run[@]}" -tls.storm.loop.slice $s100 -tls.storm.loop.nice -10 -tls.storm.pool.slice $s100 ;;
	c) m c "$g" "$T" "${run[@]}" -tls.storm.loop.slice $s100 -tls.storm.loop.nice -10 -tls.storm.pool.slice $s100 -tls.storm.others.slice $s100 ;;
	esac
}
{
	date -u
	for v in main a1 a2 b a2b c; do
		for g in 100 off; do
			storm $v $g
		done
	done
	date -u
} | tee -a "$D/storm-runs1.txt"
