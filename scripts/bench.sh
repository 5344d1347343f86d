#!/usr/bin/env bash
# bench.sh: the side-by-side benchmark (`make bench`). For each echo server it
# starts the server pinned to SERVER_CPUS (GOMAXPROCS = their count), waits
# until it listens, runs examples/bench/load pinned to CLIENT_CPUS, and records
# requests/s, latency, the server's CPU, context switches and system calls per
# request, its peak memory, and which side was saturated. Servers run
# interleaved (A B C A B C), REPEATS times; the table gives medians with the
# range of the repeats and each row's ratio to netpoll (gopool on).
#
# What it changes: it builds into a temporary directory (removed on exit),
# listens on 127.0.0.1 ports from BASE_PORT up, and writes
# docs/results/HOST-DATE/{runs,results,summary,chart}-MODE.* (smoke mode
# writes to a temporary directory unless OUT is set). Undo: delete that
# folder. It changes no system setting; it raises its own soft fd limit to
# the hard one for the idle scenario.
#
# Usage: scripts/bench.sh [--dry-run]
#   BENCH=quick   50 and 1000 connections, 64 B (the default; ~5 minutes on 2 CPUs)
#   BENCH=full    quick + 512 B and 16 KiB, pipelining 16, churn, 10,000 idle connections
#   BENCH=smoke   a few seconds, percore-uring, stdnet and netpoll, 50 connections;
#                 fails when any run had errors, mismatches or no requests
#   BENCH=NAME    any other name runs scripts/bench-NAME.sh (see its --help), and
#                 nothing below applies: resp (examples/kv against redis-server,
#                 examples/redis_proxy against twemproxy, with redis-benchmark),
#                 ws (issue 27's WebSocket gateways: examples/ws_gateway against
#                 nbio, gws and gorilla peers, driven by examples/bench/wsload), ...
# Environment (defaults in parentheses):
#   REPEATS (2; smoke 1)  SERVER_CPUS (0)  CLIENT_CPUS (1)  WARMUP (1)  WINDOW (5)
#   SERVERS (all: a space-separated subset of the names below)
#   PERF (auto: syscalls per request from a separate run under perf stat when
#        linux-perf works; 0 to skip)  PERF_WINDOW (2)
#   LOAD_ENGINE (percore)  BASE_PORT (27100)  OUT (docs/results/HOST-DATE)
#   QUIET_WAIT (30; smoke 0): before each run, wait up to this many seconds
#        for the machine to be idle (under 10% busy), as other work skews results;
#        a run disturbed anyway is flagged N and left out of the medians
#   SCRAPE (0): 1 starts the percore servers with -metrics on the next port and
#        fetches /metrics once a second (curl, pinned to CLIENT_CPUS) while load
#        runs, to measure what being scraped costs; the other servers run as
#        usual. Results go to OUT (default docs/results/HOST-DATE-scrape)
#
# A server is a line in SPECS: name|source folder|build tags|min repeats|args,
# where args may use {ADDR}, {LOOPS} (the number of server CPUs) and {CPUS}
# (the SERVER_CPUS list). A server that does not start listening within 10s
# is recorded as a run without requests, so that the report fails it.
set -euo pipefail

cd "$(dirname "$0")/.."

DRY_RUN=0
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "bench.sh: unknown argument $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

# A scenario with a script of its own (scripts/bench-NAME.sh: resp, ...) runs there.
case "${BENCH:-}" in
  quick | full | smoke | "") ;;
  *) if [ -x "scripts/bench-$BENCH.sh" ]; then exec "scripts/bench-$BENCH.sh" "$@"; fi ;;
esac

if [ "$DRY_RUN" = 0 ] && ! command -v taskset >/dev/null; then
  echo "bench.sh: needs taskset to pin the servers and the load generator (Debian: apt-get install -y util-linux)" >&2
  exit 2
fi

SPECS=(
  "percore-uring|examples/echo||0|-addr {ADDR} -backend uring -cores {CPUS}"
  "percore-epoll|examples/echo||0|-addr {ADDR} -backend epoll -cores {CPUS}"
  "netpoll|examples/bench/baseline/netpoll||0|-addr {ADDR} -loops {LOOPS}"
  "netpoll-nogopool|examples/bench/baseline/netpoll||0|-addr {ADDR} -loops {LOOPS} -nogopool"
  "stdnet|examples/bench/baseline/stdnet||0|-addr {ADDR} -loops {LOOPS}"
  "gnet|examples/bench/baseline/gnet|poll_opt|5|-addr {ADDR} -loops {LOOPS}"
)
BASELINE=netpoll

BENCH=${BENCH:-quick}
SERVERS_ASKED=${SERVERS:-}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
LOAD_ENGINE=${LOAD_ENGINE:-percore}
BASE_PORT=${BASE_PORT:-27100}
PERF=${PERF:-auto}
PERF_WINDOW=${PERF_WINDOW:-2}
SCRAPE=${SCRAPE:-0}

case "$BENCH" in
  smoke)
    REPEATS=${REPEATS:-1}
    WARMUP=${WARMUP:-0.5}
    WINDOW=${WINDOW:-1.5}
    PERF=0
    QUIET_WAIT=${QUIET_WAIT:-0}
    SERVERS=${SERVERS:-percore-uring stdnet netpoll}
    SCENARIOS=("smoke-c50-64B|-conns 50 -bytes 64")
    ;;
  quick | full)
    REPEATS=${REPEATS:-2}
    WARMUP=${WARMUP:-1}
    WINDOW=${WINDOW:-5}
    SCENARIOS=(
      "c50-64B|-conns 50 -bytes 64"
      "c1000-64B|-conns 1000 -bytes 64"
    )
    if [ "$BENCH" = full ]; then
      SCENARIOS+=(
        "c50-512B|-conns 50 -bytes 512"
        "c50-16KiB|-conns 50 -bytes 16384"
        "c50-64B-p16|-conns 50 -bytes 64 -pipeline 16"
        "churn-c50|-conns 50 -bytes 64 -reconnect"
        "idle10k-c50|-conns 50 -bytes 64 -idle 10000"
      )
    fi
    ;;
  *)
    echo "bench.sh: BENCH must be quick, full or smoke, not '$BENCH'" >&2
    exit 2
    ;;
esac
SERVERS=${SERVERS:-}
QUIET_WAIT=${QUIET_WAIT:-30}

# cpu_count LIST prints how many CPUs a list like 0-3,6 names.
cpu_count() {
  local n=0 part lo hi
  local IFS=,
  for part in $1; do
    lo=${part%-*}
    hi=${part#*-}
    n=$((n + hi - lo + 1))
  done
  echo "$n"
}
SERVER_NCPU=$(cpu_count "$SERVER_CPUS")
CLIENT_NCPU=$(cpu_count "$CLIENT_CPUS")

# Pick the servers: in SPECS order, filtered by SERVERS.
selected=()
for spec in "${SPECS[@]}"; do
  IFS='|' read -r name _ _ _ _ <<<"$spec"
  if [ -n "$SERVERS" ] && [[ " $SERVERS " != *" $name "* ]]; then
    continue
  fi
  selected+=("$spec")
done
if [ ${#selected[@]} -eq 0 ]; then
  echo "bench.sh: no server to run (SERVERS='$SERVERS')" >&2
  exit 2
fi

if [ "$PERF" = auto ]; then
  if command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter -- true >/dev/null 2>&1; then
    PERF=1
  else
    echo "bench.sh: note: perf stat with raw_syscalls is not available (apt-get install linux-perf): syscalls/req is n/a" >&2
    PERF=0
  fi
fi

HOST=$(hostname)
DATE=$(date +%F)
if [ -z "${OUT:-}" ] && [ "$BENCH" != smoke ]; then
  OUT=docs/results/$HOST-$DATE
  if [ "$SCRAPE" = 1 ]; then OUT+=-scrape; fi
fi
if [ "$SCRAPE" = 1 ] && [ "$DRY_RUN" = 0 ] && ! command -v curl >/dev/null; then
  echo "bench.sh: SCRAPE=1 needs curl (Debian: apt-get install -y curl)" >&2
  exit 2
fi

# repeats_of MIN prints how many repeats a server gets.
repeats_of() {
  if [ "$1" -gt "$REPEATS" ] && [ "$BENCH" != smoke ]; then echo "$1"; else echo "$REPEATS"; fi
}

max_rounds=0
nruns=0
for spec in "${selected[@]}"; do
  IFS='|' read -r _ _ _ minrep _ <<<"$spec"
  r=$(repeats_of "$minrep")
  nruns=$((nruns + r * ${#SCENARIOS[@]}))
  if [ "$r" -gt "$max_rounds" ]; then max_rounds=$r; fi
done
nperf=0
if [ "$PERF" = 1 ]; then nperf=$((${#selected[@]} * ${#SCENARIOS[@]})); fi
estimate=$(awk -v n="$nruns" -v w="$WARMUP" -v s="$WINDOW" -v p="$nperf" -v pw="$PERF_WINDOW" \
  'BEGIN { printf "%d", n * (w + s + 1.2) + p * (1 + pw + 1.2) }')

echo "bench.sh: BENCH=$BENCH, servers on cpus $SERVER_CPUS, load ($LOAD_ENGINE engine) on cpus $CLIENT_CPUS"
echo "bench.sh: servers: $(for s in "${selected[@]}"; do printf '%s ' "${s%%|*}"; done)"
echo "bench.sh: scenarios: $(for s in "${SCENARIOS[@]}"; do printf '%s ' "${s%%|*}"; done)"
if [ "$SCRAPE" = 1 ]; then
  echo "bench.sh: SCRAPE=1: the percore servers serve -metrics, fetched every second during each run"
fi
echo "bench.sh: $nruns runs of ${WARMUP}s + ${WINDOW}s, $nperf perf runs: about ${estimate}s; results in ${OUT:-a temporary directory}"
if [ "$DRY_RUN" = 1 ]; then
  exit 0
fi

# --- from here on it runs things ---

TMP=$(mktemp -d "${TMPDIR:-/tmp}/percore-bench.XXXXXX")
SERVER_PID=""
SCRAPER_PID=""
cleanup() {
  if [ -n "$SCRAPER_PID" ]; then
    kill "$SCRAPER_PID" 2>/dev/null || true
    wait "$SCRAPER_PID" 2>/dev/null || true
  fi
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "${OUT:-}" ]; then
  OUT=$TMP/results
fi
mkdir -p "$TMP/bin" "$TMP/logs"
# The raw runs collect in TMP and go to OUT only when every run is done: a
# run that stops early (an error, ^C) leaves OUT's earlier results intact.
RAW=$TMP/runs-$BENCH.jsonl
: >"$RAW"

ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# No GOFLAGS: percore and the baselines link with a plain go build (decision 0014).
echo "bench.sh: building"
# The peers and the load generator are in the benchmark module (its own
# go.mod, examples/bench: decision 0037), built there.
go build -C examples/bench -o "$TMP/bin/load" ./load
go build -o "$TMP/bin/benchreport" ./scripts/benchreport
declare -A built=()
for spec in "${selected[@]}"; do
  IFS='|' read -r _ dir tags _ _ <<<"$spec"
  key="$dir|$tags"
  if [ -n "${built[$key]:-}" ]; then continue; fi
  bin="$TMP/bin/$(echo "$dir-$tags" | tr '/|' '__')"
  case "$dir" in
    examples/bench/*) go build -C examples/bench -tags="$tags" -o "$bin" "./${dir#examples/bench/}" ;;
    *) go build -tags="$tags" -o "$bin" "./$dir" ;;
  esac
  built[$key]=$bin
done

# io_uring can be refused here: seccomp (Docker's default profile),
# kernel.io_uring_disabled, a kernel too old for the loops' flags. Then
# percore-uring cannot run, and percore-epoll stands in for it, unless
# PERCORE_REQUIRE_URING is set (a benchmark host that should have it).
# echo -probe exits 3 for exactly that; any other failure is an error.
uring_spec=""
for spec in "${selected[@]}"; do
  if [ "${spec%%|*}" = percore-uring ]; then uring_spec=$spec; fi
done
probe_status=0
if [ -n "$uring_spec" ]; then
  why=$(taskset -c "$SERVER_CPUS" "${built[examples/echo|]}" -probe -backend uring -cores "$SERVER_CPUS" 2>&1) || probe_status=$?
fi
if [ "$probe_status" != 0 ] && [ "$probe_status" != 3 ]; then
  echo "bench.sh: the percore echo server cannot start on cpus $SERVER_CPUS:" >&2
  echo "$why" >&2
  exit 2
fi
if [ "$probe_status" = 3 ]; then
  echo "bench.sh: io_uring cannot run here: $why" >&2
  if [ -n "${PERCORE_REQUIRE_URING:-}" ]; then
    echo "bench.sh: PERCORE_REQUIRE_URING is set: stopping" >&2
    exit 2
  fi
  kept=()
  for spec in "${selected[@]}"; do
    case "${spec%%|*}" in
      percore-uring) ;;
      *) kept+=("$spec") ;;
    esac
  done
  if [[ " $(for s in "${kept[@]}"; do printf '%s ' "${s%%|*}"; done)" != *" percore-epoll "* ]]; then
    for spec in "${SPECS[@]}"; do
      if [ "${spec%%|*}" = percore-epoll ]; then kept=("$spec" "${kept[@]}"); fi
    done
  fi
  selected=("${kept[@]}")
  echo "bench.sh: left out percore-uring; servers now: $(for s in "${selected[@]}"; do printf '%s ' "${s%%|*}"; done)" >&2
fi

# wait_listening PID LOG: until the server prints "listening on", at most 10s.
wait_listening() {
  local pid=$1 log=$2 i
  for ((i = 0; i < 200; i++)); do
    if grep -q "listening on" "$log" 2>/dev/null; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then return 1; fi
    sleep 0.05
  done
  return 1
}

# stop_server PID: SIGINT, then SIGKILL after 10s; sets STOP_STATUS to the
# server's exit status (it must run in this shell, the server's parent).
STOP_STATUS=0
stop_server() {
  local pid=$1 i
  STOP_STATUS=0
  kill -INT "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "bench.sh: server $pid ignored SIGINT for 10s: killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || STOP_STATUS=$?
}

# machine_busy prints the share of all CPUs, in percent, that was busy over
# the next half second (from /proc/stat).
machine_busy() {
  local a b
  a=$(head -n 1 /proc/stat)
  sleep 0.5
  b=$(head -n 1 /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN {
    n = split(a, x); split(b, y); total = 0
    for (i = 2; i <= 9 && i <= n; i++) total += y[i] - x[i]
    idle = (y[5] - x[5]) + (y[6] - x[6])
    printf "%d", (total > 0 ? 100 * (total - idle) / total : 0)
  }'
}

# wait_quiet: until the machine is under 10% busy, at most QUIET_WAIT seconds.
wait_quiet() {
  local deadline busy said=0
  deadline=$(($(date +%s) + QUIET_WAIT))
  while [ "$QUIET_WAIT" -gt 0 ]; do
    busy=$(machine_busy)
    if [ "$busy" -lt 10 ]; then return 0; fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "bench.sh: the machine is still ${busy}% busy after ${QUIET_WAIT}s: running anyway" >&2
      return 0
    fi
    if [ "$said" = 0 ]; then
      echo "bench.sh: waiting for the machine to be quiet (${busy}% busy)" >&2
      said=1
    fi
    sleep 0.5
  done
}

# scrape ADDR: fetch http://ADDR/metrics once a second until killed, from
# the client's CPUs, as a Prometheus server would.
scrape() {
  while :; do
    taskset -c "$CLIENT_CPUS" curl -fsS -o /dev/null --max-time 1 "http://$1/metrics" || true
    sleep 1
  done
}

port=$BASE_PORT
# run_one KIND SPEC SCENARIO REPEAT: one server start, one load run, one line in RAW.
run_one() {
  local kind=$1 spec=$2 scenario=$3 repeat=$4
  local name dir tags args sname loadargs addr bin log json=''
  IFS='|' read -r name dir tags _ args <<<"$spec"
  IFS='|' read -r sname loadargs <<<"$scenario"
  port=$((port + 1))
  addr=127.0.0.1:$port
  args=${args//\{ADDR\}/$addr}
  args=${args//\{LOOPS\}/$SERVER_NCPU}
  args=${args//\{CPUS\}/$SERVER_CPUS}
  local scrape_addr=''
  if [ "$SCRAPE" = 1 ] && [ "$dir" = examples/echo ]; then
    port=$((port + 1))
    scrape_addr=127.0.0.1:$port
    args+=" -metrics $scrape_addr"
  fi
  bin=${built[$dir|$tags]}
  log=$TMP/logs/$name-$sname-$kind-$repeat

  local window=$WINDOW extra=()
  if [ "$kind" = perf ]; then
    window=$PERF_WINDOW
    extra=(-perf)
  fi
  wait_quiet
  # shellcheck disable=SC2086 # args and loadargs are word lists
  GOMAXPROCS=$SERVER_NCPU taskset -c "$SERVER_CPUS" "$bin" $args >"$log.server" 2>&1 &
  SERVER_PID=$!
  local listening=1 limit
  if wait_listening "$SERVER_PID" "$log.server"; then
    if [ -n "$scrape_addr" ]; then
      scrape "$scrape_addr" &
      SCRAPER_PID=$!
    fi
    limit=$(awk -v w="$WARMUP" -v s="$window" 'BEGIN { printf "%d", w + s + 60 }')
    # shellcheck disable=SC2086
    json=$(GOMAXPROCS=$CLIENT_NCPU timeout -k 5 "$limit" taskset -c "$CLIENT_CPUS" \
      "$TMP/bin/load" -engine "$LOAD_ENGINE" -addr "$addr" $loadargs -warmup "$WARMUP" -seconds "$window" \
      -json -server-pid "$SERVER_PID" "${extra[@]}" 2>"$log.load") || true
  else
    listening=0
    echo "bench.sh: $name did not start listening on $addr within 10s (recorded as a run without requests):" >&2
    tail -n 20 "$log.server" >&2
  fi
  if [ -n "$SCRAPER_PID" ]; then
    kill "$SCRAPER_PID" 2>/dev/null || true
    wait "$SCRAPER_PID" 2>/dev/null || true
    SCRAPER_PID=""
  fi
  stop_server "$SERVER_PID"
  SERVER_PID=""
  if [ -z "$json" ]; then
    if [ "$listening" = 1 ]; then
      echo "bench.sh: load produced no result for $name $sname:" >&2
      tail -n 5 "$log.load" >&2
    fi
    json='{}'
  fi
  printf '{"kind":"%s","server":"%s","scenario":"%s","repeat":%d,"server_exit":%d,"load":%s}\n' \
    "$kind" "$name" "$sname" "$repeat" "$STOP_STATUS" "$json" >>"$RAW"
  awk -v n="$name" -v s="$sname" -v k="$kind" -v r="$repeat" -v j="$json" 'BEGIN {
    rps = j; sub(/.*"rps":/, "", rps); sub(/,.*/, "", rps)
    cpu = j; sub(/.*"server_cpu_us_per_req":/, "", cpu); sub(/,.*/, "", cpu)
    oth = j; sub(/.*"other_cpu_pct":/, "", oth); sub(/,.*/, "", oth)
    printf "bench.sh: %-5s %-14s %-18s #%d  %9.0f req/s  %6.2f us CPU/req  others %3.0f%%\n", k, s, n, r, rps + 0, cpu + 0, oth + 0
  }'
}

started=$(date +%s)
for ((round = 1; round <= max_rounds; round++)); do
  for scenario in "${SCENARIOS[@]}"; do
    for spec in "${selected[@]}"; do
      IFS='|' read -r _ _ _ minrep _ <<<"$spec"
      if [ "$round" -gt "$(repeats_of "$minrep")" ]; then continue; fi
      run_one run "$spec" "$scenario" "$round"
    done
  done
done
if [ "$PERF" = 1 ]; then
  for scenario in "${SCENARIOS[@]}"; do
    for spec in "${selected[@]}"; do
      run_one perf "$spec" "$scenario" 1
    done
  done
fi
echo "bench.sh: ran for $(($(date +%s) - started))s"

cmd="BENCH=$BENCH REPEATS=$REPEATS SERVER_CPUS=$SERVER_CPUS CLIENT_CPUS=$CLIENT_CPUS WARMUP=$WARMUP WINDOW=$WINDOW"
cmd+=" PERF=$PERF PERF_WINDOW=$PERF_WINDOW LOAD_ENGINE=$LOAD_ENGINE QUIET_WAIT=$QUIET_WAIT"
if [ -n "$SERVERS_ASKED" ]; then cmd+=" SERVERS='$SERVERS_ASKED'"; fi
if [ "$SCRAPE" = 1 ]; then cmd+=" SCRAPE=1"; fi
cmd+=" make bench"
about="$(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), kernel $(uname -r), $(go version | cut -d' ' -f3); servers on cpus $SERVER_CPUS, load generator on cpus $CLIENT_CPUS; loopback."
echo
mkdir -p "$OUT"
cp "$RAW" "$OUT/runs-$BENCH.jsonl"
RAW=$OUT/runs-$BENCH.jsonl
report_status=0
"$TMP/bin/benchreport" -in "$RAW" -baseline "$BASELINE" -md "$OUT/results-$BENCH.md" -tsv "$OUT/summary-$BENCH.tsv" \
  -title "percore side-by-side benchmark: $HOST, $DATE (BENCH=$BENCH)" -command "$cmd" -about "$about" \
  -check || report_status=$?
echo

if [ "$BENCH" != smoke ]; then
  if (cd scripts/benchplot && go build -o "$TMP/bin/benchplot" .) 2>"$TMP/logs/benchplot-build"; then
    "$TMP/bin/benchplot" -in "$OUT/summary-$BENCH.tsv" -out "$OUT/chart-$BENCH.png" \
      -title "$HOST, $DATE, BENCH=$BENCH: bars are medians, whiskers span the repeats"
  else
    echo "bench.sh: note: no chart: scripts/benchplot did not build:" >&2
    tail -n 5 "$TMP/logs/benchplot-build" >&2
  fi
  echo "bench.sh: results in $OUT"
fi
if [ "$report_status" -ne 0 ]; then
  echo "bench.sh: FAILED: some runs had errors, mismatched replies or no requests (see above)" >&2
  exit 1
fi
