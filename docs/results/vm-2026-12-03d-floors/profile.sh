#!/usr/bin/env bash
# Issue 28, the floors, final: where the time goes, for each floor, both servers
# under the same load (perf record -F 999 of the server for 4 s, 3 s into an
# 8-second run). Not a timing: run through the shared lock, beside other work,
#   /work/wt/heavy docs/results/vm-2026-12-03d-floors/profile.sh > profile.txt
# Sides: the echo at 50 and 1,000 connections, 64 B, under tcp_load (the C
# client): percore with the default features and the C liburing echo;
# examples/kv (default features) and redis-server under redis-benchmark -P 1
# -c 50; examples/http_proxy (io_uring, default features) and nginx proxy_pass
# under wrk -t1 -c100, an upstream nginx on cpu1. For each: the share of samples
# per binary (kernel, server, libraries), the io_uring, fd-lookup and
# scheduler symbols' shares, and the top symbols.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
w=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$w"' EXIT
go build -ldflags=-checklinkname=0 -o "$w/" ./examples/echo ./examples/kv ./examples/http_proxy
gcc -O2 -o "$w/cecho" examples/bench/baseline/uringc/echo.c -luring
gcc -O2 -o "$w/tcp_load" examples/bench/baseline/tcpc/tcp_load.c
nginx_conf() { # DIR PORT LOCATION
  mkdir -p "$1"
  cat >"$1/nginx.conf" <<NGX
worker_processes 1; master_process off; daemon off; pid $1/nginx.pid; error_log $1/error.log;
events { worker_connections 4096; }
http { access_log off; keepalive_requests 10000000; keepalive_timeout 75s;
  client_body_temp_path $1/b; proxy_temp_path $1/p; fastcgi_temp_path $1/f; uwsgi_temp_path $1/u; scgi_temp_path $1/s;
  upstream up { server 127.0.0.1:28999; keepalive 128; keepalive_requests 10000000; }
  server { listen 127.0.0.1:$2; $3 } }
NGX
}
report() { # NAME DATA
  echo "== $1"
  perf report -i "$2" --sort dso --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -6
  perf report -i "$2" --sort sym --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' >"$w/sym"
  awk '{ p = $1; sub(/%/, "", p); s = $NF
         if (s ~ /^(io_|__io_|io_uring)/) iou += p
         if (s ~ /^(fget|fput|__fget|fdget|__fdget|fd_install|alloc_fd|close_fd|file_close_fd)/) fd += p
         if (s ~ /^(schedule|__schedule|finish_task_switch|pick_next|try_to_wake_up|enqueue_task|dequeue_task)/) sch += p
         if (s ~ /^(tcp_|__tcp_|ip_|__ip_|inet_|sk_|__sk_|skb_|__skb|loopback|__netif|netif_|__dev_queue|dev_hard|process_backlog|net_rx|__napi|napi_)/) net += p }
       END { printf "   net/TCP/IP symbols %.1f%%, io_uring %.1f%%, fd table %.1f%%, scheduler %.1f%%\n", net, iou, fd, sch }' "$w/sym"
  head -22 "$w/sym"
}
port=28950
for n in 50 1000; do
  for side in percore liburing; do
    port=$((port + 1))
    if [ $side = percore ]; then
      GOMAXPROCS=1 taskset -c 0 "$w/echo" -addr 127.0.0.1:$port -cores 0 -backend uring >/dev/null 2>&1 &
    else
      taskset -c 0 "$w/cecho" 127.0.0.1:$port >/dev/null 2>&1 &
    fi
    srv=$!; sleep 0.5
    taskset -c 1 "$w/tcp_load" 127.0.0.1 $port $n 64 1 7 $srv >"$w/load.json" 2>/dev/null &
    ld=$!; sleep 3
    perf record -F 999 -p $srv -o "$w/p.data" -- sleep 4 >/dev/null 2>&1
    wait $ld; kill -TERM $srv; wait $srv 2>/dev/null
    echo "## echo c$n $side: $(cat "$w/load.json")"
    report "echo c$n $side" "$w/p.data"
  done
done
for side in kv redis; do
  port=$((port + 1))
  if [ $side = kv ]; then
    GOMAXPROCS=1 taskset -c 0 "$w/kv" -addr 127.0.0.1:$port -cores 0 -backend uring >/dev/null 2>&1 &
  else
    taskset -c 0 redis-server --port $port --bind 127.0.0.1 --save '' --appendonly no --dir "$w" --daemonize no >/dev/null 2>&1 &
  fi
  srv=$!; sleep 0.7
  taskset -c 1 redis-benchmark -h 127.0.0.1 -p $port -q -t set,get -c 50 -n 600000 -P 1 --csv >"$w/rb.csv" 2>/dev/null &
  ld=$!; sleep 2
  perf record -F 999 -p $srv -o "$w/p.data" -- sleep 4 >/dev/null 2>&1
  wait $ld; kill -TERM $srv; wait $srv 2>/dev/null
  echo "## resp P1 $side: $(tr '\n' ' ' <"$w/rb.csv")"
  report "resp P1 $side" "$w/p.data"
done
nginx_conf "$w/up" 28999 'location /plaintext { default_type text/plain; return 200 "Hello, World!"; }'
taskset -c 1 nginx -c "$w/up/nginx.conf" -p "$w/up" >/dev/null 2>&1 &
upstream=$!; sleep 0.5
for side in http_proxy nginx; do
  port=$((port + 1))
  if [ $side = http_proxy ]; then
    GOMAXPROCS=1 taskset -c 0 "$w/http_proxy" -addr 127.0.0.1:$port -backend uring -cores 0 -upstream 127.0.0.1:28999 -max 128 >/dev/null 2>&1 &
  else
    nginx_conf "$w/px$port" $port 'location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }'
    taskset -c 0 nginx -c "$w/px$port/nginx.conf" -p "$w/px$port" >/dev/null 2>&1 &
  fi
  srv=$!; sleep 0.5
  taskset -c 1 wrk -t1 -c100 -d8s http://127.0.0.1:$port/plaintext >"$w/wrk.txt" 2>&1 &
  ld=$!; sleep 3
  perf record -F 999 -p $srv -o "$w/p.data" -- sleep 4 >/dev/null 2>&1
  wait $ld; kill -TERM $srv; wait $srv 2>/dev/null
  echo "## proxy $side: $(grep -E 'Requests/sec|requests in' "$w/wrk.txt" | tr '\n' ' ')"
  report "proxy $side" "$w/p.data"
done
kill -TERM $upstream; wait $upstream 2>/dev/null
