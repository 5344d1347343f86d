#!/usr/bin/env bash
# i26c bench call 1: idle TLS memory at 18,000 (percore GOGC 100 and 50, net/http), one 10,000-handshake storm, new connections/s (close) percore vs net/http x3.
set -euo pipefail
cd /work/wt/i26c
T=/tmp/i26c/runtime.test
m() { PERCORE_CLIENT_CPU=1 GOMAXPROCS=2 taskset -c 0 timeout 150 "$@" 2>&1 | grep -E '^tls ' || true; }
m $T -test.run 'TestTLSIdleMemory$' -tls.idle 18000 -tls.idle.mode percore
m $T -test.run 'TestTLSIdleMemory$' -tls.idle 18000 -tls.idle.mode nethttp
m env GOGC=50 $T -test.run 'TestTLSIdleMemory$' -tls.idle 18000 -tls.idle.mode percore
m $T -test.run 'TestTLSStormLag$' -tls.storm 10000
MODES=close SERVERS="percore-tls nethttp-tls" REPEATS=3 OUT=docs/results/vm-2026-12-03-tls-floors timeout 200 scripts/bench-tls.sh 2>&1 | tail -8
