#!/usr/bin/env bash
# (Run as /work/wt/bench bench-2.sh; ab.sh built this branch at 6b37d2f.)
# Second bench call for issue 28 part 4: the echo A/B again with 5 repeats
# (64 B, 50 and 1,000 connections), then a churn row (a new connection per
# request, 50 at a time), default features against + direct descriptors,
# with the plain liburing echo.
set -euo pipefail
out=/work/wt/i28d/docs/results/vm-2026-12-03b-fixed
cd /work/wt/i28d
{
date -u +"start %FT%TZ"; cat /proc/loadavg
BACKENDS=uring CONNS="50 1000" BYTES=64 REPEATS=5 timeout 330 scripts/ab.sh . ".::-uring-features=registered_ring,direct_descriptors" liburing 2>&1
date -u +"end %FT%TZ"
} | tee "$out/ab-echo-5.txt"
{
date -u +"start %FT%TZ"; cat /proc/loadavg
LOAD_FLAGS=-reconnect BACKENDS=uring CONNS="50" BYTES=64 REPEATS=3 timeout 120 scripts/ab.sh . ".::-uring-features=registered_ring,direct_descriptors" liburing 2>&1
date -u +"end %FT%TZ"
} | tee "$out/ab-churn.txt"
