#!/bin/bash
cpu() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' /proc/$1/stat; }
one() { # name port cmd...
  local name=$1 port=$2; shift 2
  "$@" >/dev/null 2>&1 & local pid=$!
  sleep 0.4
  taskset -c 1 wrk -t1 -c100 -d1s http://127.0.0.1:$port/plaintext >/dev/null
  local t0=$(cpu $pid) c0=$(grep ctxt /proc/stat | awk '{print $2}')
  local out; out=$(taskset -c 1 wrk -t1 -c100 -d${D:-4}s http://127.0.0.1:$port/plaintext)
  local t1=$(cpu $pid)
  kill $pid; wait $pid 2>/dev/null
  local n=$(echo "$out" | awk '/requests in/ {print $1}')
  awk -v name=$name -v n=$n -v t=$((t1-t0)) -v d=${D:-4} 'BEGIN { printf "%-14s %8.0f req/s  proxy %5.0f ns/req busy %.2f\n", name, n/d, t*1e7/n, t/100/d }'
}
taskset -c 1 nginx -c /tmp/ngup/nginx.conf -p /tmp/ngup >/dev/null 2>&1 & up=$!
sleep 0.3
for r in 1 2 3; do
  one uring 18201 env GOMAXPROCS=1 taskset -c 0 /tmp/i18bin/http_proxy -addr 127.0.0.1:18201 -cores 0 -backend uring -upstream 127.0.0.1:18190 -max 128
  one epoll 18202 env GOMAXPROCS=1 taskset -c 0 /tmp/i18bin/http_proxy -addr 127.0.0.1:18202 -cores 0 -backend epoll -upstream 127.0.0.1:18190 -max 128
  one uring-wb16 18203 env GOMAXPROCS=1 taskset -c 0 /tmp/i18bin/http_proxy -addr 127.0.0.1:18203 -cores 0 -backend uring -upstream 127.0.0.1:18190 -max 128 -wait-batch 16
  one nginx 18199 taskset -c 0 nginx -c /tmp/ngpx/nginx.conf -p /tmp/ngpx
done
kill $up
