#!/usr/bin/env bash
# Hand-over of WebSocket subscribers (issue 30): 18,000 subscribers, one gateway loop on cpu0,
# wsload on cpu1; per backend a run without restarts, then one with 5 SIGHUPs 2 s apart.
set -euo pipefail
ulimit -n 20000
OUT=/work/wt/i30c/docs/results/vm-2026-12-03-ws-restart
: > "$OUT/runs.jsonl"
port=17411
for backend in uring epoll; do
  for restarts in 0 5; do
    port=$((port+1))
    pidf=$(mktemp -u /tmp/i30c-gwpid.XXXX)
    log="$OUT/gateway-$backend-restarts$restarts.log"
    GOMAXPROCS=1 taskset -c 0 /tmp/i30c-gw -addr 127.0.0.1:$port -cores 0 -backend $backend -secret S \
      -ping-interval 30s -grace 5s -pidfile "$pidf" 2>"$log" &
    first=$!
    for _ in $(seq 100); do [ -s "$pidf" ] && break; sleep 0.05; done
    args=(-mode fanout -addr 127.0.0.1:$port -secret S -conns 18000 -interval 250ms -seconds 14s -json -timeout 3m)
    if [ "$restarts" -gt 0 ]; then args+=(-restarts "$restarts" -restart-every 2s -pidfile "$pidf"); fi
    echo "# backend=$backend restarts=$restarts: taskset -c 1 wsload ${args[*]}" >&2
    taskset -c 1 /tmp/i30c-wsload "${args[@]}" | sed "s/^{/{\"backend\":\"$backend\",/" >> "$OUT/runs.jsonl" || true
    kill "$(cat "$pidf")" 2>/dev/null || true
    for _ in $(seq 200); do kill -0 "$(cat "$pidf")" 2>/dev/null || break; sleep 0.05; done
    wait "$first" 2>/dev/null || true
    rm -f "$pidf"
  done
done
grep -h "handed over\"" "$OUT"/gateway-*.log || true
