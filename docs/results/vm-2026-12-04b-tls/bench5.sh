#!/usr/bin/env bash
# i26i's bench call 8: the no-handshake control again, long enough for LagMax. Bench call 6's
# plain rows (bench3.sh, the flag's first form) lasted 0.6-0.9 s, less than the loop's 1 s lag
# window, so their LagMax was never published (0): only their pings count. Here the plain client
# makes 10 rounds of 10,000 connections (each round closed before the next; about as long as a
# TLS storm), -tls.storm.plain 10:
#   plain       kdamond.0 where it is (cpus 0-1)
#   plain-host  kdamond.0 moved to cpu1 for the run (put back after each run and on exit;
#               undo by hand: taskset -p 3 $(pgrep -x kdamond.0)); pid 1 is left alone (bench3.sh)
# The binary is this branch at 77a951e (the flag's final form; the pool's yield, which a plain
# storm never reaches): /tmp/i26i/runtime-plain.test
# Interleaved, 4 repeats, the default GOGC, cpu0's steal after each line. As root.
# Run: /work/wt/bench docs/results/vm-2026-12-04b-tls/bench5.sh (output: storm-runs5.txt)
set -euo pipefail
P=/tmp/i26i/runtime-plain.test
D=$(cd "$(dirname "$0")" && pwd)
run=(-test.run 'TestTLSStormLag$' -tls.storm 10000 -tls.storm.plain 10)
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
		m $rep plain 0 "$P" "${run[@]}"
		m $rep plain-host 1 "$P" "${run[@]}"
	done
	date -u
} | tee -a "$D/storm-runs5.txt"
