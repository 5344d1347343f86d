#!/usr/bin/env bash
# mechanism-http.sh: receive completions and bundles per request of
# examples/http under wrk's pipelined plaintext (docs/decisions/0071), from
# the loop's own counters (-metrics), with bundles on, for each receive
# buffer size in SIZES: whether a pipelined batch fills more than one
# buffer at all. One loop on cpu0, wrk on cpu1.
# It changes nothing on the host: it builds examples/http into a temporary
# directory (removed on exit, with the Lua script) and runs it on loopback
# ports 27850 and up. Undo: nothing to undo.
#
#   docs/results/vm-2026-12-04-bundles/mechanism-http.sh [--dry-run]
#   SIZES="16384 4096 1024 512" PIPELINE=16 CONNS=100 SECONDS_=5 (the defaults)
#
# One line per size: the buffer size, wrk's requests, then per request the
# loop's completions (every kind), the completions that filled several
# buffers and the buffers in them.
set -euo pipefail

dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; fi
here=$(cd "$(dirname "$0")/../../.." && pwd)
sizes=${SIZES:-16384 4096 1024 512}
depth=${PIPELINE:-16}
conns=${CONNS:-100}
secs=${SECONDS_:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "$dry" = 1 ]; then
  echo "+ build examples/http into $work; for each of $sizes: http -buffer-size S -uring-features=registered_ring,bundles -metrics, wrk -c$conns -P$depth"
  exit 0
fi
(cd "$here" && GOFLAGS="${GOFLAGS:--ldflags=-checklinkname=0}" go build -o "$work/http" ./examples/http)
cat >"$work/pipeline.lua" <<'EOF'
init = function(args)
  local depth = tonumber(args[1]) or 1
  local r = {}
  for i = 1, depth do r[i] = wrk.format() end
  req = table.concat(r)
end
request = function() return req end
EOF

metric() { curl -s "http://127.0.0.1:$2/metrics" | awk -v m="percore_$1" '$1 == m || index($1, m "{") == 1 { s += $2 } END { printf "%.0f", s }'; }

port=27850
for size in $sizes; do
  port=$((port + 2))
  env GOMAXPROCS=1 taskset -c 0 "$work/http" -addr "127.0.0.1:$port" -backend uring -cores 0 \
    -buffer-size "$size" "-uring-features=registered_ring,bundles" -metrics "127.0.0.1:$((port + 1))" >/dev/null 2>&1 &
  srv=$!
  sleep 0.5
  c0=$(metric loop_completions_total $((port + 1)))
  b0=$(metric recv_bundles_total $((port + 1)))
  bb0=$(metric recv_bundle_buffers_total $((port + 1)))
  out=$(taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" -s "$work/pipeline.lua" "http://127.0.0.1:$port/plaintext" -- "$depth" 2>&1)
  c1=$(metric loop_completions_total $((port + 1)))
  b1=$(metric recv_bundles_total $((port + 1)))
  bb1=$(metric recv_bundle_buffers_total $((port + 1)))
  kill -TERM "$srv" 2>/dev/null || true
  wait "$srv" 2>/dev/null || true
  reqs=$(echo "$out" | sed -n 's/^ *\([0-9]*\) requests in.*/\1/p')
  awk -v s="$size" -v r="${reqs:-0}" -v c=$((c1 - c0)) -v b=$((b1 - b0)) -v bb=$((bb1 - bb0)) -v p="$depth" 'BEGIN {
    if (r == 0) { print "buf" s, "no requests"; exit }
    printf "buf%s P%s requests %d completions/req %.4f bundles/req %.4f bundle-buffers/req %.4f\n", s, p, r, c / r, b / r, bb / r }'
done
