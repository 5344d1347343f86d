#!/bin/bash
# prof-p16.sh BIN OUT: perf of an examples/http server under wrk -c100 P16 (4 s of 6)
set -e
bin=$1; out=$2; port=28795
cat > /tmp/i25/pipeline.lua <<'L'
init = function(args)
  local depth = tonumber(args[1]) or 1
  local r = {}
  for i = 1, depth do r[i] = wrk.format() end
  req = table.concat(r)
end
request = function() return req end
L
env GOMAXPROCS=1 taskset -c 0 $bin -addr 127.0.0.1:$port -backend uring -cores 0 > /tmp/i25/srv16.log 2>&1 &
pid=$!
for i in $(seq 50); do grep -q listening /tmp/i25/srv16.log && break; sleep 0.1; done
taskset -c 1 wrk -t1 -c100 -d1s http://127.0.0.1:$port/plaintext -s /tmp/i25/pipeline.lua -- 16 >/dev/null
taskset -c 1 timeout 30 wrk -t1 -c100 -d6s http://127.0.0.1:$port/plaintext -s /tmp/i25/pipeline.lua -- 16 > $out.wrk &
w=$!
sleep 1
perf record -o $out -F 20000 -e cpu-clock -p $pid -- sleep 4 2>/dev/null
wait $w
kill $pid; wait $pid || true
grep Requests/sec $out.wrk
