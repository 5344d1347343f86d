#!/usr/bin/env bash
set -e
date -u
(cd /tmp/lead/ws/src-m1bc && SERVERS="percore-uring percore-epoll" REPEATS=3 PERF=0 OUT=/tmp/lead/echo-old ./scripts/bench.sh > /tmp/lead/echo-old.log 2>&1)
date -u
(cd /tmp/lead/src-new && SERVERS="percore-uring percore-epoll" REPEATS=3 PERF=0 OUT=/tmp/lead/echo-new ./scripts/bench.sh > /tmp/lead/echo-new.log 2>&1)
date -u
