#!/usr/bin/env bash
# Issue 28, the floors, final (bench call 2 of 3): examples/kv -P 1 against
# redis-server (redis-benchmark -c 50 -t set,get, 200,000 of each, 5 interleaved
# repeats; kv-uring the default features, kv-uring-skip with skipped sends), then
# examples/http_proxy on io_uring against nginx proxy_pass (wrk -t1 -c100, 5 s,
# 5 interleaved repeats; proxy-percore the default features, proxy-percore-skip
# with skipped sends; the upstream nginx on the client's CPU). Run as
#   /work/wt/bench docs/results/vm-2026-12-03d-floors/bench-2.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
d=docs/results/vm-2026-12-03d-floors
echo "# $(date -u +%FT%TZ) at $(git rev-parse --short HEAD); loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >"$d/bench-2.log"
OUT=$d/resp KV_SERVERS="kv-uring kv-uring-skip redis" TABLES=kv PIPELINES=1 REPEATS=5 REQUESTS=200000 \
  scripts/bench-resp.sh 2>&1 | tee -a "$d/bench-2.log"
echo "# resp done $(date -u +%FT%TZ)" >>"$d/bench-2.log"
OUT=$d/http SERVERS= JSON_SERVERS= SLEEP_SERVERS= LOADCHECK= PROXY=1 \
  PROXIES="proxy-percore proxy-percore-skip proxy-nginx" REPEATS=5 DURATION=5 \
  scripts/bench-http.sh 2>&1 | tee -a "$d/bench-2.log"
echo "# end $(date -u +%FT%TZ)" >>"$d/bench-2.log"
