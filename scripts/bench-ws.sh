#!/usr/bin/env bash
# bench-ws.sh: issue 27's WebSocket gateway benchmark (BENCH=ws make bench, or
# scripts/bench.sh with BENCH=ws). Each gateway of the protocol in
# examples/bench/gwproto runs pinned to SERVER_CPUS with GOMAXPROCS=1 (one
# loop for percore), and examples/bench/wsload, pinned to CLIENT_CPUS,
# measures one row against it; rows and servers are interleaved (every
# server for a row, then the next row), REPEATS times, and the summary gives
# medians with the range of the repeats. Every message is checked: a run
# with a lost, duplicated, reordered or different message, a failed
# connection or a short publish is counted as a problem in the summary.
#
# Rows (the connection counts are the environment's, defaults in brackets):
#   idle     IDLE_CONNS [18000] subscribed connections held open: the
#            server's RSS growth per connection after SETTLE seconds
#   fanout1  one publish to FANOUT_CONNS [18000] subscribers: time until the
#            last has it, server CPU per delivered message
#   fanout   a publish every 10 ms for RATE_SECONDS [10] to RATE_CONNS [1000]
#            subscribers: delivery latency p99 (1000, not 18000: 18000
#            subscribers at 100 publishes/s is 1.8M deliveries/s, more than
#            one client core can read, so the client would be measured)
#   echo     ECHO_CONNS [1000] connections echoing 64-byte binary messages in
#            closed loop for WINDOW [5] seconds after WARMUP [1]: messages/s,
#            server CPU per message
#   storm    STORM_CONNS [15000] subscribers close at once and resubscribe:
#            time until all are back, a live client's round-trip p99 meanwhile
# ROWS (default "idle fanout1 fanout echo storm") picks some.
#
# Servers (SERVERS, default "wsnbio wsgws wsgorilla percore"): the peers in
# examples/bench/baseline/ws* (nbio v1.6.8 event loop, gws v1.8.9 and
# gorilla/websocket v1.5.3 on net/http; decision 0046 says how each is
# configured) and percore = examples/ws_gateway on PERCORE_BACKEND [uring]
# with -cores SERVER_CPUS, left out with a note while that directory does
# not exist. Every server gets -addr, -secret, -ping-interval PING [30s].
#
# SMOKE=1: every row at a few connections for about a second each, one
# repeat, the summary in a temporary directory unless OUT is set: a check
# that the harness works (make test does not run it; scripts' Go test
# TestBenchWSRuns does, outside -short).
#
# What it changes: it builds into a temporary directory (removed on exit),
# raises its own soft fd limit to the hard one (the rows need 18,000
# connections on each side: a hard limit of 20,000 suffices), listens on
# 127.0.0.1 ports from BASE_PORT [28700] up, dials from 127.0.0.1-.8, and
# writes OUT/ws-runs.jsonl and OUT/ws-summary.md (OUT:
# docs/results/HOST-DATE-ws). Undo: delete OUT. It changes no system setting.
#
# Bounded in time: each wsload run is killed after its row's limit (the
# run's own length plus 120 s), a server that does not listen within 10 s is
# recorded as a failed run. With the defaults, 3 repeats of 5 rows on 3
# peers take about 15 minutes.
#
# Usage: scripts/bench-ws.sh [--dry-run]
#   --dry-run  check the settings, print what it would run, run nothing
# Environment (defaults in brackets): REPEATS [3]  SERVER_CPUS [0]
#   CLIENT_CPUS [1]  SERVERS  ROWS  IDLE_CONNS  FANOUT_CONNS  RATE_CONNS
#   RATE_SECONDS  ECHO_CONNS  STORM_CONNS  SETTLE [3]  WARMUP  WINDOW  PING
#   PERCORE_BACKEND  BASE_PORT  OUT  SMOKE [0]
set -euo pipefail

# shellcheck source=scripts/lib/bench-common.sh
. "$(dirname "$0")/lib/bench-common.sh"
bench_args "$@"

SMOKE=${SMOKE:-0}
if [ "$SMOKE" = 1 ]; then
  REPEATS=${REPEATS:-1}
  IDLE_CONNS=${IDLE_CONNS:-50} FANOUT_CONNS=${FANOUT_CONNS:-50} RATE_CONNS=${RATE_CONNS:-20}
  RATE_SECONDS=${RATE_SECONDS:-1} ECHO_CONNS=${ECHO_CONNS:-10} STORM_CONNS=${STORM_CONNS:-50}
  SETTLE=${SETTLE:-0.2} WARMUP=${WARMUP:-0.2} WINDOW=${WINDOW:-0.5}
  SERVERS=${SERVERS-wsnbio wsgws wsgorilla}
fi
REPEATS=${REPEATS:-3}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
SERVERS=${SERVERS-wsnbio wsgws wsgorilla percore}
ROWS=${ROWS-idle fanout1 fanout echo storm}
IDLE_CONNS=${IDLE_CONNS:-18000}
FANOUT_CONNS=${FANOUT_CONNS:-18000}
RATE_CONNS=${RATE_CONNS:-1000}
RATE_SECONDS=${RATE_SECONDS:-10}
ECHO_CONNS=${ECHO_CONNS:-1000}
STORM_CONNS=${STORM_CONNS:-15000}
SETTLE=${SETTLE:-3}
WARMUP=${WARMUP:-1}
WINDOW=${WINDOW:-5}
PING=${PING:-30s}
PERCORE_BACKEND=${PERCORE_BACKEND:-uring}
BASE_PORT=${BASE_PORT:-28700}
SECRET=bench-ws-secret

die() {
  echo "$BENCH_NAME: $*" >&2
  exit 2
}
positive() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || die "$1='$2' is not a positive whole number"; }
seconds() { [[ "$2" =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] || die "$1='$2' is not a number of seconds"; }
for v in REPEATS IDLE_CONNS FANOUT_CONNS RATE_CONNS RATE_SECONDS ECHO_CONNS STORM_CONNS BASE_PORT; do positive "$v" "${!v}"; done
for v in SETTLE WARMUP WINDOW; do seconds "$v" "${!v}"; done
[[ "$PING" =~ ^[0-9]+(ms|s|m)$ ]] || die "PING='$PING' is not a duration like 30s"
[[ "$SERVER_CPUS" =~ ^[0-9]+$ ]] || die "SERVER_CPUS='$SERVER_CPUS' must be one CPU (the gateways run one loop)"
[[ "$CLIENT_CPUS" =~ ^[0-9,-]+$ ]] || die "CLIENT_CPUS='$CLIENT_CPUS' is not a CPU list"
case "$PERCORE_BACKEND" in uring | epoll) ;; *) die "PERCORE_BACKEND must be uring or epoll, not '$PERCORE_BACKEND'" ;; esac
for c in IDLE_CONNS FANOUT_CONNS STORM_CONNS; do
  if [ "${!c}" -gt 19000 ]; then die "$c=${!c}: the fd limit here is 20000 per process (use at most 19000)"; fi
done
for s in $SERVERS; do
  case "$s" in wsnbio | wsgws | wsgorilla | percore) ;; *) die "unknown server $s (wsnbio wsgws wsgorilla percore)" ;; esac
done
for r in $ROWS; do
  case "$r" in idle | fanout1 | fanout | echo | storm) ;; *) die "unknown row $r (idle fanout1 fanout echo storm)" ;; esac
done
[ -n "$SERVERS" ] || die "SERVERS is empty"
[ -n "$ROWS" ] || die "ROWS is empty"

if [[ " $SERVERS " == *" percore "* ]] && [ ! -d examples/ws_gateway ]; then
  echo "$BENCH_NAME: note: examples/ws_gateway does not exist yet: percore is left out" >&2
  kept=""
  for s in $SERVERS; do [ "$s" = percore ] || kept+="$s "; done
  SERVERS=${kept% }
  [ -n "$SERVERS" ] || die "no server left to run"
fi

if [ -z "${OUT:-}" ] && [ "$SMOKE" != 1 ]; then OUT=docs/results/$(hostname)-$(date +%F)-ws; fi

bench_need "Debian: apt-get install -y util-linux coreutils" taskset timeout go

# row_args ROW prints wsload's arguments for a row; row_limit ROW its time bound.
row_args() {
  case "$1" in
    idle) echo "-mode idle -conns $IDLE_CONNS -settle ${SETTLE}s" ;;
    fanout1) echo "-mode fanout -conns $FANOUT_CONNS -publishes 1 -bytes 64" ;;
    fanout) echo "-mode fanout -conns $RATE_CONNS -interval 10ms -seconds ${RATE_SECONDS}s -bytes 64" ;;
    echo) echo "-mode echo -conns $ECHO_CONNS -bytes 64 -warmup ${WARMUP}s -seconds ${WINDOW}s" ;;
    storm) echo "-mode storm -conns $STORM_CONNS" ;;
  esac
}
row_limit() {
  case "$1" in
    idle) awk -v s="$SETTLE" 'BEGIN { printf "%d", s + 120 }' ;;
    fanout) echo $((RATE_SECONDS + 120)) ;;
    echo) awk -v w="$WARMUP" -v s="$WINDOW" 'BEGIN { printf "%d", w + s + 120 }' ;;
    *) echo 120 ;;
  esac
}

nservers=$(wc -w <<<"$SERVERS")
nrows=$(wc -w <<<"$ROWS")
echo "$BENCH_NAME: servers on cpu $SERVER_CPUS, wsload on cpus $CLIENT_CPUS; servers: $SERVERS; rows: $ROWS; $REPEATS repeats: $((REPEATS * nservers * nrows)) runs; results in ${OUT:-a temporary directory}"

bench_tmp
if [ -z "${OUT:-}" ]; then OUT=$tmp/results; fi
run go build -C examples/bench -o "$tmp/" ./wsload ./baseline/wsnbio ./baseline/wsgws ./baseline/wsgorilla
if [[ " $SERVERS " == *" percore "* ]]; then run go build -o "$tmp/" ./examples/ws_gateway; fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# start NAME PORT: the gateway, pinned; sets SERVER_PID.
start() {
  local name=$1 port=$2 cmd
  local common=(-addr "127.0.0.1:$port" -secret "$SECRET" -ping-interval "$PING")
  case "$name" in
    percore) cmd=("$tmp/ws_gateway" "${common[@]}" -cores "$SERVER_CPUS" -backend "$PERCORE_BACKEND") ;;
    *) cmd=("$tmp/$name" "${common[@]}") ;;
  esac
  cmd=(env GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "${cmd[@]}")
  if [ "$DRY_RUN" = 1 ]; then
    printf '+ %s &\n' "${cmd[*]}"
    SERVER_PID=0
    return 0
  fi
  "${cmd[@]}" >"$tmp/$name-$port.log" 2>&1 &
  SERVER_PID=$!
  pids+=("$SERVER_PID")
  local i
  for ((i = 0; i < 200; i++)); do
    if grep -q "listening on" "$tmp/$name-$port.log" 2>/dev/null; then return 0; fi
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then break; fi
    sleep 0.05
  done
  echo "$BENCH_NAME: $name did not start listening on 127.0.0.1:$port within 10s:" >&2
  tail -n 20 "$tmp/$name-$port.log" >&2
  return 1
}

stop() {
  if [ "$DRY_RUN" = 0 ]; then
    kill -INT "$1" 2>/dev/null || true
    local i
    for ((i = 0; i < 100; i++)); do
      kill -0 "$1" 2>/dev/null || break
      sleep 0.05
    done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
  fi
}

if [ "$DRY_RUN" = 0 ]; then
  mkdir -p "$OUT"
  : >"$OUT/ws-runs.jsonl"
fi
port=$BASE_PORT
started=$(date +%s)
for repeat in $(seq "$REPEATS"); do
  for row in $ROWS; do
    for name in $SERVERS; do
      port=$((port + 1))
      json='{}'
      read -ra rargs <<<"$(row_args "$row")"
      # wsload's GOMAXPROCS is its CPUs (Go reads the affinity mask).
      load=(timeout -k 5 "$(row_limit "$row")" taskset -c "$CLIENT_CPUS" "$tmp/wsload"
        -addr "127.0.0.1:$port" -secret "$SECRET" "${rargs[@]}" -json)
      if start "$name" "$port"; then
        if [ "$DRY_RUN" = 1 ]; then
          run "${load[@]}" -server-pid "\$SERVER_PID"
          continue
        fi
        json=$("${load[@]}" -server-pid "$SERVER_PID" 2>"$tmp/wsload.err") || true
        [ -n "$json" ] || json='{}'
        stop "$SERVER_PID"
      fi
      printf '{"server":"%s","row":"%s","repeat":%d,"load":%s}\n' "$name" "$row" "$repeat" "$json" >>"$OUT/ws-runs.jsonl"
      problem=$(sed -n 's/.*"problem":"\([^"]*\)".*/\1/p' <<<"$json")
      if [ "$json" = '{}' ]; then problem="no result: $(tail -n 3 "$tmp/wsload.err" 2>/dev/null | tr '\n' ' ')"; fi
      echo "$BENCH_NAME: #$repeat $row $name ${problem:+PROBLEM: $problem}" >&2
    done
  done
done
if [ "$DRY_RUN" = 1 ]; then exit 0; fi
echo "$BENCH_NAME: ran for $(($(date +%s) - started))s" >&2

# The summary: per row, each server's medians (and ranges) of the row's figures.
awk -v repeats="$REPEATS" -v cmd="SERVERS='$SERVERS' ROWS='$ROWS' REPEATS=$REPEATS IDLE_CONNS=$IDLE_CONNS FANOUT_CONNS=$FANOUT_CONNS RATE_CONNS=$RATE_CONNS STORM_CONNS=$STORM_CONNS ECHO_CONNS=$ECHO_CONNS scripts/bench-ws.sh" '
  function get(s, k,   m) {
    if (match(s, "\"" k "\":[-0-9.e+]+")) { m = substr(s, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); return m + 0 }
    return ""
  }
  function sort(list, a,   m, i, j, t) {
    m = split(list, a, " ")
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return m
  }
  function med(list,   a, m) { m = sort(list, a); if (m == 0) return "-"; return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
  function num(v) { v += 0; return (v == int(v) || v >= 1000 || v <= -1000) ? sprintf("%.0f", v) : (v >= 10 || v <= -10) ? sprintf("%.1f", v) : sprintf("%.3g", v) }
  function fmt(list,   a, m, v) {
    m = sort(list, a); if (m == 0) return "-"
    v = med(list)
    if (m == 1) return num(v)
    return num(v) " (" num(a[1]) "-" num(a[m]) ")"
  }
  BEGIN {
    cols["idle"] = "server_rss_per_conn_bytes client_rss_per_conn_bytes client_goroutines open_s"
    head["idle"] = "server RSS B/conn | client RSS B/conn | client goroutines | open s"
    cols["fanout1"] = "last_max_us server_cpu_us_per_delivery lat_p50_us client_busy_pct"
    head["fanout1"] = "time to last us | server CPU us/delivery | latency p50 us | client busy %"
    cols["fanout"] = "lat_p99_us server_cpu_us_per_delivery late_publishes client_busy_pct"
    head["fanout"] = "latency p99 us | server CPU us/delivery | late publishes | client busy %"
    cols["echo"] = "msgs_per_s server_cpu_us_per_msg rtt_p99_us client_busy_pct"
    head["echo"] = "messages/s | server CPU us/msg | round trip p99 us | client busy %"
    cols["storm"] = "storm_s live_during_p99_us live_before_p99_us storm_retries"
    head["storm"] = "all back s | live p99 us during | live p99 us before | retries"
  }
  {
    srv = $0; sub(/^{"server":"/, "", srv); sub(/".*/, "", srv)
    row = $0; sub(/.*"row":"/, "", row); sub(/".*/, "", row)
    k = row SUBSEP srv
    if (!(k in runs)) { order[++nk] = k }
    runs[k]++
    if ($0 ~ /"problem":"/ || $0 ~ /"load":\{\}/) bad[k]++
    n = split(cols[row], c, " ")
    for (i = 1; i <= n; i++) { v = get($0, c[i]); if (v != "") vals[k, i] = vals[k, i] " " v }
    conns[k] = get($0, "conns")
  }
  END {
    print "# WebSocket gateway benchmark (scripts/bench-ws.sh)"
    print ""
    print "`" cmd "`; medians of the repeats, the range in brackets; problems: runs with a lost, duplicated,"
    print "reordered or different message, a failed connection or no result."
    split("idle fanout1 fanout echo storm", rows, " ")
    for (r = 1; r <= 5; r++) {
      row = rows[r]; printed = 0
      for (j = 1; j <= nk; j++) {
        split(order[j], f, SUBSEP); if (f[1] != row) continue
        if (!printed) { print ""; print "## " row; print ""; print "| server | conns | runs | " head[row] " | problems |"; print "|---|---:|---:|---:|---:|---:|---:|---:|"; printed = 1 }
        k = order[j]
        line = sprintf("| %s | %s | %d |", f[2], conns[k], runs[k])
        n = split(cols[row], c, " ")
        for (i = 1; i <= n; i++) line = line " " fmt(vals[k, i]) " |"
        printf "%s %d |\n", line, bad[k]
      }
    }
  }' "$OUT/ws-runs.jsonl" >"$OUT/ws-summary.md"
cat "$OUT/ws-summary.md"
echo "$BENCH_NAME: runs in $OUT/ws-runs.jsonl, summary in $OUT/ws-summary.md" >&2
if grep -q '"problem":"\|"load":{}' "$OUT/ws-runs.jsonl"; then
  echo "$BENCH_NAME: FAILED: some runs had problems (see the summary)" >&2
  exit 1
fi
