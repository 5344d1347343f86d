#!/bin/bash
# bench4.sh: the missing curves (issue 29), the generator polling (bench-latency.sh's default
# LOAD_ARGS="-spin 1ms"): echo at 1,000 connections (percore io_uring, C liburing, netpoll;
# with the 1,000-connection floors), RESP at 50 (kv, redis-server), HTTP at 50 (percore,
# nginx; the floor; wrk2 beside load at 5,000 and 20,000 requests/s). One repeat each.
set -u
cd /work/wt/i29d
O=docs/results/vm-2026-12-03b-latency/curves
mkdir -p $O
{ echo "== bench4 before: $(date -u +%FT%TZ)"; uptime; ps -eo pid,pcpu,etime,comm --sort=-pcpu | head -6; } >> $O/machine.txt
env OUT=$O PROTOCOLS=echo CONNS=1000 REPEATS=1 FRACTIONS="50 80 100" ECHO_SERVERS="percore-uring liburing netpoll" VEGETA=0 scripts/bench-latency.sh
env OUT=$O PROTOCOLS=resp CONNS=50 REPEATS=1 FRACTIONS="10 50 80 90 100" VEGETA=0 scripts/bench-latency.sh
env OUT=$O PROTOCOLS=http CONNS=50 REPEATS=1 FRACTIONS="10 50 80 100" HTTP_SERVERS="percore nginx" VEGETA=0 WRK2=/tmp/wrk2/wrk VEGETA_RATES="5000 20000" scripts/bench-latency.sh
{ echo "== bench4 after: $(date -u +%FT%TZ)"; uptime; ps -eo pid,pcpu,etime,comm --sort=-pcpu | head -6; } >> $O/machine.txt
