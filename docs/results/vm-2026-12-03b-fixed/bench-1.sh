#!/usr/bin/env bash
# (Run as /work/wt/bench bench-1.sh; /tmp/i28-echo and /tmp/i28-load were go build -o of
# ./examples/echo and examples/bench/load of this branch at b1999c2, which ab.sh also built.)
# One bench call for issue 28 part 4: the echo A/B (default features against
# default + direct descriptors, with the plain liburing echo), then a short
# cpu-clock profile of each percore side at 1,000 connections (fget's share).
set -euo pipefail
out=/work/wt/i28d/docs/results/vm-2026-12-03b-fixed
cd /work/wt/i28d
date -u +"start %FT%TZ" | tee "$out/ab-echo.txt"
cat /proc/loadavg >> "$out/ab-echo.txt"
BACKENDS=uring CONNS="50 1000" BYTES=64 REPEATS=3 timeout 420 scripts/ab.sh . ".::-uring-features=registered_ring,direct_descriptors" liburing 2>&1 | tee -a "$out/ab-echo.txt"
date -u +"end %FT%TZ" | tee -a "$out/ab-echo.txt"
# Profiles: 3 s of perf record at 1,000 connections, each side.
for side in default direct; do
  flags=""
  [ "$side" = direct ] && flags="-uring-features registered_ring,direct_descriptors"
  # shellcheck disable=SC2086
  taskset -c 0 /tmp/i28-echo -addr 127.0.0.1:27881 -cores 0 -backend uring $flags >/dev/null 2>&1 &
  srv=$!
  sleep 0.5
  taskset -c 1 /tmp/i28-load -addr 127.0.0.1:27881 -conns 1000 -bytes 64 -warmup 1 -seconds 5 -json -server-pid $srv > "$out/profile-$side-load.json" 2>/dev/null &
  ld=$!
  sleep 1.5
  perf record -e cpu-clock -F 999 -g -o /tmp/i28-perf-$side.data -p $srv -- sleep 3 >/dev/null 2>&1 || true
  wait $ld || true
  kill -TERM $srv; wait $srv || true
  perf report -i /tmp/i28-perf-$side.data --no-children --sort sym --stdio 2>/dev/null | grep -v "^$" | grep "%" | head -40 > "$out/profile-$side-top.txt" || true
done
date -u +"done %FT%TZ" | tee -a "$out/ab-echo.txt"
