#!/usr/bin/env bash
# i25f, bench call 1: P 16 before (percore-base: 0170671) and after (the branch) interleaved, with
# percore-old and percore-old-rt; then BenchmarkView, base and branch, two interleaved rounds.
set -euo pipefail
cd /work/wt/i25f
SERVERS="percore-base percore-uring percore-old percore-old-rt" PIPELINES=16 JSON_SERVERS="" SLEEP_SERVERS="" PROXY=0 LOADCHECK="" \
  REPEATS=5 DURATION=5 BASE_REF=0170671 OUT=/tmp/i25f-res/call1-p16 scripts/bench-http.sh
cd runtime/httpd
for r in 1 2; do
  for t in base cur; do
    /tmp/i25f-$t.test -test.run XXX -test.bench 'BenchmarkView/(httpd|codec|codec-reserve)/P(1|16)$' -test.benchtime 2000x 2>&1 | grep Bench | sed "s/^/$t /"
  done
done
