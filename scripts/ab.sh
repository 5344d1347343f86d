#!/usr/bin/env bash
# ab.sh: compare checkouts' examples/echo, interleaved (A B A B ...), for
# the before/after runs of a change on the loop's path. It changes nothing
# on the host: it builds the servers and the load generator (from this
# checkout) into a temporary directory and runs them on loopback.
#
#   scripts/ab.sh /path/to/before /path/to/after
#   REPEATS=5 CONNS="50 1000" BYTES="64 16384" BACKENDS="uring epoll" scripts/ab.sh A B
#   LOAD_FLAGS=-perf scripts/ab.sh A B   (extra load flags: -perf counts the server's syscalls)
#   scripts/ab.sh --dry-run A B
#   CLIENT=c scripts/ab.sh A B   (the load from BENCHMARKING.md's independent C epoll client,
#                                 examples/bench/baseline/tcpc/tcp_load.c, instead of
#                                 examples/bench/load; LOAD_FLAGS does not apply to it)
#
# More than two sides may be given. A side is a checkout, a checkout with
# the echo's extra flags after "::" (one build per checkout, so that the
# variants of one tree are Config switches run side by side), or
# "liburing", the plain C liburing echo (examples/bench/baseline/uringc,
# built with gcc -luring; it has no backend, so it runs once per row):
#
#   scripts/ab.sh /tmp/main . .::-uring-features=none liburing
#
# One line per run: side, backend, connections, bytes, requests/s,
# server CPU per request (utime+stime over the window / requests, as
# bench.sh), the server's context switches per request and, with
# LOAD_FLAGS=-perf, its system calls per request (else NA), the server's
# and the client's CPU (% of the window: the S and C flags of
# BENCHMARKING.md) and the machine's steal (%); then the
# median and range of each CPU figure. Server on cpu0, load on
# cpu1.
set -euo pipefail

dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; shift; fi
[ $# -ge 2 ] || { echo "usage: scripts/ab.sh [--dry-run] BEFORE AFTER [MORE...]" >&2; exit 2; }
here=$(cd "$(dirname "$0")/.." && pwd)
reps=${REPEATS:-4}
conns_list=${CONNS:-50 1000}
bytes_list=${BYTES:-64}
backends=${BACKENDS:-uring epoll}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The sides: names a, b, c, ...; each with its binary and flags.
names=(a b c d e f g h)
[ $# -le ${#names[@]} ] || { echo "ab.sh: at most ${#names[@]} sides" >&2; exit 2; }
declare -a bin flags desc
declare -A built
i=0
for side in "$@"; do
  tree=${side%%::*}
  extra=""
  if [[ "$side" == *::* ]]; then extra=${side#*::}; fi
  if [ "$tree" = liburing ]; then
    exe="$work/liburing-echo"
    if [ -z "${built[liburing]:-}" ]; then
      if [ "$dry" = 1 ]; then echo "+ gcc $here/examples/bench/baseline/uringc/echo.c -> $exe"; else
        gcc -O2 -o "$exe" "$here/examples/bench/baseline/uringc/echo.c" -luring
      fi
      built[liburing]=1
    fi
  else
    dir=$(cd "$tree" && pwd)
    if [ -z "${built[$dir]:-}" ]; then
      exe="$work/echo-${names[$i]}"
      if [ "$dry" = 1 ]; then echo "+ build $dir/examples/echo -> $exe"; else
        (cd "$dir" && GOFLAGS="${GOFLAGS:--ldflags=-checklinkname=0}" go build -o "$exe" ./examples/echo)
      fi
      built[$dir]=$exe
    fi
    exe=${built[$dir]}
  fi
  bin[i]=$exe
  flags[i]=$extra
  desc[i]="$side"
  i=$((i + 1))
done
nsides=$i
client=${CLIENT:-load}
case "$client" in load | c) ;; *) echo "ab.sh: CLIENT is load or c" >&2; exit 2 ;; esac
if [ "$dry" = 1 ]; then echo "+ build the $client client"; exit 0; fi
if [ "$client" = c ]; then
  gcc -O2 -o "$work/tcp_load" "$here/examples/bench/baseline/tcpc/tcp_load.c"
else
  (cd "$here" && go build -C examples/bench -o "$work/load" ./load)
fi

port=27900
: >"$work/runs"
for ((r = 1; r <= reps; r++)); do
  for be in $backends; do
    for n in $conns_list; do
      for sz in $bytes_list; do
        for ((s = 0; s < nsides; s++)); do
          side=${names[$s]}
          port=$((port + 1))
          if [ "${desc[s]}" = liburing ]; then
            # No backend: once per row, under the first backend only.
            [ "$be" = "${backends%% *}" ] || continue
            # shellcheck disable=SC2086
            taskset -c 0 "${bin[s]}" "127.0.0.1:$port" >/dev/null 2>&1 &
          else
            # shellcheck disable=SC2086
            taskset -c 0 "${bin[s]}" -addr "127.0.0.1:$port" -cores 0 -backend "$be" ${flags[s]} >/dev/null 2>&1 &
          fi
          srv=$!
          sleep 0.5
          if [ "$client" = c ]; then
            out=$(taskset -c 1 "$work/tcp_load" 127.0.0.1 "$port" "$n" "$sz" 1 5 "$srv" 2>/dev/null) || true
          else
            # shellcheck disable=SC2086
            out=$(taskset -c 1 "$work/load" -addr "127.0.0.1:$port" -conns "$n" -bytes "$sz" -warmup 1 -seconds 5 \
              -json -server-pid "$srv" ${LOAD_FLAGS:-} 2>/dev/null) || true
          fi
          kill -TERM "$srv" 2>/dev/null || true
          wait "$srv" 2>/dev/null || true
          rps=$(echo "$out" | sed -n 's/.*"rps":\([0-9.]*\).*/\1/p')
          cpu=$(echo "$out" | sed -n 's/.*"server_cpu_us_per_req":\([0-9.]*\).*/\1/p')
          cs=$(echo "$out" | sed -n 's/.*"server_ctxsw_per_req":\([0-9.]*\).*/\1/p')
          sc=$(echo "$out" | sed -n 's/.*"server_syscalls_per_req":\([0-9.]*\).*/\1/p')
          spct=$(echo "$out" | sed -n 's/.*"server_cpu_pct":\([0-9.]*\).*/\1/p')
          cpct=$(echo "$out" | sed -n 's/.*"client_cpu_pct":\([0-9.]*\).*/\1/p')
          steal=$(echo "$out" | sed -n 's/.*"steal_pct":\([0-9.]*\).*/\1/p')
          echo "$side $be c$n ${sz}B ${rps:-0} ${cpu:-0} ${cs:-NA} ${sc:-NA} ${spct:-NA} ${cpct:-NA} ${steal:-NA}" | tee -a "$work/runs"
        done
      done
    done
  done
done
echo "# median (min-max) of $reps runs"
for ((s = 0; s < nsides; s++)); do echo "# ${names[$s]} = ${desc[s]}"; done
# One line per side and row, in the order the runs came: the median server
# CPU per request with its range, mean requests/s and context switches.
awk '
  NF >= 8 { key = $2 " " $3 " " $4 " " $1
    if (!(key in n)) order[++rows] = key
    n[key]++; cpu[key, n[key]] = $6; rps[key] += $5; cs[key] += $7 }
  END {
    for (r = 1; r <= rows; r++) {
      k = order[r]; m = n[k]
      for (i = 1; i <= m; i++) v[i] = cpu[k, i]
      for (i = 2; i <= m; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t }
      med = (m % 2) ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
      split(k, f, " ")
      printf "%s %s %s %s: %.2f us/req (%.2f-%.2f), %.0f req/s mean, %.3f ctxsw/req\n", f[4], f[1], f[2], f[3], med, v[1], v[m], rps[k] / m, cs[k] / m
    }
  }' "$work/runs" | sort -s -k2,4
