#!/usr/bin/env bash
# Bench call 1 of issue 28 part 6 (incremental buffers), run as
#   /work/wt/bench docs/results/vm-2026-12-03c-incbuf/bench-1.sh
# from the checkout: the receive buffers' resident memory with 1,000
# connections (BenchmarkRecvMemory, its test binary built beforehand with
# go test -c -o /tmp/i28i-runtime.test -ldflags=-checklinkname=0 ./runtime/),
# then the 64-byte echo A/B: a = default features, b = + incremental
# buffers (128 of 64 KiB), c = + incremental buffers of a quarter of those
# bytes (-buffer-count 128: 32 of 64 KiB).
set -euo pipefail
out=docs/results/vm-2026-12-03c-incbuf
date -u +"start %FT%TZ" | tee "$out/memory.txt"
/tmp/i28i-runtime.test -test.run XXX -test.bench BenchmarkRecvMemory -test.benchtime 200x 2>&1 | tee -a "$out/memory.txt"
date -u +"start %FT%TZ" | tee "$out/ab-echo-64.txt"
BACKENDS=uring CONNS="50 1000" BYTES=64 REPEATS=3 scripts/ab.sh . \
  .::-uring-features=registered_ring,incremental_buffers \
  ".::-uring-features=registered_ring,incremental_buffers -buffer-count 128" 2>&1 | tee -a "$out/ab-echo-64.txt"
date -u +"end %FT%TZ" | tee -a "$out/ab-echo-64.txt"
