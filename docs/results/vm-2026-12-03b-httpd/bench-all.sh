#!/bin/bash
# The one locked measurement of brief i25 (run through /work/wt/bench).
set -u
cd /work/wt/i25d
R=docs/results/vm-2026-12-03b-httpd
mkdir -p $R
date -u +"start %FT%TZ" > $R/when.txt
# 1. the A/B: the package (examples/http on Head/Send) against the example it replaced, P 1 and 16
SERVERS="percore-uring percore-old" JSON_SERVERS="" SLEEP_SERVERS="" PROXY=0 LOADCHECK="" \
  REPEATS=3 DURATION=5 OUT=$R/p16 scripts/bench-http.sh 2> $R/p16-stderr.txt
# 2. the adapter against net/http on one http.ServeMux, P 1
SERVERS="nethttp nethttp-adapt" PIPELINES=1 JSON_SERVERS="" SLEEP_SERVERS="" PROXY=0 LOADCHECK="" \
  REPEATS=3 DURATION=5 OUT=$R/adapter scripts/bench-http.sh 2> $R/adapter-stderr.txt
# 3. the Go benchmark of the request path, before (ac8c1e4) and after, and perf profiles of P 16
for b in base final; do
  /tmp/i25-$b.test -test.run XXX -test.bench 'Plaintext(Send)?/uring/P(1|16)$' -test.benchtime 2s \
    -test.count 3 -test.cpu 2 -test.benchmem > $R/gobench-$b.txt 2>&1
done
perf record -o /tmp/i25/lock-base.perf -F 20000 -e cpu-clock -- /tmp/i25-base.test -test.run XXX \
  -test.bench 'Plaintext/uring/P16$' -test.benchtime 3s -test.cpu 2 > /dev/null 2>&1
perf record -o /tmp/i25/lock-final.perf -F 20000 -e cpu-clock -- /tmp/i25-final.test -test.run XXX \
  -test.bench 'Plaintext/uring/P16$' -test.benchtime 3s -test.cpu 2 > /dev/null 2>&1
perf record -o /tmp/i25/lock-send.perf -F 20000 -e cpu-clock -- /tmp/i25-final.test -test.run XXX \
  -test.bench 'PlaintextSend/uring/P16$' -test.benchtime 3s -test.cpu 2 > /dev/null 2>&1
date -u +"end %FT%TZ" >> $R/when.txt
