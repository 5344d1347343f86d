#!/bin/bash
# prof-adapt.sh OUT [PATH]: perf profile of the adapter server under wrk -c100 (P 1)
set -e
out=$1; path=${2:-/plaintext}
port=28791
env GOMAXPROCS=2 taskset -c 0 /tmp/i25/httpd -addr 127.0.0.1:$port -backend uring -serve adapt > /tmp/i25/srv.log 2>&1 &
pid=$!
for i in $(seq 50); do grep -q listening /tmp/i25/srv.log && break; sleep 0.1; done
taskset -c 1 wrk -t1 -c100 -d1s http://127.0.0.1:$port$path >/dev/null
taskset -c 1 timeout 30 wrk -t1 -c100 -d6s http://127.0.0.1:$port$path > $out.wrk &
w=$!
sleep 1
perf record -g -o $out -F 10000 -e cpu-clock -p $pid -- sleep 4 2>/dev/null
wait $w
kill $pid; wait $pid || true
cat $out.wrk | grep -E 'Requests/sec|Latency'
