#!/usr/bin/env bash
# i25e: both issue-25 measurements in one bench call. $1 = tag (before/after)
set -euo pipefail
cd /work/wt/i25e
tag=$1
SERVERS="percore-uring percore-old" JSON_SERVERS="" SLEEP_SERVERS="" PROXY=0 LOADCHECK="" REPEATS=5 DURATION=5 OUT=/tmp/i25e-$tag-p16 scripts/bench-http.sh
SERVERS="nethttp nethttp-adapt" PIPELINES=1 JSON_SERVERS="" SLEEP_SERVERS="" PROXY=0 LOADCHECK="" REPEATS=5 DURATION=5 OUT=/tmp/i25e-$tag-adapt scripts/bench-http.sh
