#!/usr/bin/env bash
# prom-check.sh: shows a real Prometheus server scraping percore. It builds
# examples/echo and examples/bench/load, starts echo with -metrics on 127.0.0.1,
# writes a one-job prometheus.yml (scrape every second) in a temporary
# directory, starts `prometheus` on 127.0.0.1 with its storage there, runs
# load against echo, and while load runs asks Prometheus's HTTP API for
#   up{job="percore"}                                               (must be 1)
#   sum by (loop) (rate(percore_loop_completions_total[10s]))       (one value per loop, total > 0)
# It also sends every query of docs/grafana-percore.json (with $job and
# $instance as .*, $__rate_interval as 10s) and fails if Prometheus rejects one.
# It prints the answers and exits 0 when they hold, 1 when they do not
# (what it saw is printed), 2 when it cannot run (a missing tool, a port in
# use, a server that does not start). The whole run is bounded: about 30
# seconds, never more than TIMEOUT.
#
# What it changes: nothing outside a temporary directory (removed on exit)
# and the loopback ports below while it runs; every process it starts is
# stopped on exit, also on ^C. Nothing to undo.
#
# Usage: scripts/prom-check.sh [--dry-run]
#   --dry-run  print the configuration and the commands, run nothing
# Environment (defaults in parentheses):
#   ECHO_PORT (27200)  METRICS_PORT (27201)  PROM_PORT (27202)
#   CORES (the affinity mask: one loop per CPU)  LOAD_SECONDS (12)  TIMEOUT (90)
# Needs: go, curl, jq and prometheus (Debian: apt-get install -y curl jq prometheus).
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
      echo "prom-check.sh: unknown argument $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

ECHO_PORT=${ECHO_PORT:-27200}
METRICS_PORT=${METRICS_PORT:-27201}
PROM_PORT=${PROM_PORT:-27202}
CORES=${CORES:-}
LOAD_SECONDS=${LOAD_SECONDS:-12}
TIMEOUT=${TIMEOUT:-90}
QUERY='sum by (loop) (rate(percore_loop_completions_total[10s]))'

ECHO_ARGS=(-addr "127.0.0.1:$ECHO_PORT" -metrics "127.0.0.1:$METRICS_PORT")
if [ -n "$CORES" ]; then ECHO_ARGS+=(-cores "$CORES"); fi
LOAD_ARGS=(-addr "127.0.0.1:$ECHO_PORT" -conns 32 -bytes 64 -warmup 0 -seconds "$LOAD_SECONDS")
PROM_ARGS=(--storage.tsdb.path=TMP/data --web.listen-address="127.0.0.1:$PROM_PORT")

echo "prom-check.sh: echo on 127.0.0.1:$ECHO_PORT, its metrics on 127.0.0.1:$METRICS_PORT, prometheus on 127.0.0.1:$PROM_PORT"
echo "prom-check.sh: echo ${ECHO_ARGS[*]}"
echo "prom-check.sh: prometheus --config.file=TMP/prometheus.yml ${PROM_ARGS[*]} (scrape_interval 1s)"
echo "prom-check.sh: load ${LOAD_ARGS[*]}"
echo "prom-check.sh: query: $QUERY"
if [ "$DRY_RUN" = 1 ]; then
  exit 0
fi

for tool in go curl jq prometheus; do
  if ! command -v "$tool" >/dev/null; then
    echo "prom-check.sh: needs $tool (Debian: apt-get install -y curl jq prometheus)" >&2
    exit 2
  fi
done

# --- from here on it runs things ---

TMP=$(mktemp -d "${TMPDIR:-/tmp}/percore-prom-check.XXXXXX")
PIDS=()
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

DEADLINE=$(($(date +%s) + TIMEOUT))
# check_time: fails the run once TIMEOUT has passed.
check_time() {
  if [ "$(date +%s)" -ge "$DEADLINE" ]; then
    echo "prom-check.sh: gave up after ${TIMEOUT}s" >&2
    exit 2
  fi
}

# port_free PORT: nothing listens on 127.0.0.1:PORT.
port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
for port in "$ECHO_PORT" "$METRICS_PORT" "$PROM_PORT"; do
  if ! port_free "$port"; then
    echo "prom-check.sh: 127.0.0.1:$port is in use (set ECHO_PORT, METRICS_PORT, PROM_PORT)" >&2
    exit 2
  fi
done

echo "prom-check.sh: building"
mkdir -p "$TMP/bin" "$TMP/data"
go build -o "$TMP/bin/echo" ./examples/echo
go build -C examples/bench -o "$TMP/bin/load" ./load

"$TMP/bin/echo" "${ECHO_ARGS[@]}" >"$TMP/echo.log" 2>&1 &
PIDS+=($!)
until grep -q "listening on" "$TMP/echo.log"; do
  if ! kill -0 "${PIDS[0]}" 2>/dev/null; then
    echo "prom-check.sh: echo did not start:" >&2
    cat "$TMP/echo.log" >&2
    exit 2
  fi
  check_time
  sleep 0.1
done
LOOPS=$(grep -c '^loop [0-9]*: cpu' "$TMP/echo.log")
grep -E '^(backend|metrics on|listening on)' "$TMP/echo.log" | sed 's/^/prom-check.sh: echo: /'

cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: percore
    static_configs:
      - targets: ["127.0.0.1:$METRICS_PORT"]
EOF
prometheus --config.file="$TMP/prometheus.yml" "${PROM_ARGS[@]/TMP/$TMP}" >"$TMP/prometheus.log" 2>&1 &
PIDS+=($!)
PROM=http://127.0.0.1:$PROM_PORT
until curl -fsS "$PROM/-/ready" >/dev/null 2>&1; do
  if ! kill -0 "${PIDS[1]}" 2>/dev/null; then
    echo "prom-check.sh: prometheus did not start:" >&2
    tail -n 20 "$TMP/prometheus.log" >&2
    exit 2
  fi
  check_time
  sleep 0.2
done
echo "prom-check.sh: prometheus is ready ($(prometheus --version 2>&1 | head -n 1))"

"$TMP/bin/load" "${LOAD_ARGS[@]}" >"$TMP/load.out" 2>"$TMP/load.log" &
LOAD_PID=$!
PIDS+=("$LOAD_PID")

# query EXPR: the API's answer to an instant query.
query() {
  curl -fsS --max-time 5 "$PROM/api/v1/query" --data-urlencode "query=$1"
}

# Poll while load runs: the target is up, and the rate has one series per
# loop with a positive sum (rate needs two scrapes in its window first).
up='' rates='' ok=0
while kill -0 "$LOAD_PID" 2>/dev/null; do
  check_time
  up=$(query 'up{job="percore"}' | jq -r '.data.result[0].value[1] // "none"') || up=none
  rates=$(query "$QUERY" | jq -c '[.data.result[] | {loop: .metric.loop, rate: (.value[1] | tonumber)}]') || rates='[]'
  if [ "$up" = 1 ] && [ "$(jq length <<<"$rates")" = "$LOOPS" ] &&
    jq -e 'map(.rate) | add > 0' <<<"$rates" >/dev/null; then
    ok=1
    break
  fi
  sleep 1
done
kill -TERM "$LOAD_PID" 2>/dev/null || true

echo "prom-check.sh: up{job=\"percore\"} = $up"
echo "prom-check.sh: $QUERY ="
jq -r '.[] | "prom-check.sh:   loop \(.loop): \(.rate | floor) completions/s"' <<<"${rates:-[]}"
# Every dashboard query must be valid PromQL over these metrics.
bad=0 nq=0
while IFS= read -r expr; do
  nq=$((nq + 1))
  expr=${expr//\$__rate_interval/10s}
  expr=${expr//\$job/.*}
  expr=${expr//\$instance/.*}
  if ! status=$(query "$expr" | jq -r .status) || [ "$status" != success ]; then
    echo "prom-check.sh: the dashboard query $expr fails" >&2
    bad=$((bad + 1))
  fi
done < <(jq -r '.panels[].targets[]?.expr' docs/grafana-percore.json)
echo "prom-check.sh: docs/grafana-percore.json: $((nq - bad)) of $nq queries accepted"
if [ "$bad" != 0 ]; then ok=0; fi

if [ "$ok" = 1 ]; then
  echo "prom-check.sh: OK: prometheus scrapes echo, and the completion rate of each of its $LOOPS loops comes back"
  exit 0
fi
echo "prom-check.sh: FAILED: want up = 1, $LOOPS series with a positive sum, and every dashboard query accepted" >&2
echo "prom-check.sh: echo's log:" >&2
tail -n 20 "$TMP/echo.log" >&2
echo "prom-check.sh: prometheus's log:" >&2
tail -n 20 "$TMP/prometheus.log" >&2
exit 1
