#!/usr/bin/env bash
# mechanism.sh: the completions, enters and bundles per request of
# examples/echo with and without receive bundles (docs/decisions/0071),
# from the echo's own counters (-stats prints them every second), under
# BENCHMARKING.md's C client: one loop on cpu0, the client on cpu1.
# It changes nothing on the host: it builds the echo and the client into a
# temporary directory (removed on exit) and runs them on loopback ports
# 27800 and up. Undo: nothing to undo.
#
#   docs/results/vm-2026-12-04-bundles/mechanism.sh [--dry-run]
#   CONNS=50 BYTES=16384 BUFFER=4096 REPEATS=2 SECONDS_=6 (the defaults)
#
# One line per run: side, connections, bytes, buffer size, then per request
# (a request is BYTES in): completions, enters (Stats.Syscalls: nearly all
# io_uring_enter), loop turns, completions of several buffers and the buffers in them,
# each the mean over the stats lines of the window (the first two dropped:
# the client's warm-up).
set -euo pipefail

dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; fi
here=$(cd "$(dirname "$0")/../../.." && pwd)
conns=${CONNS:-50}
bytes=${BYTES:-16384}
buffer=${BUFFER:-4096}
reps=${REPEATS:-2}
secs=${SECONDS_:-6}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ "$dry" = 1 ]; then
  echo "+ build examples/echo and tcp_load into $work"
  echo "+ for each of $reps repeats: echo -stats -buffer-size $buffer [-uring-features=registered_ring,bundles], tcp_load $conns conns $bytes B"
  exit 0
fi
(cd "$here" && GOFLAGS="${GOFLAGS:--ldflags=-checklinkname=0}" go build -o "$work/echo" ./examples/echo)
gcc -O2 -o "$work/tcp_load" "$here/examples/bench/baseline/tcpc/tcp_load.c"

port=27800
for ((r = 1; r <= reps; r++)); do
  for side in default bundles; do
    port=$((port + 1))
    extra=()
    if [ "$side" = bundles ]; then extra=("-uring-features=registered_ring,bundles"); fi
    taskset -c 0 "$work/echo" -addr "127.0.0.1:$port" -cores 0 -backend uring -stats \
      -buffer-size "$buffer" "${extra[@]}" >/dev/null 2>"$work/stats" &
    srv=$!
    sleep 0.5
    taskset -c 1 "$work/tcp_load" 127.0.0.1 "$port" "$conns" "$bytes" 1 "$secs" "$srv" >/dev/null 2>&1 || true
    kill -TERM "$srv" 2>/dev/null || true
    wait "$srv" 2>/dev/null || true
    awk -v side="$side" -v conns="$conns" -v bytes="$bytes" -v buffer="$buffer" '
      /^open / {
        for (i = 1; i < NF; i++) v[$i] = $(i + 1)
        if (v["in"] + 0 == 0) next
        n++; if (n <= 2) next
        req = v["in"] / bytes
        c += v["completions/s"] / req; s += v["syscalls/s"] / req; t += v["turns/s"] / req
        b += v["bundles/s"] / req; bb += v["bundle-buffers/s"] / req; k++
      }
      END {
        if (k == 0) { print side, "c" conns, bytes "B", "buf" buffer, "no window"; exit }
        printf "%s c%s %sB buf%s completions/req %.3f enters/req %.3f turns/req %.3f bundles/req %.3f bundle-buffers/req %.3f\n",
          side, conns, bytes, buffer, c / k, s / k, t / k, b / k, bb / k
      }' "$work/stats"
  done
done
