#!/bin/bash
cd /work/wt/i29d
O=docs/results/vm-2026-12-03b-latency
{ echo "== before: $(date -u +%FT%TZ)"; uptime; ps -eo pid,pcpu,etime,comm --sort=-pcpu | head -6; } >> $O/machine.txt
env OUT=$O PROTOCOLS=echo CONNS=50 REPEATS=3 FRACTIONS=80 ECHO_SERVERS="percore-uring percore-epoll netpoll liburing" VEGETA=0 scripts/bench-latency.sh
{ echo "== after: $(date -u +%FT%TZ)"; uptime; ps -eo pid,pcpu,etime,comm --sort=-pcpu | head -6; } >> $O/machine.txt
