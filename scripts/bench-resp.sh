#!/usr/bin/env bash
# bench-resp.sh: examples/kv against redis-server, judged by redis-benchmark
# (BENCH=resp make bench, or scripts/bench.sh with BENCH=resp). Each server
# (resp on io_uring, resp on epoll, redis-server) runs pinned to SERVER_CPUS
# with one loop (one thread), and redis-benchmark, pinned to CLIENT_CPUS, runs
#   redis-benchmark -q -t set,get -c CLIENTS -n REQUESTS -P P --csv
# against it for each P in PIPELINES. Servers and pipelines run interleaved,
# REPEATS times. For each run it records each test's requests/s and the
# server's CPU per request: the server process's utime+stime from
# /proc/PID/stat over the run, divided by the run's requests (SET and GET).
# The table gives medians, and each row's ratio to redis-server.
#
# What it changes: it builds examples/kv into a temporary directory (removed
# on exit, with redis-server's working directory), listens on 127.0.0.1 ports
# from BASE_PORT up (redis-server with --save '' --appendonly no: no files),
# and writes OUT/resp-runs.tsv and OUT/resp-summary.md. Undo: delete OUT. It
# changes no system setting.
#
# Bounded in time: each redis-benchmark run is killed after RUN_TIMEOUT
# seconds (a run killed is recorded without requests), and a server that does
# not listen within 10 seconds fails the script. With the defaults (3 repeats,
# 3 servers, 2 pipelines, 200,000 requests of each test) it takes 2 to 5
# minutes on 2 CPUs.
#
# Usage: scripts/bench-resp.sh [--dry-run]
#   --dry-run  print what it would run, and run nothing
# Environment (defaults in parentheses):
#   REPEATS (3)  SERVER_CPUS (0)  CLIENT_CPUS (1)  REQUESTS (200000)
#   CLIENTS (50)  PIPELINES ("1 16")  RUN_TIMEOUT (120)  BASE_PORT (27300)
#   SERVERS ("resp-uring resp-epoll handkept redis")  OUT (docs/results/HOST-DATE-resp)
#   (handkept is the same server written the old way, before issue 14's API:
#   examples/kv/testdata/handkept, one loop, io_uring where it can run)
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
    *)
      echo "bench-resp.sh: unknown argument $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

REPEATS=${REPEATS:-3}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
REQUESTS=${REQUESTS:-200000}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-1 16}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
BASE_PORT=${BASE_PORT:-27300}
SERVERS=${SERVERS:-resp-uring resp-epoll handkept redis}
OUT=${OUT:-docs/results/$(hostname)-$(date +%Y%m%d)-resp}

run() {
  if [ "$DRY_RUN" = 1 ]; then
    printf '+ %s\n' "$*"
  else
    "$@"
  fi
}

if [ "$DRY_RUN" = 0 ]; then
  for tool in taskset redis-server redis-benchmark go; do
    if ! command -v "$tool" >/dev/null; then
      echo "bench-resp.sh: needs $tool (Debian: apt-get install -y util-linux redis-server redis-tools; scripts/ensure-tools.sh installs them)" >&2
      exit 1
    fi
  done
fi

tmp=$(mktemp -d)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

run go build -o "$tmp/resp" ./examples/kv
run go build -o "$tmp/handkept" ./examples/kv/testdata/handkept
if [ "$DRY_RUN" = 0 ]; then
  mkdir -p "$OUT"
  printf 'server\tpipeline\trepeat\ttest\trps\trequests\tcpu_ns_per_req\n' >"$OUT/resp-runs.tsv"
fi
hz=$(getconf CLK_TCK)

# cpu_ticks PID prints the process's utime+stime in clock ticks.
cpu_ticks() {
  # The command name (field 2) may hold spaces: count from after its ')'.
  awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# wait_listen PORT waits up to 10 s for a listener on 127.0.0.1:PORT.
wait_listen() {
  local _
  for _ in $(seq 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "bench-resp.sh: nothing listens on 127.0.0.1:$1 after 10s" >&2
  return 1
}

# start_server NAME PORT starts a server pinned to SERVER_CPUS; it sets SERVER_PID.
start_server() {
  local name=$1 port=$2 cmd
  case "$name" in
    resp-uring | resp-epoll)
      cmd=(env GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$tmp/resp" -addr "127.0.0.1:$port"
        -backend "${name#resp-}" -cores "${SERVER_CPUS%%[,-]*}")
      ;;
    handkept)
      cmd=(env GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$tmp/handkept" -addr "127.0.0.1:$port")
      ;;
    redis)
      cmd=(taskset -c "$SERVER_CPUS" redis-server --port "$port" --bind 127.0.0.1 --save ''
        --appendonly no --dir "$tmp" --daemonize no)
      ;;
    *)
      echo "bench-resp.sh: unknown server $name" >&2
      exit 2
      ;;
  esac
  if [ "$DRY_RUN" = 1 ]; then
    printf '+ %s &\n' "${cmd[*]}"
    return 0
  fi
  "${cmd[@]}" >"$tmp/$name.log" 2>&1 &
  SERVER_PID=$!
  pids+=("$SERVER_PID")
  wait_listen "$port"
}

port=$BASE_PORT
for repeat in $(seq "$REPEATS"); do
  for name in $SERVERS; do
    port=$((port + 1))
    start_server "$name" "$port"
    for p in $PIPELINES; do
      if [ "$DRY_RUN" = 1 ]; then
        run timeout -k 5 "$RUN_TIMEOUT" taskset -c "$CLIENT_CPUS" redis-benchmark -h 127.0.0.1 -p "$port" \
          -q -t set,get -c "$CLIENTS" -n "$REQUESTS" -P "$p" --csv
        continue
      fi
      before=$(cpu_ticks "$SERVER_PID")
      csv=$(timeout -k 5 "$RUN_TIMEOUT" taskset -c "$CLIENT_CPUS" redis-benchmark -h 127.0.0.1 -p "$port" \
        -q -t set,get -c "$CLIENTS" -n "$REQUESTS" -P "$p" --csv 2>/dev/null) || csv=""
      after=$(cpu_ticks "$SERVER_PID")
      # Both tests ran when the CSV has their rows; the CPU covers both.
      tests=$(printf '%s\n' "$csv" | grep -c '^"\(SET\|GET\)"' || true)
      total=$((REQUESTS * tests))
      cpu="NA"
      if [ "$total" -gt 0 ]; then
        cpu=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$total" 'BEGIN { printf "%.0f", t * 1e9 / hz / n }')
      fi
      printf '%s\n' "$csv" | awk -F'","' -v s="$name" -v p="$p" -v r="$repeat" -v n="$REQUESTS" -v c="$cpu" \
        '/^"(SET|GET)"/ { gsub(/"/, "", $1); printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s, p, r, $1, $2, n, c }' \
        >>"$OUT/resp-runs.tsv"
      echo "bench-resp.sh: $name -P $p repeat $repeat: ${cpu} ns of server CPU per request" >&2
    done
    if [ "$DRY_RUN" = 0 ]; then
      kill "$SERVER_PID"
      wait "$SERVER_PID" 2>/dev/null || true
    fi
  done
done

if [ "$DRY_RUN" = 1 ]; then exit 0; fi

# The summary: medians per server, pipeline and test, and ratios to redis.
awk -F'\t' '
  NR == 1 { next }
  { k = $1 SUBSEP $2 SUBSEP $4; rps[k] = rps[k] " " $5; cpu[k] = cpu[k] " " $7; keys[k] = 1 }
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    print "| server | -P | test | requests/s | server CPU ns/request | rps vs redis | CPU vs redis |"
    print "|---|---:|---|---:|---:|---:|---:|"
    for (k in keys) { split(k, f, SUBSEP); m[k] = median(rps[k]); c[k] = median(cpu[k]) }
    n = 0
    for (k in keys) order[++n] = k
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, f, SUBSEP); r = "redis" SUBSEP f[2] SUBSEP f[3]
      printf "| %s | %s | %s | %.0f | %.0f | %.2f | %.2f |\n", f[1], f[2], f[3], m[k], c[k],
        (r in m && m[r] > 0) ? m[k] / m[r] : 0, (r in c && c[r] > 0) ? c[k] / c[r] : 0
    }
  }' "$OUT/resp-runs.tsv" >"$OUT/resp-summary.md"
cat "$OUT/resp-summary.md"
echo "bench-resp.sh: runs in $OUT/resp-runs.tsv, summary in $OUT/resp-summary.md" >&2
