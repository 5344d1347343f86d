#!/usr/bin/env bash
# bench-transports.sh: UDP and Unix-socket echo, side by side (BENCH=transports
# make bench). Every server runs with one loop (one thread) pinned to
# SERVER_CPU, the client pinned to CLIENT_CPU; servers run interleaved,
# REPEATS times, and each row is the median.
#
# UDP: percore's examples/udp_echo on io_uring and on epoll (each also with
# -gro, Config.UDPGRO: the -gro rows; percore-uring-gso and percore-epoll-gso,
# -gso, Config.UDPGSO, run only when named in UDP_SERVERS), gnet v2's UDP
# echo (examples/bench/baseline/gnet -proto udp, built with -tags=poll_opt,
# WithMulticore, WithReusePort, WithLockOSThread), std net (a net.UDPConn,
# ReadFromUDPAddrPort/WriteToUDPAddrPort) and the C recvmmsg/sendmmsg loop
# (examples/bench/baseline/udpc/udp_echo.c, the limit), each driven by
# examples/bench/baseline/udpc/udp_load.c (one thread, WINDOW datagrams in flight,
# every reply checked) at each payload of SIZES. Server CPU per packet is
# the server's utime+stime from /proc/PID/stat over the measured window,
# divided by the replies in it. The "SERVER/load" rows cross-check the C
# client: examples/bench/load's UDP mode (-addr udp://, one socket on one percore
# loop, WINDOW datagrams in flight, every reply checked, losses counted)
# against the servers of LOAD_UDP_SERVERS, the server's CPU from
# -server-pid.
# With CLIENT_GSO=1 the client sends each
# batch as one sendmsg with UDP_SEGMENT (the rows' kind is udp-gso): on
# loopback only such a sender gives UDP_GRO anything to coalesce.
#
# Unix: percore's examples/unix_echo (io_uring, epoll), gnet -proto unix, std
# net -net unix, and percore's TCP echo (examples/echo, io_uring) for the
# comparison, driven by examples/bench/load (-conns CONNS, 64 B), which reports
# the server's CPU per request itself (-server-pid).
#
# What it changes: it builds into a temporary directory (removed on exit),
# listens on 127.0.0.1 ports from BASE_PORT and Unix sockets in that
# directory, and writes OUT/transports-runs.tsv and OUT/transports-summary.md.
# Undo: delete OUT. It changes no system setting. Bounded: each client run is
# killed after RUN_TIMEOUT seconds. With the defaults it takes about 7 minutes.
#
# Usage: scripts/bench-transports.sh [--dry-run | --help]
# Environment (defaults in parentheses):
#   REPEATS (3)  SERVER_CPU (0)  CLIENT_CPU (1)  SIZES ("64 1400")  WINDOW (64)
#   CONNS (50)  WARMUP (1)  MEASURE_S (4)  RUN_TIMEOUT (30)  BASE_PORT (27400)
#   LOAD_UDP_SERVERS ("percore-uring percore-epoll c"; "" for none)
#   CLIENT_GSO (0)  UDP_SERVERS, UNIX_SERVERS (all; either may be "" to skip)
#   OUT (docs/results/HOST-DATE-transports)
set -euo pipefail

self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/.."

DRY_RUN=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$self" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *) echo "usage: $0 [--dry-run]" >&2; exit 2 ;;
  esac
done

if [ "$DRY_RUN" = 0 ]; then
  for tool in taskset gcc go; do
    if ! command -v "$tool" >/dev/null; then
      echo "bench-transports.sh: needs $tool (Debian: apt-get install -y util-linux gcc)" >&2
      exit 1
    fi
  done
fi

REPEATS=${REPEATS:-3}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
SIZES=${SIZES:-"64 1400"}
WINDOW=${WINDOW:-64}
CONNS=${CONNS:-50}
WARMUP=${WARMUP:-1}
SECONDS_=${MEASURE_S:-4}
RUN_TIMEOUT=${RUN_TIMEOUT:-30}
BASE_PORT=${BASE_PORT:-27400}
OUT=${OUT:-docs/results/$(hostname)-$(date +%Y-%m-%d)-transports}
CLIENT_GSO=${CLIENT_GSO:-0}
UDP_SERVERS=${UDP_SERVERS-"percore-uring percore-uring-gro percore-epoll percore-epoll-gro gnet stdnet c"}
UNIX_SERVERS=${UNIX_SERVERS-"percore-uring percore-epoll gnet stdnet tcp-percore-uring"}
udp_kind=udp
if [ "$CLIENT_GSO" = 1 ]; then udp_kind=udp-gso; fi
LOAD_UDP_SERVERS=${LOAD_UDP_SERVERS-"percore-uring percore-epoll c"}

run() {
  if [ "$DRY_RUN" = 1 ]; then echo "+ $*"; else "$@"; fi
}

tmp=$(mktemp -d /tmp/pcbt.XXXXXX)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

run go build -o "$tmp/udp_echo" ./examples/udp_echo
run go build -o "$tmp/unix_echo" ./examples/unix_echo
run go build -o "$tmp/echo" ./examples/echo
run go build -C examples/bench -o "$tmp/load" ./load
run go build -C examples/bench -o "$tmp/stdnet" ./baseline/stdnet
run go build -C examples/bench -tags=poll_opt -o "$tmp/gnet" ./baseline/gnet
run gcc -O2 -o "$tmp/c_udp_echo" examples/bench/baseline/udpc/udp_echo.c
run gcc -O2 -o "$tmp/udp_load" examples/bench/baseline/udpc/udp_load.c
if [ "$DRY_RUN" = 1 ]; then exit 0; fi
mkdir -p "$OUT"
runs="$OUT/transports-runs.tsv"
printf 'kind\tserver\tsize\trep\treplies_per_s\tserver_us_per_op\tmismatches\tlost\n' > "$runs"

# ticks PID: the process's utime+stime in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# start_udp SERVER PORT: starts a UDP echo server, sets server_pid.
start_udp() {
  local addr="127.0.0.1:$2"
  case "$1" in
    percore-uring) taskset -c "$SERVER_CPU" "$tmp/udp_echo" -addr "$addr" -cores "$SERVER_CPU" -backend uring > /dev/null 2>&1 & ;;
    percore-epoll) taskset -c "$SERVER_CPU" "$tmp/udp_echo" -addr "$addr" -cores "$SERVER_CPU" -backend epoll > /dev/null 2>&1 & ;;
    percore-uring-gro) taskset -c "$SERVER_CPU" "$tmp/udp_echo" -addr "$addr" -cores "$SERVER_CPU" -backend uring -gro > /dev/null 2>&1 & ;;
    percore-epoll-gro) taskset -c "$SERVER_CPU" "$tmp/udp_echo" -addr "$addr" -cores "$SERVER_CPU" -backend epoll -gro > /dev/null 2>&1 & ;;
    percore-uring-gso) taskset -c "$SERVER_CPU" "$tmp/udp_echo" -addr "$addr" -cores "$SERVER_CPU" -backend uring -gso > /dev/null 2>&1 & ;;
    percore-epoll-gso) taskset -c "$SERVER_CPU" "$tmp/udp_echo" -addr "$addr" -cores "$SERVER_CPU" -backend epoll -gso > /dev/null 2>&1 & ;;
    gnet) GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$tmp/gnet" -proto udp -addr "$addr" -loops 1 > /dev/null 2>&1 & ;;
    stdnet) GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$tmp/stdnet" -net udp -addr "$addr" -loops 1 > /dev/null 2>&1 & ;;
    c) taskset -c "$SERVER_CPU" "$tmp/c_udp_echo" 127.0.0.1 "$2" > /dev/null 2>&1 & ;;
  esac
  server_pid=$!
  for _ in $(seq 100); do
    if ss -uln | grep -q ":$2 "; then return 0; fi
    sleep 0.1
  done
  echo "bench-transports: $1 did not bind udp port $2" >&2
  exit 1
}

# start_unix SERVER PATH PORT: starts a stream echo server, sets server_pid,
# and prints the address to load.
start_unix() {
  case "$1" in
    percore-uring) taskset -c "$SERVER_CPU" "$tmp/unix_echo" -addr "$2" -cores "$SERVER_CPU" -backend uring > /dev/null 2>&1 & ;;
    percore-epoll) taskset -c "$SERVER_CPU" "$tmp/unix_echo" -addr "$2" -cores "$SERVER_CPU" -backend epoll > /dev/null 2>&1 & ;;
    gnet) GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$tmp/gnet" -proto unix -addr "$2" -loops 1 > /dev/null 2>&1 & ;;
    stdnet) GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$tmp/stdnet" -net unix -addr "$2" -loops 1 > /dev/null 2>&1 & ;;
    tcp-percore-uring) taskset -c "$SERVER_CPU" "$tmp/echo" -addr "127.0.0.1:$3" -cores "$SERVER_CPU" -backend uring > /dev/null 2>&1 & ;;
  esac
  server_pid=$!
  for _ in $(seq 100); do
    if [ "$1" = tcp-percore-uring ]; then
      if ss -tln | grep -q ":$3 "; then return 0; fi
    elif [ -S "$2" ]; then
      return 0
    fi
    sleep 0.1
  done
  echo "bench-transports: $1 did not listen" >&2
  exit 1
}

stop_server() {
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}

port=$BASE_PORT
for rep in $(seq "$REPEATS"); do
  for size in $SIZES; do
    for s in $UDP_SERVERS; do
      port=$((port + 1))
      start_udp "$s" "$port"
      taskset -c "$CLIENT_CPU" timeout "$RUN_TIMEOUT" "$tmp/udp_load" 127.0.0.1 "$port" "$size" "$WINDOW" "$WARMUP" "$SECONDS_" "$CLIENT_GSO" > "$tmp/out" &
      client=$!
      sleep "$WARMUP"
      t0=$(ticks "$server_pid")
      wait "$client" || true
      t1=$(ticks "$server_pid")
      stop_server
      line=$(cat "$tmp/out")
      rps=$(echo "$line" | sed -n 's/.*"replies_per_s": \([0-9]*\).*/\1/p')
      n=$(echo "$line" | sed -n 's/.*"replies": \([0-9]*\).*/\1/p')
      mm=$(echo "$line" | sed -n 's/.*"mismatches": \([0-9]*\).*/\1/p')
      lost=$(echo "$line" | sed -n 's/.*"lost": \([0-9]*\).*/\1/p')
      us=$(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="${n:-0}" 'BEGIN { if (n > 0) printf "%.3f", t / hz * 1e6 / n; else print "nan" }')
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$udp_kind" "$s" "$size" "$rep" "${rps:-0}" "$us" "${mm:-}" "${lost:-}" | tee -a "$runs"
    done
    for s in $LOAD_UDP_SERVERS; do
      port=$((port + 1))
      start_udp "$s" "$port"
      taskset -c "$CLIENT_CPU" timeout "$RUN_TIMEOUT" "$tmp/load" -addr "udp://127.0.0.1:$port" -conns 1 -pipeline "$WINDOW" \
        -bytes "$size" -warmup "$WARMUP" -seconds "$SECONDS_" -cores "$CLIENT_CPU" -server-pid "$server_pid" -json > "$tmp/out" 2> /dev/null || true
      stop_server
      rps=$(sed -n 's/.*"rps": *\([0-9.]*\).*/\1/p' "$tmp/out" | head -1)
      us=$(sed -n 's/.*"server_cpu_us_per_req": *\([0-9.]*\).*/\1/p' "$tmp/out" | head -1)
      mm=$(sed -n 's/.*"mismatches": *\([0-9]*\).*/\1/p' "$tmp/out" | head -1)
      lost=$(sed -n 's/.*"lost": *\([0-9]*\).*/\1/p' "$tmp/out" | head -1)
      printf 'udp\t%s/load\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$size" "$rep" "${rps:-0}" "${us:-nan}" "${mm:-}" "${lost:-}" | tee -a "$runs"
    done
  done
  for s in $UNIX_SERVERS; do
    port=$((port + 1))
    path="$tmp/echo-$port.sock"
    start_unix "$s" "$path" "$port"
    addr="unix://$path"
    if [ "$s" = tcp-percore-uring ]; then addr="127.0.0.1:$port"; fi
    taskset -c "$CLIENT_CPU" timeout "$RUN_TIMEOUT" "$tmp/load" -addr "$addr" -conns "$CONNS" -bytes 64 \
      -warmup "$WARMUP" -seconds "$SECONDS_" -cores "$CLIENT_CPU" -server-pid "$server_pid" -json > "$tmp/out" 2> /dev/null || true
    stop_server
    rps=$(sed -n 's/.*"rps": *\([0-9.]*\).*/\1/p' "$tmp/out" | head -1)
    us=$(sed -n 's/.*"server_cpu_us_per_req": *\([0-9.]*\).*/\1/p' "$tmp/out" | head -1)
    mm=$(sed -n 's/.*"mismatches": *\([0-9]*\).*/\1/p' "$tmp/out" | head -1)
    printf 'unix\t%s\t64\t%s\t%s\t%s\t%s\t\n' "$s" "$rep" "${rps:-0}" "${us:-nan}" "${mm:-}" | tee -a "$runs"
  done
done

# The medians.
{
  echo "| kind | server | size | replies/s (median) | server CPU us/op (median) | runs |"
  echo "|---|---|---|---|---|---|"
  awk -F'\t' 'NR > 1 { k = $1 "\t" $2 "\t" $3; r[k] = r[k] " " $5; u[k] = u[k] " " $6; n[k]++; if (!(k in o)) { o[k] = ++c; keys[c] = k } }
    function med(s,   a, m, i, j, t) { m = split(s, a, " "); for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }; return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
    END { for (i = 1; i <= c; i++) { k = keys[i]; split(k, f, "\t"); printf "| %s | %s | %s | %.0f | %.2f | %d |\n", f[1], f[2], f[3], med(r[k]), med(u[k]), n[k] } }' "$runs"
} > "$OUT/transports-summary.md"
cat "$OUT/transports-summary.md"
