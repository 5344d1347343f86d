#!/bin/bash
# The second locked measurement of brief i25: 5 interleaved repeats of P 16 and of the adapter.
set -u
cd /work/wt/i25d
R=docs/results/vm-2026-12-03b-httpd
git log -1 --format='code %h' > $R/when2.txt
date -u +"start %FT%TZ" >> $R/when2.txt
SERVERS="percore-uring percore-old" PIPELINES=16 JSON_SERVERS="" SLEEP_SERVERS="" PROXY=0 LOADCHECK="" \
  REPEATS=5 DURATION=5 OUT=$R/p16-2 scripts/bench-http.sh 2> $R/p16-2-stderr.txt
SERVERS="nethttp nethttp-adapt" PIPELINES=1 JSON_SERVERS="" SLEEP_SERVERS="" PROXY=0 LOADCHECK="" \
  REPEATS=5 DURATION=5 OUT=$R/adapter-2 scripts/bench-http.sh 2> $R/adapter-2-stderr.txt
date -u +"end %FT%TZ" >> $R/when2.txt
