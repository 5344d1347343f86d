#!/usr/bin/env bash
# scale.sh: percore's behaviour with thousands of connections, the figures
# of docs/performance.md's "At scale" section. It changes nothing on the
# host: it builds examples/echo, examples/lines and examples/bench/scale into a
# temporary directory, runs them on loopback and prints one line per run.
#
#   scripts/scale.sh                 # both scenarios, both backends
#   CONNS=5000 scripts/scale.sh      # fewer connections
#   SCENARIOS=burst scripts/scale.sh # one scenario (shutdown, burst, expiry)
#   TREE=/path/to/checkout scripts/scale.sh   # measure another checkout
#   scripts/scale.sh --dry-run       # print what it would run
#
# Scenarios (server on cpu0, client on cpu1):
#   shutdown  examples/echo with CONNS silent connections (default 18000)
#             gets SIGTERM; the time until it exits.
#   burst     examples/echo with SLOW slow consumers (default 100), each
#             sending until its 4 MiB outbound queue is full, which then
#             disconnect together: the server's RSS idle, full, and each
#             second for 10 s after the close.
#   churn     examples/lines with 0, then CONNS silent connections open: the
#             mean time of one server-side close (CHURN of them, default
#             2000), and the ratio of the two.
#   expiry    examples/lines -idle-timeout 3s with EXPIRE silent
#             connections (default 15000) opened together: how late after
#             its timeout each is closed, and the round trips of a live
#             connection that pings every millisecond meanwhile.
#
# Needs a descriptor limit of CONNS + a few (the hard limit here is 20000).
set -euo pipefail

dry=0
if [ "${1:-}" = "--dry-run" ]; then dry=1; fi
here=$(cd "$(dirname "$0")/.." && pwd)
tree=${TREE:-$here}
conns=${CONNS:-18000}
expire=${EXPIRE:-15000}
slow=${SLOW:-100}
scenarios=${SCENARIOS:-shutdown burst churn expiry}
churns=${CHURN:-2000}
backends=${BACKENDS:-uring epoll}
reps=${REPS:-1}
ulimit -n "$(( (conns > expire ? conns : expire) + 200 ))"

run() {
  if [ "$dry" = 1 ]; then echo "+ $*"; else "$@"; fi
}

work=$(mktemp -d)
cleanup() {
  if [ -n "${srv:-}" ]; then kill "$srv" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# The servers come from the tree measured, the client from this one.
export GOFLAGS="${GOFLAGS:--ldflags=-checklinkname=0}"
run sh -c "cd '$tree' && go build -o '$work/echo' ./examples/echo && go build -o '$work/lines' ./examples/lines"
run sh -c "cd '$here' && go build -C examples/bench -o '$work/scale' ./scale"
[ "$dry" = 1 ] && exit 0

# wait_file FILE SECONDS: wait until FILE exists.
wait_file() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    [ -s "$1" ] && return 0
    sleep 0.1
  done
  echo "scale.sh: $1 did not appear within $2 s" >&2
  return 1
}

# rss PID: the process's resident set, in KiB.
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

port=17400

# serve PROG BACKEND [ARGS...]: start examples/PROG on the next port, on
# cpu0, as $srv; stop_server ends it.
serve() {
  local prog=$1 be=$2
  shift 2
  port=$((port + 1))
  taskset -c 0 "$work/$prog" -addr "127.0.0.1:$port" -cores 0 -backend "$be" "$@" >/dev/null 2>"$work/$prog.log" &
  srv=$!
  sleep 0.5
}

stop_server() {
  kill -TERM "$srv"
  wait "$srv" || true
  srv=
}

# shutdown B: CONNS silent connections, then SIGTERM; the time to exit.
shutdown_run() {
  rm -f "$work/ready"
  serve echo "$1"
  taskset -c 1 "$work/scale" -addr "127.0.0.1:$port" -conns "$conns" -wait 30s -ready "$work/ready" >"$work/client.json" &
  local cli=$! t0 t1
  wait_file "$work/ready" 120
  t0=$(date +%s%N)
  kill -TERM "$srv"
  wait "$srv" || true
  t1=$(date +%s%N)
  srv=
  wait "$cli" || true
  echo "shutdown backend=$1 conns=$(cat "$work/ready") exit_ms=$(((t1 - t0) / 1000000)) client=$(cat "$work/client.json")"
}

# burst B: SLOW slow consumers that disconnect together; the server's RSS.
burst_run() {
  rm -f "$work/ready"
  serve echo "$1"
  local idle full after="" cli s
  idle=$(rss "$srv")
  taskset -c 1 "$work/scale" -addr "127.0.0.1:$port" -conns "$slow" -slow -wait 60s -ready "$work/ready" >/dev/null &
  cli=$!
  wait_file "$work/ready" 120
  full=$(rss "$srv")
  rm -f "$work/ready"
  wait "$cli" || true
  for s in 1 2 3 4 5 6 7 8 9 10; do
    sleep 1
    after="$after $s:$(rss "$srv")"
  done
  stop_server
  echo "burst backend=$1 consumers=$slow rss_kib idle=$idle full=$full after_close_s:kib=${after# }"
}

# churn B: one server-side close, with none and with CONNS silent connections open.
churn_run() {
  local n out alone=""
  for n in 0 "$conns"; do
    serve lines "$1" -idle-timeout 0
    out=$(taskset -c 1 "$work/scale" -addr "127.0.0.1:$port" -conns "$n" -proto lines -churn "$churns" -wait 60s) || true
    stop_server
    local us
    us=$(echo "$out" | sed -n 's/.*"ChurnUsPerClose":\([0-9.]*\).*/\1/p')
    echo "churn backend=$1 open=$n us_per_close=${us:-failed}"
    if [ "$n" = 0 ]; then alone=$us; elif [ -n "$alone" ] && [ -n "$us" ]; then
      echo "churn backend=$1 ratio_${n}_vs_0=$(awk -v a="$us" -v b="$alone" 'BEGIN {printf "%.2f", a / b}')"
    fi
  done
}

# expiry B: EXPIRE silent connections reach a 3 s idle timeout together.
expiry_run() {
  serve lines "$1" -idle-timeout 3s
  local out
  out=$(taskset -c 1 "$work/scale" -addr "127.0.0.1:$port" -conns "$expire" -proto lines -idle-timeout 3s -wait 60s) || true
  stop_server
  echo "expiry backend=$1 conns=$expire $out"
}

for ((rep = 1; rep <= reps; rep++)); do
  for b in $backends; do
    for sc in $scenarios; do
      "${sc}_run" "$b"
    done
  done
done
