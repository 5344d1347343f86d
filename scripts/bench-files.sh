#!/usr/bin/env bash
# bench-files.sh: examples/file_server against nginx and net/http's
# FileServer, judged by wrk (BENCH=files make bench, or scripts/bench.sh with
# BENCH=files). Each server runs pinned to SERVER_CPU with one loop, one
# worker or GOMAXPROCS=1: file_server on io_uring and on epoll, nginx with
#   worker_processes 1; worker_cpu_affinity (SERVER_CPU); master_process off;
#   daemon off; access_log off; sendfile on; keepalive_requests and
#   keepalive_timeout raised
# and examples/bench/baseline/httpfile (http.FileServer). wrk -t1 -cCONNS, pinned
# to CLIENT_CPU, fetches each of three files (4 KiB, 256 KiB, 16 MiB; in the
# page cache after the warm-up) for DURATION, servers and sizes interleaved,
# REPEATS times. Each run records requests/s, the transfer rate, and the
# server's CPU per request (utime+stime from /proc/PID/stat over the run,
# divided by the requests wrk counted), and flags a run S when the server
# used 85% or more of its CPU.
#
# What it changes: it builds the servers into a temporary directory (with
# the served files and nginx's configuration and temporary paths; removed
# on exit), listens on 127.0.0.1 ports from BASE_PORT up, and writes
# OUT/files-runs.tsv and OUT/files-summary.md. Undo: delete OUT. It changes
# no system setting.
#
# Bounded in time: each wrk run is killed after DURATION + 30 seconds, and a
# server that does not listen within 10 seconds fails the script. With the
# defaults (3 repeats, 4 servers, 3 sizes, 5 s each) it takes about 4
# minutes.
#
# Usage: scripts/bench-files.sh [--dry-run]
#   --dry-run  print what it would run, and run nothing
# Environment (defaults in parentheses):
#   REPEATS (3)  SERVER_CPU (0)  CLIENT_CPU (1)  CONNS (50)  DURATION (5)
#   SIZES ("4k 256k 16m")  BASE_PORT (27400)
#   FILE_SERVER_FLAGS (extra flags for examples/file_server, e.g. "-small 0")
#   SERVERS ("percore-uring percore-epoll nginx nethttp")
#   OUT (docs/results/HOST-DATE-files)
set -euo pipefail

# shellcheck source=scripts/lib/bench-common.sh
. "$(dirname "$0")/lib/bench-common.sh"
bench_args "$@"

REPEATS=${REPEATS:-3}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CONNS=${CONNS:-50}
DURATION=${DURATION:-5}
SIZES=${SIZES:-4k 256k 16m}
BASE_PORT=${BASE_PORT:-27400}
SERVERS=${SERVERS:-percore-uring percore-epoll nginx nethttp}
OUT=${OUT:-docs/results/$(hostname)-$(date +%Y%m%d)-files}

NGINX=$(command -v nginx || echo /usr/sbin/nginx)
bench_need "Debian: apt-get install -y util-linux wrk nginx-light" taskset wrk go "$NGINX"

bench_tmp

run go build -o "$tmp/file_server" ./examples/file_server
run go build -C examples/bench -o "$tmp/httpfile" ./baseline/httpfile
mkdir -p "$tmp/www" "$tmp/nginx"
for s in $SIZES; do
  case "$s" in
    *k) bytes=$((${s%k} * 1024)) ;;
    *m) bytes=$((${s%m} * 1024 * 1024)) ;;
    *) bytes=$s ;;
  esac
  run head -c "$bytes" /dev/urandom >"$tmp/www/file-$s"
done
hz=$(getconf CLK_TCK)

# nginx_conf PORT writes nginx's configuration for one run.
nginx_conf() {
  local mask
  mask=$(printf '%x' $((1 << SERVER_CPU)))
  cat >"$tmp/nginx/nginx.conf" <<CONF
worker_processes 1;
worker_cpu_affinity $mask;
master_process off;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  client_body_temp_path $tmp/nginx/body;
  proxy_temp_path $tmp/nginx/proxy;
  fastcgi_temp_path $tmp/nginx/fastcgi;
  uwsgi_temp_path $tmp/nginx/uwsgi;
  scgi_temp_path $tmp/nginx/scgi;
  server {
    listen 127.0.0.1:$1 reuseport;
    root $tmp/www;
  }
}
CONF
}

# start_server NAME PORT starts a server pinned to SERVER_CPU; it sets SERVER_PID.
start_server() {
  local name=$1 port=$2 cmd
  case "$name" in
    percore-uring | percore-epoll)
      # shellcheck disable=SC2206 # FILE_SERVER_FLAGS is a list of flags
      cmd=(env GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$tmp/file_server" -addr "127.0.0.1:$port"
        -root "$tmp/www" -backend "${name#percore-}" -cpus "$SERVER_CPU" ${FILE_SERVER_FLAGS:-})
      ;;
    nethttp)
      cmd=(env GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$tmp/httpfile" -addr "127.0.0.1:$port" -root "$tmp/www")
      ;;
    nginx)
      if [ "$DRY_RUN" = 0 ]; then nginx_conf "$port"; fi
      cmd=(taskset -c "$SERVER_CPU" "$NGINX" -e "$tmp/nginx/error.log" -p "$tmp/nginx" -c "$tmp/nginx/nginx.conf")
      ;;
    *)
      echo "bench-files.sh: unknown server $name" >&2
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

if [ "$DRY_RUN" = 0 ]; then
  mkdir -p "$OUT"
  printf 'server\tsize\trepeat\trps\ttransfer\trequests\tcpu_ns_per_req\tcpu_busy\n' >"$OUT/files-runs.tsv"
fi

port=$BASE_PORT
for repeat in $(seq "$REPEATS"); do
  for name in $SERVERS; do
    port=$((port + 1))
    start_server "$name" "$port"
    for s in $SIZES; do
      url="http://127.0.0.1:$port/file-$s"
      if [ "$DRY_RUN" = 1 ]; then
        run taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" "$url"
        continue
      fi
      # Warm-up: the file into the page cache, the connections open.
      timeout -k 5 30 taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d1s "$url" >/dev/null 2>&1 || true
      before=$(cpu_ticks "$SERVER_PID")
      t0=$(date +%s.%N)
      out=$(timeout -k 5 $((DURATION + 30)) taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" "$url" 2>&1) || out=""
      t1=$(date +%s.%N)
      after=$(cpu_ticks "$SERVER_PID")
      reqs=$(printf '%s\n' "$out" | awk '/requests in/ { print $1 }')
      rps=$(printf '%s\n' "$out" | awk '/^Requests\/sec/ { print $2 }')
      xfer=$(printf '%s\n' "$out" | awk '/^Transfer\/sec/ { print $2 }')
      errs=$(printf '%s\n' "$out" | awk '/Non-2xx|Socket errors/ { print }')
      if [ -n "$errs" ]; then echo "bench-files.sh: $name $s: $errs" >&2; fi
      cpu=NA
      busy=NA
      if [ -n "$reqs" ] && [ "$reqs" -gt 0 ]; then
        cpu=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$reqs" 'BEGIN { printf "%.0f", t * 1e9 / hz / n }')
        busy=$(awk -v t=$((after - before)) -v hz="$hz" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", t / hz / (b - a) }')
      fi
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$s" "$repeat" "${rps:-0}" "${xfer:-0}" "${reqs:-0}" "$cpu" "$busy" \
        >>"$OUT/files-runs.tsv"
      echo "bench-files.sh: $name $s repeat $repeat: ${rps:-0} req/s, ${cpu} ns of server CPU per request (busy $busy)" >&2
    done
    if [ "$DRY_RUN" = 0 ]; then
      kill "$SERVER_PID"
      wait "$SERVER_PID" 2>/dev/null || true
    fi
  done
done

if [ "$DRY_RUN" = 1 ]; then exit 0; fi

awk -F'\t' '
  NR == 1 { next }
  { k = $1 SUBSEP $2; rps[k] = rps[k] " " $4; cpu[k] = cpu[k] " " $7; busy[k] = busy[k] " " $8
    if (!(k in keys) || $4 + 0 < lo[k]) lo[k] = $4 + 0
    if (!(k in keys) || $4 + 0 > hi[k]) hi[k] = $4 + 0
    keys[k] = 1 }
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    print "| server | size | requests/s (median, range) | server CPU us/request | server busy | CPU vs nginx | rps vs net/http |"
    print "|---|---|---:|---:|---:|---:|---:|"
    n = 0
    for (k in keys) { order[++n] = k; m[k] = median(rps[k]); c[k] = median(cpu[k]); b[k] = median(busy[k]) }
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, f, SUBSEP); ng = "nginx" SUBSEP f[2]; nh = "nethttp" SUBSEP f[2]
      printf "| %s | %s | %.0f (%.0f-%.0f) | %.2f | %.2f%s | %.2f | %.2f |\n", f[1], f[2], m[k], lo[k], hi[k], c[k] / 1000,
        b[k], (b[k] >= 0.85 ? " S" : ""), (ng in c && c[ng] > 0) ? c[k] / c[ng] : 0, (nh in m && m[nh] > 0) ? m[k] / m[nh] : 0
    }
  }' "$OUT/files-runs.tsv" >"$OUT/files-summary.md"
cat "$OUT/files-summary.md"
