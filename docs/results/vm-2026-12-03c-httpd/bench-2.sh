#!/usr/bin/env bash
# i25e, bench call 2 (after): the issue-25 measurements, and BenchmarkView at 0ce4a39 (base) and at the branch (cur)
set -euo pipefail
cd /work/wt/i25e
SERVERS="percore-uring percore-old percore-old-rt" JSON_SERVERS="" SLEEP_SERVERS="" PROXY=0 LOADCHECK="" REPEATS=5 DURATION=5 OUT=/tmp/i25e-after-p16 scripts/bench-http.sh
SERVERS="nethttp nethttp-adapt" PIPELINES=1 JSON_SERVERS="" SLEEP_SERVERS="" PROXY=0 LOADCHECK="" REPEATS=5 DURATION=5 OUT=/tmp/i25e-after-adapt scripts/bench-http.sh
cd runtime/httpd
for r in 1 2; do
  for t in base cur; do
    /tmp/i25e-$t.test -test.run XXX -test.bench 'BenchmarkView/(httpd|codec)/P(1|16)$' -test.benchtime 2000x 2>&1 | grep Bench | sed "s/^/$t /"
  done
done
