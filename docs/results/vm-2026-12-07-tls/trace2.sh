#!/usr/bin/env bash
# i26j's bench call 4: trace1.sh again, and at GOGC=off. One storm of 10,000 handshakes each for
# main and life (bench1.sh's binaries) at the default GOGC and one each at GOGC=off, under a
# Go execution trace (-test.trace); yieldwaits.py (../vm-2026-12-04b-tls/) then lists the loop
# goroutine's waits off its P over 0.5 ms: why, and what its P ran meanwhile.
# Changes nothing on the machine; the traces stay in /tmp/i26j.
# Run: /work/wt/bench docs/results/vm-2026-12-07-tls/trace2.sh (output: trace2-*.txt), then
#   go tool trace -d=parsed /tmp/i26j/NAME.trace > /tmp/i26j/NAME.parsed
#   python3 ../vm-2026-12-04b-tls/yieldwaits.py /tmp/i26j/NAME.parsed > trace2-NAME-yieldwaits.txt
set -euo pipefail
D=$(cd "$(dirname "$0")" && pwd)
run=(-test.run 'TestTLSStormLag$' -tls.storm 10000)
one() { # name, binary, gogc
	local name=$1 bin=$2 gogc=$3
	env PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 GOGC="$gogc" taskset -c 0 timeout 120 "$bin" "${run[@]}" \
		-test.trace "/tmp/i26j/$name.trace" >"/tmp/i26j/$name.out" 2>&1 || true
	grep -E '^tls' "/tmp/i26j/$name.out" >"$D/trace2-$name.txt" || true
}
date -u
one main-100 /tmp/i26j/runtime-main.test 100
one life-100 /tmp/i26j/runtime-life.test 100
one main-off /tmp/i26j/runtime-main.test off
one life-off /tmp/i26j/runtime-life.test off
date -u
