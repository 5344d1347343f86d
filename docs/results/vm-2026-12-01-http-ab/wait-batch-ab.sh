#!/bin/bash
# ab.sh: alternate percore with and without -wait-batch, and gnet, P16
cpu() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' /proc/$1/stat; }
one() { # name port cmd...
  local name=$1 port=$2; shift 2
  GOMAXPROCS=1 taskset -c 0 "$@" >/dev/null 2>&1 & local pid=$!
  sleep 0.4
  taskset -c 1 wrk -t1 -c100 -d1s http://127.0.0.1:$port/plaintext -s /tmp/pipeline.lua -- ${P:-16} >/dev/null
  local t0=$(cpu $pid)
  local out; out=$( { TIMEFORMAT='%3U %3S'; time taskset -c 1 wrk -t1 -c100 -d${D:-4}s http://127.0.0.1:$port/plaintext -s /tmp/pipeline.lua -- ${P:-16}; } 2>&1 )
  local t1=$(cpu $pid)
  kill $pid; wait $pid 2>/dev/null
  local n=$(echo "$out" | awk '/requests in/ {print $1}')
  local wt=$(echo "$out" | tail -1 | awk '{print $1+$2}')
  awk -v name=$name -v n=$n -v t=$((t1-t0)) -v wt=$wt -v d=${D:-4} 'BEGIN { printf "%-14s %8.0f req/s  server %4.0f ns/req busy %.2f  client %4.0f ns/req\n", name, n/d, t*1e7/n, t/100/d, wt*1e9/n }'
}
for r in 1 2 3; do
  one uring 18091 /tmp/i18bin/http -addr 127.0.0.1:18091 -cores 0 -backend uring
  one uring-wb16 18092 /tmp/i18bin/http -addr 127.0.0.1:18092 -cores 0 -backend uring -wait-batch 16
  one uring-wb64 18093 /tmp/i18bin/http -addr 127.0.0.1:18093 -cores 0 -backend uring -wait-batch 64 -wait-min 50us
  one gnet 18094 /tmp/i18gnet/gnethttp -addr 127.0.0.1:18094 -loops 1
done
