#!/usr/bin/env bash
# bench-http.sh: examples/http against nginx, h2o, fasthttp, gnet and net/http,
# and examples/http_proxy against nginx as a reverse proxy, judged by wrk
# (BENCH=http make bench, or scripts/bench.sh with BENCH=http).
#
# Plaintext: each server runs pinned to SERVER_CPUS with one loop, worker or
# thread (GOMAXPROCS=1 for the Go ones), and wrk, pinned to CLIENT_CPUS, runs
#   wrk -t1 -cCONNS -dDURATIONs --latency [-s pipeline.lua -- P] URL/plaintext
# for each P in PIPELINES (1: one request in flight per connection; 16: the
# Lua script writes 16 requests at a time). Servers and pipelines run
# interleaved, REPEATS times (GNET_REPEATS for gnet, which is bimodal here).
# Each run follows a WARMUP-second wrk run that is not recorded. For each run
# it records requests/s, p99, wrk's errors, the server's CPU per request
# (utime+stime from /proc/PID/stat over the run, divided by the requests wrk
# counted) and the busy share of server and client (flagged S and C at 85%).
# examples/bench/load's HTTP mode (keep-alive, pipelined, every response checked)
# measures the servers named in LOADCHECK too, right after wrk, as a
# cross-check of wrk's count and with a cheaper client ("NAME/load" rows);
# LOADCHECK="" turns it off.
#
# runtime/httpd (issue 25): percore-old is examples/http as it was before
# it was rewritten on runtime/httpd, built from git ref OLD_HTTP_REF (its
# own server code, the A/B of the package's cost); percore-old-rt is
# the same example's code built against this tree's runtime (a go build
# overlay), so that the A/B is the package's alone, without what changed
# in the runtime since OLD_HTTP_REF; nethttp-adapt is
# examples/bench/baseline/httpd -serve adapt, the same http.ServeMux as
# nethttp (baseline/stdmux) through httpd.Adapt on one loop. The JSON rows
# (JSON_SERVERS, P 1, URL /json) are named NAME/json. The blocking rows
# (SLEEP_SERVERS, P 1, CONNS connections, URL /sleep, a 2 ms time.Sleep per
# request) are sleep-nethttp (net/http, a goroutine per connection),
# sleep-adapt (the ServeMux through httpd.Adapt) and sleep-httpd (an inline
# handler handing the sleep to httpd.Server.Go); they are judged by
# requests/s, not CPU. The last three run with GOMAXPROCS=2 on the one
# server CPU (a P for the worker pool beside the loop's).
#
# Proxy (PROXY=1): an upstream nginx (plaintext, one worker) runs on
# CLIENT_CPUS; in front of it, on SERVER_CPUS, each of PROXIES:
# examples/http_proxy on io_uring (proxy-percore) or epoll
# (proxy-percore-epoll), or nginx with proxy_pass to an upstream keepalive
# pool (proxy-nginx); wrk
# -c CONNS through the proxy. The figure is the proxy's own CPU per request.
#
# nginx runs as BENCHMARKING.md says: worker_processes 1, master_process
# off, daemon off, access_log off, keepalive_requests raised, `return 200
# "Hello, World!"`. h2o runs with num-threads 1 and an mruby handler (h2o
# 2.2 has no `return`; TechEmpower's h2o entry is a C program on libh2o,
# not the server). Both configurations, and the Lua script, are generated
# into a temporary directory.
#
# What it changes: it builds the Go servers into a temporary directory
# (removed on exit, with the configurations), listens on 127.0.0.1 ports
# from BASE_PORT up, and writes OUT/http-runs.tsv and OUT/http-summary.md.
# Undo: delete OUT. It changes no system setting.
#
# Bounded in time: each wrk run is killed after DURATION+30 seconds, and a
# server that does not listen within 10 seconds fails the script. With the
# defaults (3 repeats, 5 for gnet, 7 servers, 2 pipelines, 10 s runs, the
# proxy) it takes about 12 minutes; DURATION=5 about 7.
#
# Usage: scripts/bench-http.sh [--dry-run]
#   --dry-run  print what it would run, and run nothing
# Environment (defaults in parentheses):
#   REPEATS (3)  GNET_REPEATS (5)  DURATION (10)  WARMUP (1)  CONNS (100)
#   PIPELINES ("1 16")  SERVER_CPUS (0)  CLIENT_CPUS (1)  BASE_PORT (28300)
#   SERVERS ("percore-uring percore-epoll percore-old nginx h2o fasthttp gnet nethttp nethttp-adapt";
#   also percore-uring-plain: percore-uring with -uring-features=none; percore-old-rt: percore-old on this runtime;
#   percore-uring-bundles: with -uring-features=registered_ring,bundles; percore-uring-small and
#   percore-uring-bundles-small: those with -buffer-size SMALL_BUFFER (4096);
#   percore-base: examples/http and everything under it at git ref BASE_REF, the before of a change in one run)
#   JSON_SERVERS ("percore-uring percore-old nethttp nethttp-adapt")
#   SLEEP_SERVERS ("sleep-nethttp sleep-adapt sleep-httpd")
#   OLD_HTTP_REF (the parent of the last commit that touched examples/http/server.go)  BASE_REF (main)
#   PROXY (1)  PROXIES ("proxy-percore proxy-nginx"; proxy-percore-epoll too, and proxy-percore-skip:
#   proxy-percore with -uring-features=registered_ring,skip_sends)  LOADCHECK ("percore-uring gnet fasthttp")  OUT (docs/results/HOST-DATE-http)
set -euo pipefail

# shellcheck source=scripts/lib/bench-common.sh
. "$(dirname "$0")/lib/bench-common.sh"
bench_args "$@"

REPEATS=${REPEATS:-3}
GNET_REPEATS=${GNET_REPEATS:-5}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-1}
CONNS=${CONNS:-100}
PIPELINES=${PIPELINES:-1 16}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
BASE_PORT=${BASE_PORT:-28300}
SERVERS=${SERVERS-percore-uring percore-epoll percore-old nginx h2o fasthttp gnet nethttp nethttp-adapt}
JSON_SERVERS=${JSON_SERVERS-percore-uring percore-old nethttp nethttp-adapt}
SLEEP_SERVERS=${SLEEP_SERVERS-sleep-nethttp sleep-adapt sleep-httpd}
OLD_HTTP_REF=${OLD_HTTP_REF:-$(git rev-list -1 HEAD -- examples/http/server.go 2>/dev/null || true)^}
BASE_REF=${BASE_REF:-main}
SMALL_BUFFER=${SMALL_BUFFER:-4096}
PROXY=${PROXY:-1}
PROXIES=${PROXIES-proxy-percore proxy-nginx}
LOADCHECK=${LOADCHECK-percore-uring gnet fasthttp}
OUT=${OUT:-docs/results/$(hostname)-$(date +%Y%m%d)-http}

bench_need "Debian: apt-get install -y util-linux wrk nginx-light h2o coreutils; scripts/ensure-tools.sh installs all of them but h2o" taskset wrk nginx h2o go timeout

bench_tmp

run go build -o "$tmp/" ./examples/http ./examples/http_proxy
run go build -C examples/bench -o "$tmp/" ./load ./baseline/fasthttp ./baseline/nethttp ./baseline/httpd
if [[ " $SERVERS $JSON_SERVERS " == *" percore-old "* ]]; then
  # examples/http before runtime/httpd, from git: the A/B of the package.
  run mkdir -p "$tmp/old"
  run bash -c "git archive '$OLD_HTTP_REF' | tar -x -C '$tmp/old'"
  run go build -C "$tmp/old" -o "$tmp/http-old" ./examples/http
fi
if [[ " $SERVERS $JSON_SERVERS " == *" percore-old-rt "* ]]; then
  # The same example's files over this tree: only the server code is old.
  run mkdir -p "$tmp/oldrt"
  for f in main.go server.go; do
    if [ "$DRY_RUN" = 0 ]; then git show "$OLD_HTTP_REF:examples/http/$f" >"$tmp/oldrt/$f"; fi
  done
  if [ "$DRY_RUN" = 0 ]; then
    printf '{"Replace":{"%s/examples/http-old-rt/main.go":"%s/oldrt/main.go","%s/examples/http-old-rt/server.go":"%s/oldrt/server.go"}}\n' \
      "$PWD" "$tmp" "$PWD" "$tmp" >"$tmp/oldrt/overlay.json"
  fi
  run go build -overlay "$tmp/oldrt/overlay.json" -o "$tmp/http-old-rt" ./examples/http-old-rt
fi
if [[ " $SERVERS $JSON_SERVERS " == *" percore-base "* ]]; then
  # The whole tree at BASE_REF: a change's before and after, interleaved.
  run mkdir -p "$tmp/base"
  run bash -c "git archive '$BASE_REF' | tar -x -C '$tmp/base'"
  run go build -C "$tmp/base" -o "$tmp/http-base" ./examples/http
fi
run go build -C examples/bench -tags=poll_opt -o "$tmp/" ./baseline/gnethttp
hz=$(getconf CLK_TCK)

cat >"$tmp/pipeline.lua" <<'EOF'
-- wrk: write P requests at a time (wrk counts each response).
init = function(args)
  local depth = tonumber(args[1]) or 1
  local r = {}
  for i = 1, depth do r[i] = wrk.format() end
  req = table.concat(r)
end
request = function() return req end
EOF

# nginx_conf NAME PORT BODY writes a one-worker nginx configuration whose
# server block holds BODY.
nginx_conf() {
  local name=$1 port=$2 body=$3
  mkdir -p "$tmp/$name"
  cat >"$tmp/$name/nginx.conf" <<EOF
worker_processes 1;
master_process off;
daemon off;
pid $tmp/$name/nginx.pid;
error_log $tmp/$name/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 10000000;
  keepalive_timeout 75s;
  client_body_temp_path $tmp/$name/body;
  proxy_temp_path $tmp/$name/proxy;
  fastcgi_temp_path $tmp/$name/fastcgi;
  uwsgi_temp_path $tmp/$name/uwsgi;
  scgi_temp_path $tmp/$name/scgi;
  upstream up { server 127.0.0.1:$UPSTREAM_PORT; keepalive 128; keepalive_requests 10000000; }
  server {
    listen 127.0.0.1:$port;
    $body
  }
}
EOF
}

h2o_conf() {
  local port=$1
  mkdir -p "$tmp/h2o"
  cat >"$tmp/h2o/h2o.conf" <<EOF
user: root
num-threads: 1
http1-request-timeout: 75
listen:
  host: 127.0.0.1
  port: $port
hosts:
  default:
    paths:
      /plaintext:
        mruby.handler: |
          Proc.new do |env|
            [200, {"content-type" => "text/plain"}, ["Hello, World!"]]
          end
EOF
}

plaintext_loc='location /plaintext { default_type text/plain; return 200 "Hello, World!"; }'
proxy_loc='location / { proxy_pass http://up; proxy_http_version 1.1; proxy_set_header Connection ""; }'

# start NAME PORT CPUS starts a server pinned to CPUS; it sets SERVER_PID.
start() {
  local name=$1 port=$2 cpus=$3 cmd
  local go=(env GOMAXPROCS=1 taskset -c "$cpus")
  case "$name" in
    percore-uring | percore-epoll)
      cmd=("${go[@]}" "$tmp/http" -addr "127.0.0.1:$port" -backend "${name#percore-}" -cores "${cpus%%[,-]*}")
      ;;
    percore-uring-plain) # percore-uring without issue 28's io_uring features, for their A/B
      cmd=("${go[@]}" "$tmp/http" -addr "127.0.0.1:$port" -backend uring -cores "${cpus%%[,-]*}" -uring-features=none)
      ;;
    percore-uring-bundles | percore-uring-small | percore-uring-bundles-small)
      # Receive bundles (percore.UringBundles, docs/decisions/0071) and
      # receive buffers of SMALL_BUFFER bytes, for their A/B.
      cmd=("${go[@]}" "$tmp/http" -addr "127.0.0.1:$port" -backend uring -cores "${cpus%%[,-]*}")
      if [[ "$name" == *bundles* ]]; then cmd+=("-uring-features=registered_ring,bundles"); fi
      if [[ "$name" == *small ]]; then cmd+=(-buffer-size "$SMALL_BUFFER"); fi
      ;;
    percore-old)
      cmd=("${go[@]}" "$tmp/http-old" -addr "127.0.0.1:$port" -backend uring -cores "${cpus%%[,-]*}")
      ;;
    percore-old-rt)
      cmd=("${go[@]}" "$tmp/http-old-rt" -addr "127.0.0.1:$port" -backend uring -cores "${cpus%%[,-]*}")
      ;;
    percore-base)
      cmd=("${go[@]}" "$tmp/http-base" -addr "127.0.0.1:$port" -backend uring -cores "${cpus%%[,-]*}")
      ;;
    # The offloading servers get a second P on the same CPU, for the
    # worker pool: the loop's locked thread holds the first, and work it
    # hands off would otherwise wait for sysmon to retake that P while the
    # loop sleeps in the kernel (runtime/httpd's doc, # Caveats).
    nethttp-adapt | sleep-adapt) cmd=(env GOMAXPROCS=2 taskset -c "$cpus" "$tmp/httpd" -addr "127.0.0.1:$port" -backend uring -serve adapt) ;;
    sleep-httpd) cmd=(env GOMAXPROCS=2 taskset -c "$cpus" "$tmp/httpd" -addr "127.0.0.1:$port" -backend uring -serve inline) ;;
    sleep-nethttp) cmd=("${go[@]}" "$tmp/nethttp" -addr "127.0.0.1:$port") ;;
    proxy-percore | proxy-percore-epoll | proxy-percore-skip)
      local backend=uring
      if [ "$name" = proxy-percore-epoll ]; then backend=epoll; fi
      cmd=("${go[@]}" "$tmp/http_proxy" -addr "127.0.0.1:$port" -backend "$backend" -cores "${cpus%%[,-]*}"
        -upstream "127.0.0.1:$UPSTREAM_PORT" -max 128)
      # Issue 28's A/B: the default features and skipped sends (0057).
      if [ "$name" = proxy-percore-skip ]; then cmd+=("-uring-features=registered_ring,skip_sends"); fi
      ;;
    fasthttp) cmd=("${go[@]}" "$tmp/fasthttp" -addr "127.0.0.1:$port") ;;
    nethttp) cmd=("${go[@]}" "$tmp/nethttp" -addr "127.0.0.1:$port") ;;
    gnet) cmd=("${go[@]}" "$tmp/gnethttp" -addr "127.0.0.1:$port" -loops 1) ;;
    nginx | upstream-nginx)
      nginx_conf "$name$port" "$port" "$plaintext_loc"
      cmd=(taskset -c "$cpus" nginx -c "$tmp/$name$port/nginx.conf" -p "$tmp/$name$port")
      ;;
    proxy-nginx)
      nginx_conf "$name$port" "$port" "$proxy_loc"
      cmd=(taskset -c "$cpus" nginx -c "$tmp/$name$port/nginx.conf" -p "$tmp/$name$port")
      ;;
    h2o)
      h2o_conf "$port"
      cmd=(taskset -c "$cpus" h2o -c "$tmp/h2o/h2o.conf")
      ;;
    *)
      echo "bench-http.sh: unknown server $name" >&2
      exit 2
      ;;
  esac
  if [ "$DRY_RUN" = 1 ]; then
    printf '+ %s &\n' "${cmd[*]}"
    SERVER_PID=0
    return 0
  fi
  "${cmd[@]}" >"$tmp/$name.log" 2>&1 &
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

# measure NAME PORT P PID REPEAT [PATH [ROW]]: one wrk run (after a
# warm-up) of PATH (/plaintext), appended to the runs file as ROW (NAME).
measure() {
  local name=${7:-$1} port=$2 p=$3 pid=$4 repeat=$5 url="http://127.0.0.1:$2${6:-/plaintext}"
  local script=()
  if [ "$p" -gt 1 ]; then script=(-s "$tmp/pipeline.lua" -- "$p"); fi
  local wrk=(timeout -k 5 $((DURATION + 30)) taskset -c "$CLIENT_CPUS" wrk -t1 -c"$CONNS")
  if [ "$DRY_RUN" = 1 ]; then
    run "${wrk[@]}" -d"${DURATION}s" --latency "$url" "${script[@]}"
    return 0
  fi
  "${wrk[@]}" -d"${WARMUP}s" "$url" "${script[@]}" >/dev/null 2>&1 || true
  local before after out cpu_s
  before=$(cpu_ticks "$pid")
  TIMEFORMAT='%3U %3S'
  { time "${wrk[@]}" -d"${DURATION}s" --latency "$url" "${script[@]}" >"$tmp/wrk.out" 2>&1; } 2>"$tmp/wrk.time" || true
  after=$(cpu_ticks "$pid")
  cpu_s=$(awk '{ print $1 + $2 }' "$tmp/wrk.time")
  out=$(cat "$tmp/wrk.out")
  cp "$tmp/wrk.out" "$OUT/raw/${name//\//-}-P$p-$repeat.txt"
  printf '%s\n' "$out" | awk -v s="$name" -v p="$p" -v r="$repeat" -v t=$((after - before)) -v hz="$hz" \
    -v ccpu="$cpu_s" -v d="$DURATION" '
    function us(v) {
      if (v ~ /us$/) return v + 0
      if (v ~ /ms$/) return v * 1000
      if (v ~ /s$/) return v * 1e6
      return v
    }
    /requests in/ { n = $1; secs = $4 + 0 }
    /^Requests\/sec:/ { rps = $2 }
    /^ +99%/ { p99 = us($2) }
    /Socket errors:/ { errs += $4 + $6 + $8 + $10 }
    /Non-2xx or 3xx/ { errs += $5 }
    END {
      if (secs == 0) secs = d
      cpu = (n > 0) ? t * 1e9 / hz / n : "NA"
      printf "%s\t%s\t%s\t%.0f\t%s\t%s\t%.0f\t%.2f\t%.2f\t%d\n", s, p, r, rps, p99, n, cpu,
        t / hz / secs, ccpu / secs, errs
    }' >>"$OUT/http-runs.tsv"
  tail -n 1 "$OUT/http-runs.tsv" | awk -F'\t' '{ printf "bench-http.sh: %s -P %s repeat %s: %s req/s, %s ns of server CPU per request\n", $1, $2, $3, $4, $7 }' >&2
}

# loadcheck NAME PORT P PID REPEAT: examples/bench/load's HTTP mode on the same server.
loadcheck() {
  local name=$1 port=$2 p=$3 pid=$4 repeat=$5
  local cmd=(timeout -k 5 $((DURATION + 30)) taskset -c "$CLIENT_CPUS" "$tmp/load" -addr "127.0.0.1:$port"
    -http /plaintext -http-body "Hello, World!" -conns "$CONNS" -pipeline "$p" -warmup "$WARMUP"
    -seconds "$DURATION" -server-pid "$pid" -json)
  if [ "$DRY_RUN" = 1 ]; then
    run "${cmd[@]}"
    return 0
  fi
  "${cmd[@]}" 2>/dev/null | awk -v s="$name/load" -v p="$p" -v r="$repeat" '
    {
      rps = extract($0, "rps"); p99 = extract($0, "p99_us"); n = extract($0, "requests")
      cpu = extract($0, "server_cpu_us_per_req"); sb = extract($0, "server_busy_pct") / 100; cb = extract($0, "client_busy_pct") / 100
      e = extract($0, "errors") + extract($0, "mismatches")
      printf "%s\t%s\t%s\t%.0f\t%s\t%s\t%.0f\t%.2f\t%.2f\t%d\n", s, p, r, rps, p99, n, cpu * 1000, sb, cb, e
    }
    function extract(s, k,   m) {
      if (match(s, "\"" k "\":[-0-9.e+]+")) { m = substr(s, RSTART, RLENGTH); sub(/^[^:]*:/, "", m); return m + 0 }
      return 0
    }' >>"$OUT/http-runs.tsv" || true
}

if [ "$DRY_RUN" = 0 ]; then
  mkdir -p "$OUT/raw"
  printf 'server\tpipeline\trepeat\trps\tp99_us\trequests\tcpu_ns_per_req\tserver_busy\tclient_busy\terrors\n' >"$OUT/http-runs.tsv"
fi

port=$BASE_PORT
UPSTREAM_PORT=$((BASE_PORT + 999))
max_repeats=$REPEATS
if [ "$GNET_REPEATS" -gt "$max_repeats" ] && [[ " $SERVERS " == *" gnet "* ]]; then max_repeats=$GNET_REPEATS; fi
for repeat in $(seq "$max_repeats"); do
  for name in $SERVERS; do
    if [ "$repeat" -gt "$REPEATS" ] && [ "$name" != gnet ]; then continue; fi
    port=$((port + 1))
    start "$name" "$port" "$SERVER_CPUS"
    pid=$SERVER_PID
    for p in $PIPELINES; do
      measure "$name" "$port" "$p" "$pid" "$repeat"
      if [[ " $LOADCHECK " == *" $name "* ]]; then loadcheck "$name" "$port" "$p" "$pid" "$repeat"; fi
    done
    stop "$pid"
  done
  if [ "$repeat" -le "$REPEATS" ]; then
    for name in $JSON_SERVERS; do
      port=$((port + 1))
      start "$name" "$port" "$SERVER_CPUS"
      measure "$name" "$port" 1 "$SERVER_PID" "$repeat" /json "$name/json"
      stop "$SERVER_PID"
    done
    for name in $SLEEP_SERVERS; do
      port=$((port + 1))
      start "$name" "$port" "$SERVER_CPUS"
      measure "$name" "$port" 1 "$SERVER_PID" "$repeat" /sleep
      stop "$SERVER_PID"
    done
  fi
  if [ "$PROXY" = 1 ] && [ "$repeat" -le "$REPEATS" ]; then
    start upstream-nginx "$UPSTREAM_PORT" "$CLIENT_CPUS"
    upstream_pid=$SERVER_PID
    for name in $PROXIES; do
      port=$((port + 1))
      start "$name" "$port" "$SERVER_CPUS"
      measure "$name" "$port" 1 "$SERVER_PID" "$repeat"
      stop "$SERVER_PID"
    done
    stop "$upstream_pid"
  fi
done

if [ "$DRY_RUN" = 1 ]; then exit 0; fi

# The summary: medians (and the spread) per server and pipeline; ratios to
# nginx's figures at the same pipeline (proxies: to proxy-nginx).
awk -F'\t' '
  NR == 1 { next }
  {
    k = $1 SUBSEP $2; keys[k] = 1
    rps[k] = rps[k] " " $4; p99[k] = p99[k] " " $5; cpu[k] = cpu[k] " " $7
    sb[k] = sb[k] " " $8; cb[k] = cb[k] " " $9; err[k] += $10; n[k]++
  }
  function sort(list, a,   m, i, j, t) {
    m = split(list, a, " ")
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return m
  }
  function median(list,   a, m) { m = sort(list, a); return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
  function spread(list,   a, m) { m = sort(list, a); return sprintf("%.0f-%.0f", a[1] / 1000, a[m] / 1000) }
  END {
    print "| server | P | runs | requests/s (median, range in k) | x nginx | p99 us | server CPU us/req | x nginx | busy | errors |"
    print "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"
    for (k in keys) { m_rps[k] = median(rps[k]); m_cpu[k] = median(cpu[k]) }
    c = 0
    for (k in keys) order[++c] = k
    for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
    for (i = 1; i <= c; i++) {
      k = order[i]; split(k, f, SUBSEP)
      ref = (f[1] ~ /^proxy-/) ? "proxy-nginx" SUBSEP f[2] : "nginx" SUBSEP f[2]
      flag = ""
      if (median(sb[k]) >= 0.85) flag = flag "S"
      if (median(cb[k]) >= 0.85) flag = flag "C"
      # wrk reports 0 for percentiles it lost (it does under pipelining).
      q = median(p99[k]); q = (q > 0) ? sprintf("%.0f", q) : "-"
      printf "| %s | %s | %d | %.1fk (%s) | %.2f | %s | %.2f | %.2f | %s | %d |\n", f[1], f[2], n[k], m_rps[k] / 1000, spread(rps[k]),
        (ref in m_rps && m_rps[ref] > 0) ? m_rps[k] / m_rps[ref] : 0, q, m_cpu[k] / 1000,
        (ref in m_cpu && m_cpu[ref] > 0) ? m_cpu[k] / m_cpu[ref] : 0, flag, err[k]
    }
    # The issue-18 floors, from the medians.
    print ""
    for (i = 1; i <= c; i++) {
      k = order[i]; split(k, f, SUBSEP)
      if (f[1] !~ /^percore-(uring|epoll)(\/load)?$/) continue
      sfx = (f[1] ~ /\/load$/) ? "/load" : ""
      g = "gnet" sfx SUBSEP f[2]; h = "fasthttp" sfx SUBSEP f[2]; x = "nginx" SUBSEP "1"
      if (f[2] > 1 && (g in m_rps) && (h in m_rps))
        printf "- %s -P %s: %.2fx gnet (floor 1.2), %.2fx fasthttp (floor 1.5) in requests/s; CPU per request %.2fx gnet, %.2fx fasthttp\n",
          f[1], f[2], m_rps[k] / m_rps[g], m_rps[k] / m_rps[h], m_cpu[k] / m_cpu[g], m_cpu[k] / m_cpu[h]
      if (f[2] == 1 && (x in m_cpu) && sfx == "")
        printf "- %s -P 1: server CPU per request %.2fx nginx -P 1 (floor 1.0)\n", f[1], m_cpu[k] / m_cpu[x]
    }
    # The issue-25 floors: the package against the example it replaced,
    # the adapter against net/http on the same ServeMux, the blocking
    # handler against net/http.
    for (i = 1; i <= c; i++) {
      k = order[i]; split(k, f, SUBSEP)
      if (f[1] == "percore-uring" || f[1] == "percore-uring/json") {
        o = (f[1] ~ /json$/ ? "percore-old/json" : "percore-old") SUBSEP f[2]
        if (o in m_cpu)
          printf "- %s -P %s: CPU per request %.2fx the pre-package examples/http (ceiling 1.05)\n", f[1], f[2], m_cpu[k] / m_cpu[o]
        o = (f[1] ~ /json$/ ? "percore-old-rt/json" : "percore-old-rt") SUBSEP f[2]
        if (o in m_cpu)
          printf "- %s -P %s: CPU per request %.2fx the pre-package examples/http on this runtime (the package alone)\n", f[1], f[2], m_cpu[k] / m_cpu[o]
        o = (f[1] ~ /json$/ ? "percore-base/json" : "percore-base") SUBSEP f[2]
        if (o in m_cpu)
          printf "- %s -P %s: CPU per request %.2fx percore-base (BASE_REF)\n", f[1], f[2], m_cpu[k] / m_cpu[o]
      }
      if (f[1] == "nethttp-adapt" || f[1] == "nethttp-adapt/json") {
        o = (f[1] ~ /json$/ ? "nethttp/json" : "nethttp") SUBSEP f[2]
        if (o in m_cpu)
          printf "- %s -P %s: %.2fx net/http in requests/s (floor 1.0), CPU per request %.2fx (ceiling 0.8)\n", f[1], f[2],
            m_rps[k] / m_rps[o], m_cpu[k] / m_cpu[o]
      }
      if (f[1] == "sleep-adapt" || f[1] == "sleep-httpd") {
        o = "sleep-nethttp" SUBSEP f[2]
        if (o in m_rps)
          printf "- %s (2 ms sleep): %.2fx net/http in requests/s (floor 1.0)\n", f[1], m_rps[k] / m_rps[o]
      }
    }
    if (("proxy-percore" SUBSEP "1") in m_cpu && ("proxy-nginx" SUBSEP "1") in m_cpu)
      printf "- proxy: examples/http_proxy CPU per request %.2fx nginx proxy_pass (floor 1.1)\n",
        m_cpu["proxy-percore" SUBSEP "1"] / m_cpu["proxy-nginx" SUBSEP "1"]
  }' "$OUT/http-runs.tsv" >"$OUT/http-summary.md"
cat "$OUT/http-summary.md"
echo "bench-http.sh: runs in $OUT/http-runs.tsv, summary in $OUT/http-summary.md" >&2
