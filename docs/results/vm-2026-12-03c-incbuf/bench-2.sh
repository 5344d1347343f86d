#!/usr/bin/env bash
# Bench call 2 of issue 28 part 6 (incremental buffers), run as
#   /work/wt/bench docs/results/vm-2026-12-03c-incbuf/bench-2.sh
# from the checkout: held parts by reference against copied out
# (BenchmarkIncrementalHeld, 3 interleaved repeats; the test binary built
# beforehand with go test -c -o /tmp/i28i-runtime.test
# -ldflags=-checklinkname=0 ./runtime/), then the 16 KiB echo A/B: a =
# default features, b = + incremental buffers (128 of 64 KiB), c = +
# incremental buffers of a quarter of those bytes (-buffer-count 128: 32
# of 64 KiB).
set -euo pipefail
out=docs/results/vm-2026-12-03c-incbuf
date -u +"start %FT%TZ" | tee "$out/held.txt"
for r in 1 2 3; do
  /tmp/i28i-runtime.test -test.run XXX -test.bench BenchmarkIncrementalHeld -test.benchtime 100x 2>&1 | grep Benchmark | tee -a "$out/held.txt"
done
date -u +"start %FT%TZ" | tee "$out/ab-echo-16k.txt"
BACKENDS=uring CONNS="50 1000" BYTES=16384 REPEATS=3 scripts/ab.sh . \
  .::-uring-features=registered_ring,incremental_buffers \
  ".::-uring-features=registered_ring,incremental_buffers -buffer-count 128" 2>&1 | tee -a "$out/ab-echo-16k.txt"
date -u +"end %FT%TZ" | tee -a "$out/ab-echo-16k.txt"
