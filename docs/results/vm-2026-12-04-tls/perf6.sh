#!/usr/bin/env bash
# i26g's bench call 6: bench call 4 again on the post-lock fix: which threads held cpu0 during the
# storm's long dispatches. The binary is this branch at 2f57bcc with diag.patch applied (a diagnosis only, not committed: the loop notes each
# dispatch over 1 ms with its CLOCK_MONOTONIC start, and TestTLSStormLag prints them), run
# under perf record -k CLOCK_MONOTONIC with bench call 2's events, so that sched.py -d can
# line each long dispatch up with the loop thread's scheduling.
#   git apply docs/results/vm-2026-12-04-tls/diag.patch
#   go test -c -o /tmp/i26g/runtime-fixdiag.test -ldflags=github.com/percore/percore/ring=-checklinkname=0 ./runtime
#   git checkout runtime && rm runtime/diag_longturns.go
# Run: /work/wt/bench docs/results/vm-2026-12-04-tls/perf6.sh (output: perf6-*.txt)
set -euo pipefail
T=/tmp/i26g/runtime-fixdiag.test
D=/work/wt/i26g/docs/results/vm-2026-12-04-tls
ev=sched:sched_switch,sched:sched_waking,syscalls:sys_enter_futex,syscalls:sys_enter_io_uring_enter
run=(-test.run 'TestTLSStormLag$' -tls.storm 10000)
one() { # name, gogc, extra flags
	local name=$1 gogc=$2
	shift 2
	taskset -c 1 perf record -q -k CLOCK_MONOTONIC -a -e "$ev" -o "/tmp/i26g/$name.data" -- \
		env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 GOGC="$gogc" taskset -c 0 timeout 90 "$T" "${run[@]}" "$@" \
		>"/tmp/i26g/$name.out" 2>&1
	grep -E '^(tls|loop thread|long dispatch)' "/tmp/i26g/$name.out" >"$D/perf6-$name.txt"
}
date -u
one fixdiag-100 100
one fixdiag-off off
date -u
