#!/usr/bin/env bash
# bench-latency.sh: latency against throughput, open loop (BENCH=latency make bench, or
# scripts/bench.sh with BENCH=latency). For each protocol in PROTOCOLS, each connection count
# in CONNS and each repeat, every server of that protocol runs in turn (interleaved: A B C A B
# C), pinned to SERVER_CPUS with one loop, worker or thread (GOMAXPROCS=1 for the Go ones), and
# examples/bench/load, pinned to CLIENT_CPUS, runs
#   load -conns C -rates 10%,50%,80%,90%,100% -warmup WARMUP -seconds WINDOW -json -server-pid PID
# against it: a closed-loop run that measures the server's capacity, then one open-loop run
# at each fraction of that capacity (FRACTIONS), requests due on a fixed schedule and each
# latency taken from its due time (coordinated omission corrected: examples/bench/load/openloop.go).
# A step in which the generator fell behind its own schedule is recorded as invalid and left
# out of the curves.
#
#   echo  examples/echo on io_uring (percore-uring) and epoll (percore-epoll), the C liburing
#         echo (liburing: examples/bench/baseline/uringc), netpoll, gnet, std net; 64-byte requests
#   http  examples/http (percore), nginx (return 200), fasthttp, gnet: GET /plaintext, every
#         response checked for "Hello, World!"
#   resp  examples/kv (kv) and redis-server (redis): 50% GET, 50% SET of 64-byte values
#         over 10,000 keys
#
# Then the issue-29 floors, at one rate for several servers in turn: for echo, at FLOOR_PCT% of
# netpoll's capacity (as measured in the same repeat), percore-uring, percore-epoll, netpoll
# and liburing; for http, at FLOOR_PCT% of nginx's capacity, percore and nginx. And the check
# against an independent open-loop client (VEGETA=1): vegeta v12.13.0 (docs/decisions/0031)
# and examples/bench/load at the same rates (VEGETA_RATES, requests/s) on the same server (percore
# and nginx HTTP, 50 connections), vegeta's latencies beside load's; and, when WRK2 names a wrk2
# binary (giltene/wrk2, built from its repository: no package has it), wrk2 at the same rates
# (-t1 -c50 -R RATE --latency, for 10.25 s of wrk2's own calibration, which it does not record,
# plus WINDOW + 0.75 s that it does), its HdrHistogram-corrected percentiles beside load's.
#
# Runs go to OUT/latency-runs.jsonl, one JSON object per load result (or vegeta report),
# appended: the script can run in batches (one PROTOCOLS and CONNS at a time, REPEAT_FROM
# naming the first repeat of the batch) and each run adds to the same file. At the end of every
# run it summarises all of OUT/latency-runs.jsonl with scripts/benchplot -latency:
# OUT/latency-summary.md (medians per step, where each server's p99 crosses 1 ms, the floors,
# the vegeta check) and one chart per protocol, OUT/latency-PROTOCOL.png (p50 and p99 against
# requests/s, a panel per connection count). SUMMARY_ONLY=1 only summarises.
#
# What it changes: it builds the servers, examples/bench/load, vegeta (from the Go module proxy,
# pinned by scripts/vegeta/go.sum) and benchplot into a temporary directory (removed on exit,
# with nginx's configuration), listens on 127.0.0.1 ports from BASE_PORT up, and writes
# OUT/latency-runs.jsonl, OUT/latency-summary.md and OUT/latency-*.png. Undo: delete OUT. It
# changes no system setting.
#
# Bounded in time: each load run is killed after 6 x (WARMUP + WINDOW) + 60 seconds, each
# vegeta run after WARMUP + WINDOW + 30; a server that does not listen within 10 seconds fails
# the script. With the defaults one repeat of echo at one connection count takes about 3
# minutes, of http 2, of resp 1; all of it (3 protocols, 2 connection counts, 3 repeats) about
# 40 minutes: run it in batches when the machine is shared.
#
# Usage: scripts/bench-latency.sh [--dry-run]
#   --dry-run  print what it would run, and run nothing
# Environment (defaults in parentheses):
#   PROTOCOLS ("echo http resp")  CONNS ("50 1000")  REPEATS (3)  REPEAT_FROM (1)
#   FRACTIONS ("10 50 80 90 100")  WARMUP (1)  WINDOW (3)  MAX_INFLIGHT (16)
#   ECHO_SERVERS ("percore-uring percore-epoll liburing netpoll gnet stdnet")
#   HTTP_SERVERS ("percore nginx fasthttp gnet")  RESP_SERVERS ("kv redis")
#   FLOORS (1)  FLOOR_PCT (80)  VEGETA (1)  VEGETA_RATES ("5000 20000")  WRK2 (unset)
#   SERVER_CPUS (0)  CLIENT_CPUS (1)  BASE_PORT (28500)  SUMMARY_ONLY (0)
#   LOAD_ARGS (""): more flags for every load run, e.g. "-spin 1ms" (the generator polls on its
#   own CPU instead of sleeping: docs/decisions/0067)
#   OUT (docs/results/HOST-DATE-latency)
set -euo pipefail

# shellcheck source=scripts/lib/bench-common.sh
. "$(dirname "$0")/lib/bench-common.sh"
bench_args "$@"

PROTOCOLS=${PROTOCOLS:-echo http resp}
CONNS=${CONNS:-50 1000}
REPEATS=${REPEATS:-3}
REPEAT_FROM=${REPEAT_FROM:-1}
FRACTIONS=${FRACTIONS:-10 50 80 90 100}
WARMUP=${WARMUP:-1}
WINDOW=${WINDOW:-3}
MAX_INFLIGHT=${MAX_INFLIGHT:-16}
ECHO_SERVERS=${ECHO_SERVERS-percore-uring percore-epoll liburing netpoll gnet stdnet}
HTTP_SERVERS=${HTTP_SERVERS-percore nginx fasthttp gnet}
RESP_SERVERS=${RESP_SERVERS-kv redis}
FLOORS=${FLOORS:-1}
FLOOR_PCT=${FLOOR_PCT:-80}
VEGETA=${VEGETA:-1}
VEGETA_RATES=${VEGETA_RATES:-5000 20000}
WRK2=${WRK2:-}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
BASE_PORT=${BASE_PORT:-28500}
SUMMARY_ONLY=${SUMMARY_ONLY:-0}
LOAD_ARGS=${LOAD_ARGS:-}
OUT=${OUT:-docs/results/$(hostname)-$(date +%Y%m%d)-latency}

# Check the settings before anything runs.
for p in $PROTOCOLS; do
  case "$p" in
    echo | http | resp) ;;
    *)
      echo "$BENCH_NAME: unknown protocol $p (have: echo http resp)" >&2
      exit 2
      ;;
  esac
done
if [ -n "$WRK2" ] && ! [ -x "$WRK2" ]; then
  echo "$BENCH_NAME: WRK2=$WRK2 is not an executable (a wrk2 binary built from giltene/wrk2)" >&2
  exit 2
fi
for n in $CONNS $FRACTIONS $REPEATS $REPEAT_FROM $FLOOR_PCT $MAX_INFLIGHT $VEGETA_RATES; do
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ]; then
    echo "$BENCH_NAME: '$n' is not a positive whole number (CONNS, FRACTIONS, REPEATS, REPEAT_FROM, FLOOR_PCT, MAX_INFLIGHT, VEGETA_RATES)" >&2
    exit 2
  fi
done
if ! [[ "$WARMUP $WINDOW" =~ ^[0-9.]+\ [0-9.]+$ ]]; then
  echo "$BENCH_NAME: WARMUP and WINDOW are seconds, not '$WARMUP' and '$WINDOW'" >&2
  exit 2
fi
servers_of() {
  case "$1" in
    echo) echo "$ECHO_SERVERS" ;;
    http) echo "$HTTP_SERVERS" ;;
    resp) echo "$RESP_SERVERS" ;;
  esac
}
for p in $PROTOCOLS; do
  for s in $(servers_of "$p"); do
    case "$p/$s" in
      echo/percore-uring | echo/percore-epoll | echo/liburing | echo/netpoll | echo/gnet | echo/stdnet) ;;
      http/percore | http/nginx | http/fasthttp | http/gnet | resp/kv | resp/redis) ;;
      *)
        echo "$BENCH_NAME: unknown $p server $s" >&2
        exit 2
        ;;
    esac
  done
done

read -ra fractions <<<"$FRACTIONS"
rates=$(printf '%s%%,' "${fractions[@]}")
rates=${rates%,}
last_repeat=$((REPEAT_FROM + REPEATS - 1))
echo "$BENCH_NAME: protocols $PROTOCOLS; connections $CONNS; repeats $REPEAT_FROM..$last_repeat; steps capacity,$rates; ${WARMUP}s + ${WINDOW}s each; results in $OUT"

tools=(taskset go timeout gcc)
for p in $PROTOCOLS; do
  case "$p" in
    http) tools+=(nginx) ;;
    resp) tools+=(redis-server) ;;
  esac
done
if [ "$SUMMARY_ONLY" = 0 ]; then
  bench_need "Debian: apt-get install -y util-linux gcc liburing-dev nginx-light redis-server coreutils" "${tools[@]}"
  if [ "$DRY_RUN" = 0 ] && [[ " $PROTOCOLS " == *" echo "* ]] && [[ " $ECHO_SERVERS " == *" liburing "* ]] &&
    [ ! -e /usr/include/liburing.h ]; then
    echo "$BENCH_NAME: the liburing echo needs liburing's headers (Debian: apt-get install -y liburing-dev)" >&2
    exit 1
  fi
fi

bench_tmp

run mkdir -p "$OUT"
RUNS=$OUT/latency-runs.jsonl

# summarise: the tables and charts from every run recorded in OUT so far.
summarise() {
  run bash -c "cd scripts/benchplot && go build -o '$tmp/benchplot' ."
  run "$tmp/benchplot" -latency -in "$RUNS" -out "$OUT" -floor-pct "$FLOOR_PCT" \
    -title "$(hostname), $(date +%F): open loop, latency from each request's due time"
}

if [ "$SUMMARY_ONLY" = 1 ]; then
  summarise
  exit 0
fi

# Build what the servers asked for need, and the load generator.
# (Peers and the load generator are in the benchmark module, examples/bench:
# its packages are named relative to it, in bench_pkgs.)
pkgs=() bench_pkgs=(./load) gnet_pkgs=() need_gcc=0 need_vegeta=0
for proto in $PROTOCOLS; do
  for server in $(servers_of "$proto"); do
    case "$proto/$server" in
      echo/percore-*) pkgs+=(./examples/echo) ;;
      echo/netpoll) bench_pkgs+=(./baseline/netpoll) ;;
      echo/stdnet) bench_pkgs+=(./baseline/stdnet) ;;
      echo/gnet) gnet_pkgs+=(./baseline/gnet) ;;
      echo/liburing) need_gcc=1 ;;
      http/percore) pkgs+=(./examples/http) ;;
      http/fasthttp) bench_pkgs+=(./baseline/fasthttp) ;;
      http/gnet) gnet_pkgs+=(./baseline/gnethttp) ;;
      resp/kv) pkgs+=(./examples/kv) ;;
    esac
  done
  if [ "$proto" = http ] && [ "$VEGETA" = 1 ]; then need_vegeta=1; fi
done
if [ ${#pkgs[@]} -gt 0 ]; then run go build -o "$tmp/" "${pkgs[@]}"; fi
run go build -C examples/bench -o "$tmp/" "${bench_pkgs[@]}"
if [ ${#gnet_pkgs[@]} -gt 0 ]; then run go build -C examples/bench -tags=poll_opt -o "$tmp/" "${gnet_pkgs[@]}"; fi
if [ "$need_gcc" = 1 ]; then run gcc -O2 -o "$tmp/liburing-echo" examples/bench/baseline/uringc/echo.c -luring; fi
if [ "$need_vegeta" = 1 ] && ! run bash -c "cd scripts/vegeta && go build -o '$tmp/vegeta' github.com/tsenart/vegeta/v12"; then
  echo "$BENCH_NAME: note: vegeta did not build (scripts/vegeta; it comes from the Go module proxy): no vegeta check" >&2
  VEGETA=0
fi

# in_list WORD LIST reports whether WORD is one of the words of LIST.
in_list() {
  [[ " $2 " == *" $1 "* ]]
}

# nginx_conf DIR PORT writes a one-worker nginx configuration that answers
# /plaintext with "Hello, World!" (as scripts/bench-http.sh).
nginx_conf() {
  local dir=$1 port=$2
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
master_process off;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 75s;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  server {
    listen 127.0.0.1:$port backlog=4096;
    location /plaintext { default_type text/plain; return 200 "Hello, World!"; }
  }
}
EOF
}

# start PROTOCOL NAME PORT starts a server pinned to SERVER_CPUS; it sets SERVER_PID.
start() {
  local proto=$1 name=$2 port=$3 addr=127.0.0.1:$3 cmd
  local go=(env GOMAXPROCS=1 taskset -c "$SERVER_CPUS")
  local core=${SERVER_CPUS%%[,-]*}
  case "$proto/$name" in
    echo/percore-uring) cmd=("${go[@]}" "$tmp/echo" -addr "$addr" -backend uring -cores "$core") ;;
    echo/percore-epoll) cmd=("${go[@]}" "$tmp/echo" -addr "$addr" -backend epoll -cores "$core") ;;
    echo/liburing) cmd=(taskset -c "$SERVER_CPUS" "$tmp/liburing-echo" "$addr") ;;
    echo/netpoll) cmd=("${go[@]}" "$tmp/netpoll" -addr "$addr" -loops 1) ;;
    echo/gnet) cmd=("${go[@]}" "$tmp/gnet" -addr "$addr" -loops 1) ;;
    echo/stdnet) cmd=("${go[@]}" "$tmp/stdnet" -addr "$addr" -loops 1) ;;
    http/percore) cmd=("${go[@]}" "$tmp/http" -addr "$addr" -backend uring -cores "$core") ;;
    http/fasthttp) cmd=("${go[@]}" "$tmp/fasthttp" -addr "$addr") ;;
    http/gnet) cmd=("${go[@]}" "$tmp/gnethttp" -addr "$addr" -loops 1) ;;
    http/nginx)
      run nginx_conf "$tmp/nginx$port" "$port"
      cmd=(taskset -c "$SERVER_CPUS" nginx -c "$tmp/nginx$port/nginx.conf" -p "$tmp/nginx$port")
      ;;
    resp/kv) cmd=("${go[@]}" "$tmp/kv" -addr "$addr" -backend uring -cores "$core") ;;
    resp/redis)
      mkdir -p "$tmp/redis$port"
      cmd=(taskset -c "$SERVER_CPUS" redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no
        --dir "$tmp/redis$port")
      ;;
  esac
  if [ "$DRY_RUN" = 1 ]; then
    printf '+ %s &\n' "${cmd[*]}"
    SERVER_PID=0
    return 0
  fi
  "${cmd[@]}" >"$tmp/$name-$port.log" 2>&1 &
  SERVER_PID=$!
  pids+=("$SERVER_PID")
  wait_listen "$port"
}

stop() {
  if [ "$DRY_RUN" = 0 ]; then
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
  fi
}

# load_args PROTOCOL prints the load flags of the protocol's workload.
load_args() {
  case "$1" in
    echo) echo "-bytes 64" ;;
    http) echo "-http /plaintext" ;; # and -http-body, which has a space: added in load_run
    resp) echo "-engine resp -bytes 64 -resp-get 50 -resp-keys 10000" ;;
  esac
}

# load_run KIND PROTOCOL SERVER CONNS REPEAT PORT PID ARGS...: one load
# invocation; each JSON line it prints is appended to RUNS with what it was.
load_run() {
  local kind=$1 proto=$2 server=$3 conns=$4 repeat=$5 port=$6 pid=$7
  shift 7
  local body=() largs extra
  if [ "$proto" = http ]; then body=(-http-body "Hello, World!"); fi
  read -ra largs <<<"$(load_args "$proto")"
  read -ra extra <<<"$LOAD_ARGS"
  local cmd=(timeout -k 5 "$(awk -v w="$WARMUP" -v s="$WINDOW" 'BEGIN { printf "%d", 6 * (w + s) + 60 }')"
    env GOMAXPROCS=1 taskset -c "$CLIENT_CPUS" "$tmp/load" -addr "127.0.0.1:$port" -conns "$conns"
    "${largs[@]}" "${body[@]}" -max-inflight "$MAX_INFLIGHT" -warmup "$WARMUP" -seconds "$WINDOW" -json -server-pid "$pid" "${extra[@]}" "$@")
  if [ "$DRY_RUN" = 1 ]; then
    run "${cmd[@]}"
    return 0
  fi
  local status=0
  "${cmd[@]}" >"$tmp/load.out" 2>"$tmp/load.err" || status=$?
  if [ ! -s "$tmp/load.out" ]; then
    echo "$BENCH_NAME: $kind $proto $server c$conns #$repeat: load gave no result (status $status):" >&2
    tail -n 5 "$tmp/load.err" >&2
    printf '{"kind":"%s","protocol":"%s","server":"%s","conns":%d,"repeat":%d,"status":%d,"load":{}}\n' \
      "$kind" "$proto" "$server" "$conns" "$repeat" "$status" >>"$RUNS"
    return 0
  fi
  while IFS= read -r line; do
    printf '{"kind":"%s","protocol":"%s","server":"%s","conns":%d,"repeat":%d,"status":%d,"load":%s}\n' \
      "$kind" "$proto" "$server" "$conns" "$repeat" "$status" "$line" >>"$RUNS"
  done <"$tmp/load.out"
  awk -v k="$kind" -v p="$proto" -v s="$server" -v c="$conns" -v r="$repeat" '
    { step = "-"; if (match($0, /"step":"[^"]*"/)) { step = substr($0, RSTART + 8, RLENGTH - 9) }
      rps = $0; sub(/.*"rps":/, "", rps); sub(/,.*/, "", rps)
      p99 = $0; sub(/.*"p99_us":/, "", p99); sub(/,.*/, "", p99)
      bad = ($0 ~ /"problem":/) ? "  INVALID" : ""
      printf "%s: %-6s %-4s %-13s c%-4s #%s %-9s %9.0f req/s  p99 %9.1f us%s\n", "bench-latency.sh", k, p, s, c, r, step, rps, p99, bad }' \
    "$tmp/load.out" >&2
}

# capacity_of PROTOCOL SERVER CONNS REPEAT prints the capacity that the
# sweep of that server measured in that repeat (0 if none).
capacity_of() {
  if [ "$DRY_RUN" = 1 ]; then
    echo 100000
    return 0
  fi
  awk -v p="$1" -v s="$2" -v c="$3" -v r="$4" '
    index($0, "\"kind\":\"sweep\",\"protocol\":\"" p "\",\"server\":\"" s "\",\"conns\":" c ",\"repeat\":" r ",") &&
    index($0, "\"step\":\"capacity\"") { v = $0; sub(/.*"rps":/, "", v); sub(/,.*/, "", v); cap = v }
    END { printf "%.0f", cap + 0 }' "$RUNS"
}

# vegeta_run SERVER PORT RATE REPEAT: vegeta at RATE requests/s for WINDOW
# seconds (after a WARMUP-second attack that is not recorded), its JSON
# report appended to RUNS.
vegeta_run() {
  local server=$1 port=$2 rate=$3 repeat=$4
  local v=(env GOMAXPROCS=1 timeout -k 5 "$(awk -v w="$WARMUP" -v s="$WINDOW" 'BEGIN { printf "%d", w + s + 30 }')"
    taskset -c "$CLIENT_CPUS" "$tmp/vegeta" attack -rate "$rate/s" -max-connections 50 -connections 50 -keepalive)
  if [ "$DRY_RUN" = 1 ]; then
    run "${v[@]}" -duration "${WINDOW}s"
    return 0
  fi
  echo "GET http://127.0.0.1:$port/plaintext" >"$tmp/targets"
  "${v[@]}" -duration "${WARMUP}s" -targets "$tmp/targets" >/dev/null 2>&1 || true
  "${v[@]}" -duration "${WINDOW}s" -targets "$tmp/targets" >"$tmp/vegeta.bin" 2>"$tmp/vegeta.err" || true
  local report
  report=$("$tmp/vegeta" report -type=json "$tmp/vegeta.bin" 2>>"$tmp/vegeta.err" || true)
  if [ -z "$report" ]; then
    report='{}'
    tail -n 5 "$tmp/vegeta.err" >&2
  fi
  printf '{"kind":"vegeta","protocol":"http","server":"%s","conns":50,"repeat":%d,"target_rate":%s,"vegeta":%s}\n' \
    "$server" "$repeat" "$rate" "$report" >>"$RUNS"
  echo "$BENCH_NAME: vegeta $server at $rate/s #$repeat: $(printf '%s' "$report" | grep -o '"99th":[0-9]*' | head -n 1)" >&2
}

# wrk2_run SERVER PORT RATE REPEAT: wrk2 at RATE requests/s, its recorded
# window WINDOW + 0.75 seconds after its 10.25-second calibration; its
# --latency percentiles, turned into nanoseconds, appended to RUNS in the
# shape of vegeta's report (kind wrk2).
wrk2_run() {
  local server=$1 port=$2 rate=$3 repeat=$4
  local w=(timeout -k 5 "$((WINDOW + 41))" taskset -c "$CLIENT_CPUS" "$WRK2" -t1 -c50
    -d "$((WINDOW + 11))s" -R "$rate" --latency "http://127.0.0.1:$port/plaintext")
  if [ "$DRY_RUN" = 1 ]; then
    run "${w[@]}"
    return 0
  fi
  "${w[@]}" >"$tmp/wrk2.out" 2>&1 || true
  local report
  report=$(awk '
    function ns(v) {
      if (v ~ /us$/) { sub(/us$/, "", v); return v * 1e3 }
      if (v ~ /ms$/) { sub(/ms$/, "", v); return v * 1e6 }
      if (v ~ /m$/) { sub(/m$/, "", v); return v * 6e10 }
      if (v ~ /s$/) { sub(/s$/, "", v); return v * 1e9 }
      return -1
    }
    /Latency Distribution \(HdrHistogram - Recorded Latency\)/ { dist = 1; next }
    dist && $1 == "50.000%" { p50 = ns($2) }
    dist && $1 == "90.000%" { p90 = ns($2) }
    dist && $1 == "99.000%" { p99 = ns($2) }
    dist && $1 == "100.000%" { max = ns($2); dist = 0 }
    / requests in / { n = $1 }
    /Non-2xx or 3xx responses:/ { bad += $NF }
    /Socket errors:/ { for (i = 3; i <= NF; i++) { v = $i; sub(/,/, "", v); if (v ~ /^[0-9]+$/) bad += v } }
    /^Requests\/sec:/ { rps = $2 }
    END {
      if (p99 == "" || n == "" || n == 0) { exit 1 }
      printf "{\"latencies\":{\"50th\":%.0f,\"90th\":%.0f,\"99th\":%.0f,\"max\":%.0f},\"requests\":%d,\"rate\":%s,\"success\":%.4f}",
        p50, p90, p99, max, n, rps, (n - bad) / n
    }' "$tmp/wrk2.out") || {
    echo "$BENCH_NAME: wrk2 $server at $rate/s #$repeat gave no latency distribution:" >&2
    tail -n 5 "$tmp/wrk2.out" >&2
    return 0
  }
  printf '{"kind":"wrk2","protocol":"http","server":"%s","conns":50,"repeat":%d,"target_rate":%s,"report":%s}\n' \
    "$server" "$repeat" "$rate" "$report" >>"$RUNS"
  echo "$BENCH_NAME: wrk2 $server at $rate/s #$repeat: $(printf '%s' "$report" | grep -o '"99th":[0-9]*')" >&2
}

port=$BASE_PORT
for repeat in $(seq "$REPEAT_FROM" "$last_repeat"); do
  for proto in $PROTOCOLS; do
    for conns in $CONNS; do
      for server in $(servers_of "$proto"); do
        port=$((port + 1))
        start "$proto" "$server" "$port"
        load_run sweep "$proto" "$server" "$conns" "$repeat" "$port" "$SERVER_PID" -rates "$rates"
        stop "$SERVER_PID"
      done
      # The floors, at one rate for all: a fraction of the reference's
      # capacity, for those of the floor's servers that were measured.
      if [ "$FLOORS" = 1 ] && [ "$proto" != resp ]; then
        ref=netpoll floor_servers=""
        candidates="percore-uring percore-epoll netpoll liburing"
        if [ "$proto" = http ]; then ref=nginx candidates="percore nginx"; fi
        for server in $candidates; do
          if in_list "$server" "$(servers_of "$proto")"; then floor_servers+=" $server"; fi
        done
        cap=0
        if in_list "$ref" "$(servers_of "$proto")"; then cap=$(capacity_of "$proto" "$ref" "$conns" "$repeat"); fi
        if [ "$cap" = 0 ]; then
          echo "$BENCH_NAME: no capacity of $ref for $proto c$conns #$repeat: no floor runs" >&2
        else
          rate=$((cap * FLOOR_PCT / 100))
          for server in $floor_servers; do
            port=$((port + 1))
            start "$proto" "$server" "$port"
            load_run "floor-$ref" "$proto" "$server" "$conns" "$repeat" "$port" "$SERVER_PID" -rate "$rate"
            stop "$SERVER_PID"
          done
        fi
      fi
    done
    if { [ "$VEGETA" = 1 ] || [ -n "$WRK2" ]; } && [ "$proto" = http ]; then
      for server in percore nginx; do
        if ! in_list "$server" "$HTTP_SERVERS"; then continue; fi
        port=$((port + 1))
        start http "$server" "$port"
        for rate in $VEGETA_RATES; do
          load_run check http "$server" 50 "$repeat" "$port" "$SERVER_PID" -rate "$rate"
          if [ "$VEGETA" = 1 ]; then vegeta_run "$server" "$port" "$rate" "$repeat"; fi
          if [ -n "$WRK2" ]; then wrk2_run "$server" "$port" "$rate" "$repeat"; fi
        done
        stop "$SERVER_PID"
      done
    fi
  done
done

summarise
echo "$BENCH_NAME: runs in $RUNS, summary in $OUT/latency-summary.md" >&2
