#!/usr/bin/env bash
# i26i's bench call 6: the controls. What of the storm's lag is not a handshake's?
#   main        the TLS storm as in bench2.sh (/tmp/i26i/runtime-main.test)
#   host        the same with kdamond.0 (the kernel's DAMON thread, which bench calls 2-4 and
#               i26g's perf found on cpu0 for up to 4 ms) moved to cpu1 for the run
#   plain       no handshakes: the storm's client makes 10,000 plain TCP connections, 32 at a
#               time, each sending the same request and waiting for its echo (-tls.storm.plain),
#               with the same pinger: the loop's lag floor on this host
#   plain-host  plain with kdamond.0 on cpu1
# pid 1 (the VM's init, process_api at nice -10) is left where it is: it belongs to the machinery
# that runs these sessions, which a helper does not touch.
# Changes: kdamond.0's CPU affinity, to cpu1 during a "host" run; it is put back to what it was
# (read before, cpus 0-1 here) after each run and on exit. Undo by hand: taskset -p 3 $(pgrep -x kdamond.0)
# Interleaved, 4 repeats, the default GOGC, cpu0's steal after each line. As root.
# Run: /work/wt/bench docs/results/vm-2026-12-04b-tls/bench3.sh (output: storm-runs3.txt)
set -euo pipefail
M=/tmp/i26i/runtime-main.test
D=$(cd "$(dirname "$0")" && pwd)
run=(-test.run 'TestTLSStormLag$' -tls.storm 10000)
K=$(pgrep -x kdamond.0 || true)
kmask=""
if [[ -n $K ]]; then kmask=$(taskset -p "$K" | awk '{ print $NF }'); fi
restore() { if [[ -n $K && -n $kmask ]]; then taskset -p "$kmask" "$K" >/dev/null; fi; }
trap restore EXIT
steal() { awk '$1 == "cpu0" { print $9 }' /proc/stat; }
m() { # rep, name, host(0/1), then the command
	local rep=$1 name=$2 host=$3 s0 s1
	shift 3
	if [[ $host == 1 && -n $K ]]; then taskset -p 2 "$K" >/dev/null; fi
	s0=$(steal)
	echo -n "rep$rep $name kdamond=$(if [[ -n $K ]]; then taskset -p "$K" | awk '{ print $NF }'; fi) "
	env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 taskset -c 0 timeout 90 "$@" 2>&1 | grep -E '^tls ' | tr -d '\n' || echo -n "FAILED"
	s1=$(steal)
	restore
	echo " cpu0_steal=$(((s1 - s0) * 10))ms"
}
{
	date -u
	for rep in 1 2 3 4; do
		m $rep main 0 "$M" "${run[@]}"
		m $rep host 1 "$M" "${run[@]}"
		m $rep plain 0 "$M" "${run[@]}" -tls.storm.plain
		m $rep plain-host 1 "$M" "${run[@]}" -tls.storm.plain
	done
	date -u
} | tee -a "$D/storm-runs3.txt"
