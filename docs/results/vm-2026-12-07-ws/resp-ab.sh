#!/usr/bin/env bash
# Run: /work/wt/bench docs/results/vm-2026-12-07-ws/resp-ab.sh (the trees: git archive 1bc3e82, ae25e07).
# examples/kv at the session's start (1bc3e82) and end (ae25e07), back to back: TABLES=kv, kv's two servers.
set -e
for c in 50 1000; do
  for t in /tmp/lead/ws/src-m1bc /tmp/lead/src-new2; do
    date -u
    (cd "$t" && TABLES=kv KV_SERVERS="kv-uring kv-epoll" REPEATS=3 CLIENTS=$c PIPELINES="1 16" REQUESTS=200000 OUT="/tmp/lead/resp-$(basename "$t")-c$c" ./scripts/bench-resp.sh > "/tmp/lead/resp-$(basename "$t")-c$c.log" 2>&1)
  done
done
date -u
