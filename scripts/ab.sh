#!/usr/bin/env bash
# ab.sh: compare two checkouts' examples/echo, interleaved (A B A B ...),
# for the before/after runs of a change on the loop's path. It changes
# nothing on the host: it builds both servers and the load generator (from
# this checkout) into a temporary directory and runs them on loopback.
#
#   scripts/ab.sh /path/to/before /path/to/after
#   REPEATS=5 CONNS="50 1000" BACKENDS="uring epoll" scripts/ab.sh A B
#   scripts/ab.sh --dry-run A B
#
# One line per run: checkout, backend, connections, requests/s and server
# CPU per request (utime+stime over the window / requests, as bench.sh);
# then the median and range of each. Server on cpu0, load on cpu1.
set -euo pipefail

dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
[ $# -eq 2 ] || { echo "usage: scripts/ab.sh [--dry-run] BEFORE AFTER" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
a=$(cd "$1" && pwd)
b=$(cd "$2" && pwd)
reps=${REPEATS:-4}
conns_list=${CONNS:-50 1000}
backends=${BACKENDS:-uring epoll}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build() { # tree out
  if [ "$dry" = 1 ]; then echo "+ build $1/examples/echo -> $2"; return; fi
  (cd "$1" && GOFLAGS="${GOFLAGS:--ldflags=-checklinkname=0}" go build -o "$2" ./examples/echo)
}
build "$a" "$work/echo-a"
build "$b" "$work/echo-b"
if [ "$dry" = 1 ]; then echo "+ build $here/examples/bench/load"; exit 0; fi
(cd "$here" && go build -C examples/bench -o "$work/load" ./load)

port=27900
: >"$work/runs"
for ((r = 1; r <= reps; r++)); do
  for be in $backends; do
    for n in $conns_list; do
      for side in a b; do
        port=$((port + 1))
        taskset -c 0 "$work/echo-$side" -addr "127.0.0.1:$port" -cores 0 -backend "$be" >/dev/null 2>&1 &
        srv=$!
        sleep 0.5
        out=$(taskset -c 1 "$work/load" -addr "127.0.0.1:$port" -conns "$n" -bytes 64 -warmup 1 -seconds 5 \
          -json -server-pid "$srv" 2>/dev/null) || true
        kill -TERM "$srv" 2>/dev/null || true
        wait "$srv" 2>/dev/null || true
        rps=$(echo "$out" | sed -n 's/.*"rps":\([0-9.]*\).*/\1/p')
        cpu=$(echo "$out" | sed -n 's/.*"server_cpu_us_per_req":\([0-9.]*\).*/\1/p')
        echo "$side $be c$n ${rps:-0} ${cpu:-0}" | tee -a "$work/runs"
      done
    done
  done
done
echo "# median (min-max) of $reps runs; a = $a, b = $b"
for be in $backends; do
  for n in $conns_list; do
    for side in a b; do
      awk -v s="$side" -v be="$be" -v n="c$n" '$1 == s && $2 == be && $3 == n {print $5, $4}' "$work/runs" |
        sort -n | awk -v s="$side" -v be="$be" -v n="$n" '
          {cpu[NR] = $1; rps[NR] = $2}
          END {
            m = (NR % 2) ? cpu[(NR + 1) / 2] : (cpu[NR / 2] + cpu[NR / 2 + 1]) / 2
            printf "%s %s c%s: %.2f us/req (%.2f-%.2f)\n", s, be, n, m, cpu[1], cpu[NR]
          }'
    done
  done
done
