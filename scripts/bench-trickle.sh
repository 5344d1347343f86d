#!/usr/bin/env bash
# bench-trickle.sh: issue 23's trickle, side by side. One client sends one 980 KB RESP command
# (ARGS one-byte arguments: "*140000" then "$1\r\nx\r\n" 140,000 times) in SEG-byte writes
# (TCP_NODELAY, one write per segment, a segment every GAP), for each SEG in SEGS, to
# examples/kv (one loop, io_uring and epoll) and to redis-server, each pinned to SERVER_CPUS,
# the client (examples/bench/trickle) pinned to CLIENT_CPUS. Each run sends WARMUP commands first
# (unmeasured: a fresh server's first big command also grows its heap), then N measured ones,
# one after the other. Each server and segment size is run twice:
#   cpu   the trickle alone: the server's CPU time per command (the sum of its threads'
#         on-CPU time, /proc/PID/task/*/schedstat) and the wall time;
#   ping  the trickle with a second client sending a PING every PING_EVERY, open loop (each
#         PING's latency counts from when it was due): its p50, p99 and max.
# Servers run interleaved (kv-uring kv-epoll redis, kv-uring ...), REPEATS times, each run on a
# freshly started server. SERVERS may also name base-uring and base-epoll: a kv binary built
# from another commit, at KV_BASE, to compare before and after a change:
#   mkdir /tmp/base && git archive COMMIT | tar -x -C /tmp/base &&
#     go -C /tmp/base build -o /tmp/kv-base ./examples/kv
# The summary gives medians (and the range) and each row's CPU ratio to redis-server's for the
# same segment size.
#
# Why paced: written as fast as the client can (GAP=0), the segments coalesce in the server's
# socket as its wake-ups happen to fall, and the CPU the same server spends on the same command
# varied 4x between runs here (100 to 470 ms for redis-server at 7 bytes); a segment every 5 us
# is slower than either server reads one, so each reads every segment as it comes, and the runs
# repeat to a few percent.
#
# What it changes: it builds examples/kv and examples/bench/trickle into a temporary directory
# (removed on exit), listens on 127.0.0.1 ports from BASE_PORT up (redis-server with --save ''
# --appendonly no: no files), and writes OUT/trickle-runs.tsv and OUT/trickle-summary.md.
# Undo: delete OUT. It changes no system setting.
#
# Bounded in time: each trickle is killed after RUN_TIMEOUT seconds (the run is recorded as
# failed), and a server that does not listen within 10 seconds fails the script. With the
# defaults it takes 2 to 4 minutes on 2 CPUs.
#
# Usage: scripts/bench-trickle.sh [--dry-run]
#   --dry-run  print what it would run, and run nothing
# Environment (defaults in parentheses):
#   REPEATS (3)  SERVER_CPUS (0)  CLIENT_CPUS (1)  SEGS ("7 64")  ARGS (140000)  GAP (5us)
#   WARMUP (1)  N (5)
#   SERVERS ("kv-uring kv-epoll redis")  PING_EVERY (1ms)  RUN_TIMEOUT (120)  BASE_PORT (27600)
#   KV_BASE (none)  OUT (docs/results/HOST-DATE-trickle)
set -euo pipefail

# shellcheck source=scripts/lib/bench-common.sh
. "$(dirname "$0")/lib/bench-common.sh"
bench_args "$@"

REPEATS=${REPEATS:-3}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
SEGS=${SEGS:-7 64}
ARGS=${ARGS:-140000}
GAP=${GAP:-5us}
WARMUP=${WARMUP:-1}
N=${N:-5}
SERVERS=${SERVERS:-kv-uring kv-epoll redis}
PING_EVERY=${PING_EVERY:-1ms}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
BASE_PORT=${BASE_PORT:-27600}
OUT=${OUT:-docs/results/$(hostname)-$(date +%Y%m%d)-trickle}

for s in $SERVERS; do
  case "$s" in
    kv-uring | kv-epoll | redis) ;;
    base-uring | base-epoll)
      if [ -z "${KV_BASE:-}" ] || { [ "$DRY_RUN" = 0 ] && [ ! -x "$KV_BASE" ]; }; then
        echo "$BENCH_NAME: $s needs KV_BASE, the path of a kv binary" >&2
        exit 2
      fi
      ;;
    *)
      echo "$BENCH_NAME: unknown server $s (kv-uring, kv-epoll, redis, base-uring, base-epoll)" >&2
      exit 2
      ;;
  esac
done
bench_need "Debian: apt-get install -y util-linux redis-server; scripts/ensure-tools.sh installs them" \
  taskset redis-server go timeout
bench_tmp

run go build -o "$tmp/kv" ./examples/kv
run go build -C examples/bench -o "$tmp/trickle" ./trickle
if [ "$DRY_RUN" = 0 ]; then
  mkdir -p "$OUT"
  printf 'server\tseg\trepeat\tmode\tresult\n' >"$OUT/trickle-runs.tsv"
fi

# start_server NAME PORT starts a server; it sets SERVER_PID.
start_server() {
  local name=$1 port=$2 first=${SERVER_CPUS%%[,-]*}
  case "$name" in
    kv-*)
      run_bg "$name" env GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$tmp/kv" -addr "127.0.0.1:$port" \
        -backend "${name#kv-}" -cores "$first"
      ;;
    base-*)
      run_bg "$name" env GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$KV_BASE" -addr "127.0.0.1:$port" \
        -backend "${name#base-}" -cores "$first"
      ;;
    redis)
      run_bg "$name" taskset -c "$SERVER_CPUS" redis-server --port "$port" --bind 127.0.0.1 --save '' \
        --appendonly no --dir "$tmp" --daemonize no
      ;;
  esac
  SERVER_PID=$BG
  [ "$DRY_RUN" = 1 ] || wait_listen "$port"
}

# run_bg NAME CMD... starts CMD in the background (logging to tmp/NAME.log); it sets BG.
run_bg() {
  local name=$1
  shift
  if [ "$DRY_RUN" = 1 ]; then
    printf '+ %s &\n' "$*"
    BG=0
    return 0
  fi
  "$@" >"$tmp/$name.log" 2>&1 &
  BG=$!
  pids+=("$BG")
}

port=$BASE_PORT
for rep in $(seq "$REPEATS"); do
  for seg in $SEGS; do
    for server in $SERVERS; do
      for mode in cpu ping; do
        port=$((port + 1))
        start_server "$server" "$port"
        every=0
        [ "$mode" = ping ] && every=$PING_EVERY
        cmd=(timeout -k 5 "$RUN_TIMEOUT" taskset -c "$CLIENT_CPUS" "$tmp/trickle" -addr "127.0.0.1:$port"
          -pid "$SERVER_PID" -args "$ARGS" -seg "$seg" -gap "$GAP" -warmup "$WARMUP" -n "$N" -ping-every "$every")
        if [ "$DRY_RUN" = 1 ]; then
          printf '+ %s\n' "${cmd[*]}"
        else
          result=$("${cmd[@]}" 2>&1) || result="failed: ${result//$'\n'/ }"
          printf '%s\t%s\t%s\t%s\t%s\n' "$server" "$seg" "$rep" "$mode" "$result" | tee -a "$OUT/trickle-runs.tsv"
          kill "$SERVER_PID"
          wait "$SERVER_PID" 2>/dev/null || true
        fi
      done
    done
  done
done
[ "$DRY_RUN" = 1 ] && exit 0

# The summary: medians and ranges per server and segment size, and the CPU ratio to redis.
awk -F'\t' '
  function field(s, name,   m) { if (match(s, name "=[^ ]+")) return substr(s, RSTART + length(name) + 1, RLENGTH - length(name) - 1); return "" }
  function med(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    if (n == 0) return "NA"
    lo = a[1]; hi = a[n]
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  NR > 1 {
    key = $1 SUBSEP $2
    if (!(key in seen)) { seen[key] = 1; order[++k] = key }
    if ($5 ~ /^failed/) { failed[key]++; next }
    if ($4 == "cpu") { cpu[key] = cpu[key] " " field($5, "server_cpu_ms"); wall[key] = wall[key] " " field($5, "wall_ms") }
    else { p99[key] = p99[key] " " field($5, "ping_p99_us"); p50[key] = p50[key] " " field($5, "ping_p50_us"); pmax[key] = pmax[key] " " field($5, "ping_max_us") }
  }
  END {
    print "| server | segment | server CPU ms (range) | vs redis-server | wall ms | PING p50 us | PING p99 us (range) | PING max us | failed runs |"
    print "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    for (i = 1; i <= k; i++) { split(order[i], kk, SUBSEP); c = med(cpu[order[i]]); clo = lo; chi = hi; base[kk[2]] = (kk[1] == "redis") ? c : base[kk[2]] }
    for (i = 1; i <= k; i++) {
      split(order[i], kk, SUBSEP)
      c = med(cpu[order[i]]); clo = lo; chi = hi
      w = med(wall[order[i]])
      q = med(p99[order[i]]); qlo = lo; qhi = hi
      m = med(p50[order[i]]); x = med(pmax[order[i]])
      r = (base[kk[2]] > 0) ? sprintf("%.2fx", c / base[kk[2]]) : "NA"
      printf "| %s | %s B | %.1f (%.1f-%.1f) | %s | %.0f | %s | %s (%s-%s) | %s | %d |\n", kk[1], kk[2], c, clo, chi, r, w, m, q, qlo, qhi, x, failed[order[i]] + 0
    }
  }' "$OUT/trickle-runs.tsv" | tee "$OUT/trickle-summary.md"
