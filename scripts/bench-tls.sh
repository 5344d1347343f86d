#!/usr/bin/env bash
# bench-tls.sh: HTTPS, examples/http with -tls-cert/-tls-key (TLS under
# Conn, issue 26) against nginx (ssl, one worker, session tickets on) and
# net/http (crypto/tls), judged by wrk (BENCH=tls make bench, or
# scripts/bench.sh with BENCH=tls).
#
# Each server runs pinned to SERVER_CPUS; wrk, pinned to CLIENT_CPUS, runs
#   wrk -t1 -cCONNS -dDURATIONs --latency https://127.0.0.1:PORT/plaintext
# twice per server: keep-alive (the "ka" rows), and with "Connection: close"
# (the "close" rows: every request is a new connection and a full
# handshake; wrk's OpenSSL client resumes no session). The plain-HTTP rows
# (percore-plain, nginx-plain) give the cost of TLS per request. Servers run
# interleaved, REPEATS times, each run after a WARMUP-second wrk run that
# is not recorded. Every server is offered TLS 1.3 with X25519 and
# AES-128-GCM (nginx: ssl_ecdh_curve and ssl_conf_command; the Go servers
# choose AES-128-GCM first on AES hardware, and wrk's OpenSSL 3.0 offers no
# hybrid group); an openssl s_client probe of each server writes what it
# negotiated to OUT/negotiated.txt. percore runs with GOMAXPROCS=2 on its one
# CPU: a P for the handshake pool beside the loop's locked thread (the
# loop's P would otherwise be the only one, and the pool's goroutines would
# wait for sysmon to retake it; TLS_PROCS changes it). net/http runs with
# GOMAXPROCS=1, as in bench-http.sh.
#
# For each run it records requests/s, p99, wrk's errors and the server's CPU
# per request (utime+stime from /proc/PID/stat over the run, divided by the
# requests wrk counted).
#
# What it changes: it builds the Go servers and writes a self-signed ECDSA
# P-256 certificate into a temporary directory (removed on exit, with the
# nginx configuration), listens on 127.0.0.1 ports from BASE_PORT up, and
# writes OUT/tls-runs.tsv, OUT/tls-summary.md and OUT/negotiated.txt.
# Undo: delete OUT. It changes no system setting.
#
# Bounded in time: each wrk run is killed after DURATION+30 seconds, and a
# server that does not listen within 10 seconds fails the script. With the
# defaults (3 repeats, 5 servers, 5 s runs) it takes about 4 minutes.
#
# Usage: scripts/bench-tls.sh [--dry-run]
#   --dry-run  print what it would run, and run nothing
# Environment (defaults in parentheses):
#   REPEATS (3)  DURATION (5)  WARMUP (1)  CONNS (100)  CLOSE_CONNS (50)
#   SERVER_CPUS (0)  CLIENT_CPUS (1)  BASE_PORT (28700)  TLS_PROCS (2: percore-tls's GOMAXPROCS)
#   MODES ("ka close": which wrk runs each server gets)
#   SERVERS ("percore-tls nginx-tls nethttp-tls percore-plain nginx-plain")
#   OUT (docs/results/HOST-DATE-tls)
set -euo pipefail

# shellcheck source=scripts/lib/bench-common.sh
. "$(dirname "$0")/lib/bench-common.sh"
bench_args "$@"

REPEATS=${REPEATS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
CONNS=${CONNS:-100}
CLOSE_CONNS=${CLOSE_CONNS:-50}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
BASE_PORT=${BASE_PORT:-28700}
TLS_PROCS=${TLS_PROCS:-2}
MODES=${MODES:-ka close}
SERVERS=${SERVERS-percore-tls nginx-tls nethttp-tls percore-plain nginx-plain}
OUT=${OUT:-docs/results/$(hostname)-$(date +%Y%m%d)-tls}

bench_need "Debian: apt-get install -y util-linux wrk nginx-light openssl coreutils; scripts/ensure-tools.sh installs them" taskset wrk nginx openssl go timeout

bench_tmp

run go build -o "$tmp/" ./examples/http
run go build -C examples/bench -o "$tmp/" ./baseline/nethttp
run openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=localhost \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$tmp/key.pem" -out "$tmp/cert.pem"
hz=$(getconf CLK_TCK)

# nginx_conf NAME PORT SSL writes a one-worker nginx configuration; SSL is
# "ssl" or "".
nginx_conf() {
  local name=$1 port=$2 ssl=$3 tls=""
  mkdir -p "$tmp/$name"
  if [ -n "$ssl" ]; then
    tls="ssl_certificate $tmp/cert.pem; ssl_certificate_key $tmp/key.pem; ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_tickets on; ssl_session_cache shared:SSL:10m; ssl_ecdh_curve X25519;
    ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;"
  fi
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
  server {
    listen 127.0.0.1:$port $ssl;
    $tls
    location /plaintext { default_type text/plain; return 200 "Hello, World!"; }
  }
}
EOF
}

# start NAME PORT CPUS starts a server pinned to CPUS; it sets SERVER_PID.
start() {
  local name=$1 port=$2 cpus=$3 cmd
  local tlsflags=(-tls-cert "$tmp/cert.pem" -tls-key "$tmp/key.pem")
  case "$name" in
    percore-tls) cmd=(env GOMAXPROCS="$TLS_PROCS" taskset -c "$cpus" "$tmp/http" -addr "127.0.0.1:$port" -backend uring -cores "${cpus%%[,-]*}" "${tlsflags[@]}") ;;
    percore-plain) cmd=(env GOMAXPROCS=1 taskset -c "$cpus" "$tmp/http" -addr "127.0.0.1:$port" -backend uring -cores "${cpus%%[,-]*}") ;;
    nethttp-tls) cmd=(env GOMAXPROCS=1 taskset -c "$cpus" "$tmp/nethttp" -addr "127.0.0.1:$port" "${tlsflags[@]}") ;;
    nginx-tls | nginx-plain)
      local ssl=ssl
      if [ "$name" = nginx-plain ]; then ssl=""; fi
      nginx_conf "$name$port" "$port" "$ssl"
      cmd=(taskset -c "$cpus" nginx -c "$tmp/$name$port/nginx.conf" -p "$tmp/$name$port")
      ;;
    *)
      echo "bench-tls.sh: unknown server $name" >&2
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

# probe NAME PORT writes what an openssl client negotiates with the server.
probe() {
  local name=$1 port=$2
  case "$name" in *-plain) return 0 ;; esac
  if [ "$DRY_RUN" = 1 ]; then
    run openssl s_client -connect "127.0.0.1:$port" -brief
    return 0
  fi
  { printf '%s: ' "$name"; timeout 10 openssl s_client -connect "127.0.0.1:$port" -brief </dev/null 2>&1 |
    grep -E 'Protocol version|Ciphersuite|Server Temp Key' | tr '\n' ' '; echo; } >>"$OUT/negotiated.txt" || true
}

# measure NAME PORT MODE PID REPEAT: one wrk run (after a warm-up); MODE is
# ka (keep-alive) or close (a connection per request).
measure() {
  local name=$1 port=$2 mode=$3 pid=$4 repeat=$5 scheme=https conns=$CONNS
  case "$name" in *-plain) scheme=http ;; esac
  local hdr=()
  if [ "$mode" = close ]; then
    hdr=(-H "Connection: close")
    conns=$CLOSE_CONNS
  fi
  local url="$scheme://127.0.0.1:$port/plaintext"
  local wrk=(timeout -k 5 $((DURATION + 30)) taskset -c "$CLIENT_CPUS" wrk -t1 -c"$conns" "${hdr[@]}")
  if [ "$DRY_RUN" = 1 ]; then
    run "${wrk[@]}" -d"${DURATION}s" --latency "$url"
    return 0
  fi
  "${wrk[@]}" -d"${WARMUP}s" "$url" >/dev/null 2>&1 || true
  local before after
  before=$(cpu_ticks "$pid")
  "${wrk[@]}" -d"${DURATION}s" --latency "$url" >"$tmp/wrk.out" 2>&1 || true
  after=$(cpu_ticks "$pid")
  cp "$tmp/wrk.out" "$OUT/raw/$name-$mode-$repeat.txt"
  awk -v s="$name" -v m="$mode" -v r="$repeat" -v t=$((after - before)) -v hz="$hz" -v d="$DURATION" '
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
      printf "%s\t%s\t%s\t%.0f\t%s\t%s\t%.0f\t%.2f\t%d\n", s, m, r, rps, p99, n, cpu, t / hz / secs, errs
    }' "$tmp/wrk.out" >>"$OUT/tls-runs.tsv"
  tail -n 1 "$OUT/tls-runs.tsv" | awk -F'\t' '{ printf "bench-tls.sh: %s %s repeat %s: %s req/s, %s ns of server CPU per request\n", $1, $2, $3, $4, $7 }' >&2
}

if [ "$DRY_RUN" = 0 ]; then
  mkdir -p "$OUT/raw"
  printf 'server\tmode\trepeat\trps\tp99_us\trequests\tcpu_ns_per_req\tserver_busy\terrors\n' >"$OUT/tls-runs.tsv"
  : >"$OUT/negotiated.txt"
fi

port=$BASE_PORT
for repeat in $(seq "$REPEATS"); do
  for name in $SERVERS; do
    port=$((port + 1))
    start "$name" "$port" "$SERVER_CPUS"
    if [ "$repeat" = 1 ]; then probe "$name" "$port"; fi
    for mode in $MODES; do
      measure "$name" "$port" "$mode" "$SERVER_PID" "$repeat"
    done
    stop "$SERVER_PID"
  done
done

if [ "$DRY_RUN" = 1 ]; then exit 0; fi

# The summary: medians (and the range) per server and mode, with ratios to
# nginx-tls in the same mode.
awk -F'\t' '
  NR == 1 { next }
  {
    k = $1 SUBSEP $2; keys[k] = 1; order[++nk] = k
    rps[k] = rps[k] " " $4; p99[k] = p99[k] " " $5; cpu[k] = cpu[k] " " $7; err[k] += $9
  }
  function sort(list, a,   m, i, j, t) {
    m = split(list, a, " ")
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return m
  }
  function median(list,   a, m) { m = sort(list, a); return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2 }
  function spread(list,   a, m) { m = sort(list, a); return sprintf("%.1f-%.1f", a[1] / 1000, a[m] / 1000) }
  END {
    print "| server | mode | requests/s (median; range, k) | x nginx-tls | p99 us | server CPU us/req | x nginx-tls | errors |"
    print "|---|---|---:|---:|---:|---:|---:|---:|"
    for (k in keys) { m_rps[k] = median(rps[k]); m_cpu[k] = median(cpu[k]) }
    for (i = 1; i <= nk; i++) {
      k = order[i]
      if (k in done) continue
      done[k] = 1
      split(k, p, SUBSEP)
      ref = "nginx-tls" SUBSEP p[2]
      xr = (ref in m_rps && m_rps[ref] > 0) ? sprintf("%.2f", m_rps[k] / m_rps[ref]) : "-"
      xc = (ref in m_cpu && m_cpu[ref] > 0) ? sprintf("%.2f", m_cpu[k] / m_cpu[ref]) : "-"
      printf "| %s | %s | %.0f (%s) | %s | %.0f | %.1f | %s | %d |\n", p[1], p[2], m_rps[k], spread(rps[k]), xr, median(p99[k]), m_cpu[k] / 1000, xc, err[k]
    }
  }' "$OUT/tls-runs.tsv" >"$OUT/tls-summary.md"
{
  echo
  echo "Command: MODES=\"$MODES\" TLS_PROCS=$TLS_PROCS REPEATS=$REPEATS DURATION=$DURATION CONNS=$CONNS CLOSE_CONNS=$CLOSE_CONNS SERVER_CPUS=$SERVER_CPUS CLIENT_CPUS=$CLIENT_CPUS scripts/bench-tls.sh"
  echo
  echo "Negotiated:"
  sed 's/^/    /' "$OUT/negotiated.txt"
} >>"$OUT/tls-summary.md"
cat "$OUT/tls-summary.md"
