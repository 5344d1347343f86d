#!/usr/bin/env bash
# Issue 28, the floors, final (bench call 1 of 3): the echo, 64 B, 50 and 1,000
# connections, 5 interleaved repeats, with BENCHMARKING.md's C epoll client
# (examples/bench/baseline/tcpc/tcp_load.c): a the default features (the
# registered ring), b the best opt-in combination, c every feature, d the plain
# C liburing echo. Run from the checkout as
#   /work/wt/bench docs/results/vm-2026-12-03d-floors/bench-1.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=docs/results/vm-2026-12-03d-floors
out=$d/echo${RUN:-}.txt
{ echo "# $(date -u +%FT%TZ) at $(git rev-parse --short HEAD); loadavg $(cut -d' ' -f1-3 /proc/loadavg)"; } >"$out"
CLIENT=c REPEATS=5 CONNS="50 1000" BYTES=64 BACKENDS=uring scripts/ab.sh . \
  .::-uring-features=registered_ring,skip_sends,direct_descriptors \
  .::-uring-features=registered_ring,skip_sends,direct_descriptors,napi,incremental_buffers,zero_copy_send \
  liburing 2>&1 | tee -a "$out"
echo "# end $(date -u +%FT%TZ)" >>"$out"
