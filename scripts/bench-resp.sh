#!/usr/bin/env bash
# bench-resp.sh: the Redis-protocol tables of issue 17, judged by redis-benchmark
# (BENCH=resp make bench, or scripts/bench.sh with BENCH=resp). Three tables:
#
#   kv     examples/kv (one loop, io_uring and epoll) against redis-server, each pinned to
#          SERVER_CPUS with one thread.
#   proxy  examples/redis_proxy (one loop, io_uring and epoll) against twemproxy (Debian's
#          nutcracker: one process, hash fnv1a_64, distribution modula, as the proxy hashes)
#          and against a direct connection, in front of one redis-server that runs pinned to
#          UPSTREAM_CPUS (default: the client's CPUs; the client saturates first anyway). The
#          proxy's own CPU per request is the comparison; "direct" rows give redis-server's.
#   load   the kv table's servers again, with the project's own RESP client instead of
#          redis-benchmark (examples/bench/load -engine resp: 50% GET, 50% SET of one key, 3-byte
#          values, as redis-benchmark's defaults; every reply verified), a cross-check of
#          redis-benchmark's requests/s by a client that costs less per request.
#   loops  examples/kv with one loop on SERVER_CPUS and with two loops on LOOP_CPUS (default
#          0-1, so the client shares a CPU: flagged CPU-shared), with keys spread over
#          KEYSPACE random keys (-r), so that about half of the commands of two loops are for
#          the other loop's keys; the share comes from kv's INFO (percore_cross_loop_commands).
#
# Each run is
#   redis-benchmark -q -t set,get -c CLIENTS -n REQUESTS -P P --csv   (loops: plus -r KEYSPACE)
# pinned to CLIENT_CPUS, for each P in PIPELINES. Servers and pipelines run interleaved,
# REPEATS times. For each run it records each test's requests/s and the measured process's
# CPU per request: its utime+stime from /proc/PID/stat over the run, divided by the run's
# requests (SET and GET), and how busy the client's CPUs were (from /proc/stat). The summary
# gives medians, and each row's ratios to its table's reference (redis for kv and load,
# twemproxy for proxy, kv1-uring for loops).
#
# What it changes: it builds examples/kv, examples/redis_proxy and examples/bench/load into a temporary directory
# (removed on exit, with the servers' working directories and nutcracker's configuration),
# listens on 127.0.0.1 ports from BASE_PORT up (redis-server with --save '' --appendonly no:
# no files), and writes OUT/resp-runs.tsv and OUT/resp-summary.md. Undo: delete OUT. It
# changes no system setting.
#
# Bounded in time: each redis-benchmark run is killed after RUN_TIMEOUT seconds (a run killed
# is recorded without requests), and a server that does not listen within 10 seconds fails the
# script. With the defaults (3 repeats, 200,000 requests of each test) it takes 4 to 8 minutes
# on 2 CPUs.
#
# Usage: scripts/bench-resp.sh [--dry-run]
#   --dry-run  print what it would run, and run nothing
# Environment (defaults in parentheses):
#   REPEATS (3)  SERVER_CPUS (0)  CLIENT_CPUS (1)  UPSTREAM_CPUS (CLIENT_CPUS)  LOOP_CPUS (0-1)
#   REQUESTS (200000)  CLIENTS (50)  PIPELINES ("1 16")  KEYSPACE (100000)  RUN_TIMEOUT (120)
#   BASE_PORT (27300)  TABLES ("kv proxy load loops")  LOAD_SECONDS (4)  KV_SERVERS ("kv-uring kv-epoll redis")
#   PROXY_SERVERS ("proxy-uring proxy-epoll twemproxy direct")  LOOP_SERVERS ("kv1-uring kv2-uring")
#   OUT (docs/results/HOST-DATE-resp)
#   (KV_SERVERS may also name handkept: issue 14's one-loop server written without its API,
#   examples/kv/testdata/handkept; kv-uring-plain: kv-uring with -uring-features=none; and
#   kv-uring-skip: kv-uring with -uring-features=registered_ring,skip_sends; kv-uring-bundles: with
#   -uring-features=registered_ring,bundles; kv-uring-small and kv-uring-bundles-small: those with
#   -buffer-size SMALL_BUFFER (4096))
set -euo pipefail

# shellcheck source=scripts/lib/bench-common.sh
. "$(dirname "$0")/lib/bench-common.sh"
bench_args "$@"

REPEATS=${REPEATS:-3}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
UPSTREAM_CPUS=${UPSTREAM_CPUS:-$CLIENT_CPUS}
LOOP_CPUS=${LOOP_CPUS:-0-1}
REQUESTS=${REQUESTS:-200000}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-1 16}
KEYSPACE=${KEYSPACE:-100000}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
BASE_PORT=${BASE_PORT:-27300}
TABLES=${TABLES:-kv proxy load loops}
LOAD_SECONDS=${LOAD_SECONDS:-4}
KV_SERVERS=${KV_SERVERS:-kv-uring kv-epoll redis}
SMALL_BUFFER=${SMALL_BUFFER:-4096}
PROXY_SERVERS=${PROXY_SERVERS:-proxy-uring proxy-epoll twemproxy direct}
LOOP_SERVERS=${LOOP_SERVERS:-kv1-uring kv2-uring}
OUT=${OUT:-docs/results/$(hostname)-$(date +%Y%m%d)-resp}

tools=(taskset redis-server redis-benchmark redis-cli go)
case " $TABLES " in *" proxy "*) case " $PROXY_SERVERS " in *" twemproxy "*) tools+=(nutcracker) ;; esac ;; esac
bench_need "Debian: apt-get install -y util-linux redis-server redis-tools nutcracker; scripts/ensure-tools.sh installs them" "${tools[@]}"

bench_tmp

run go build -o "$tmp/kv" ./examples/kv
run go build -o "$tmp/redis_proxy" ./examples/redis_proxy
run go build -o "$tmp/handkept" ./examples/kv/testdata/handkept
run go build -C examples/bench -o "$tmp/load" ./load
if [ "$DRY_RUN" = 0 ]; then
  mkdir -p "$OUT"
  printf 'table\tserver\tpipeline\trepeat\ttest\trps\trequests\tcpu_ns_per_req\tcross_loop_share\tclient_busy_pct\n' >"$OUT/resp-runs.tsv"
fi
hz=$(getconf CLK_TCK)

# cpu_stat CPUS prints the busy and total clock ticks of the CPUs listed ("1", "1,3", "2-3").
cpu_stat() {
  local list=() parts=() more=() part a b
  IFS=, read -ra parts <<<"$1"
  for part in "${parts[@]}"; do
    a=${part%-*} b=${part#*-}
    mapfile -t more < <(seq "$a" "$b")
    list+=("${more[@]}")
  done
  awk -v want=" ${list[*]} " '
    $1 ~ /^cpu[0-9]+$/ && index(want, " " substr($1, 4) " ") {
      for (i = 2; i <= NF; i++) { total += $i; if (i != 5 && i != 6) busy += $i } }
    END { print busy, total }' /proc/stat
}

# busy_pct "BUSY0 TOTAL0" "BUSY1 TOTAL1" prints the busy percentage between two cpu_stat samples.
busy_pct() {
  awk -v a="$1" -v b="$2" 'BEGIN { split(a, x, " "); split(b, y, " "); d = y[2] - x[2]
    if (d > 0) printf "%.0f", 100 * (y[1] - x[1]) / d; else print "NA" }'
}

# spawn NAME CMD... starts a process in the background; it sets SPAWNED.
spawn() {
  local name=$1
  shift
  if [ "$DRY_RUN" = 1 ]; then
    printf '+ %s &\n' "$*"
    SPAWNED=0
    return 0
  fi
  "$@" >"$tmp/$name.log" 2>&1 &
  SPAWNED=$!
  pids+=("$SPAWNED")
}

# stop PID stops a process the script started.
stop() {
  if [ "$DRY_RUN" = 0 ] && [ "$1" != 0 ]; then
    kill "$1"
    wait "$1" 2>/dev/null || true
  fi
}

# start_server NAME PORT starts what a run measures; it sets SERVER_PID (the process whose CPU
# is measured) and BENCH_PORT (where redis-benchmark connects), and for the proxy table
# UPSTREAM_PID.
start_server() {
  local name=$1 port=$2 first=${SERVER_CPUS%%[,-]*}
  UPSTREAM_PID=0
  BENCH_PORT=$port
  case "$name" in
    kv-uring | kv-epoll | kv1-uring)
      local backend=${name#*-}
      spawn "$name" env GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$tmp/kv" -addr "127.0.0.1:$port" \
        -backend "$backend" -cores "$first"
      ;;
    kv-uring-plain)
      # kv-uring without the io_uring features of issue 28 (Config.UringFeatures),
      # for their A/B: KV_SERVERS="kv-uring kv-uring-plain redis".
      spawn "$name" env GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$tmp/kv" -addr "127.0.0.1:$port" \
        -backend uring -cores "$first" -uring-features=none
      ;;
    kv-uring-bundles | kv-uring-small | kv-uring-bundles-small)
      # kv-uring with receive bundles (percore.UringBundles, docs/decisions/0071) and
      # receive buffers of SMALL_BUFFER bytes, for their A/B.
      local extra=()
      if [[ "$name" == *bundles* ]]; then extra+=("-uring-features=registered_ring,bundles"); fi
      if [[ "$name" == *small ]]; then extra+=(-buffer-size "$SMALL_BUFFER"); fi
      spawn "$name" env GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$tmp/kv" -addr "127.0.0.1:$port" \
        -backend uring -cores "$first" "${extra[@]}"
      ;;
    kv-uring-skip)
      # kv-uring with skipped sends as well (percore.UringSkipSends), for their A/B:
      # KV_SERVERS="kv-uring kv-uring-skip redis" (docs/decisions/0057).
      spawn "$name" env GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$tmp/kv" -addr "127.0.0.1:$port" \
        -backend uring -cores "$first" -uring-features=registered_ring,skip_sends
      ;;
    kv2-uring)
      spawn "$name" env GOMAXPROCS=2 taskset -c "$LOOP_CPUS" "$tmp/kv" -addr "127.0.0.1:$port" \
        -backend uring -cores "$LOOP_CPUS"
      ;;
    handkept)
      spawn "$name" env GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$tmp/handkept" -addr "127.0.0.1:$port"
      ;;
    redis)
      spawn "$name" taskset -c "$SERVER_CPUS" redis-server --port "$port" --bind 127.0.0.1 --save '' \
        --appendonly no --dir "$tmp" --daemonize no
      ;;
    proxy-uring | proxy-epoll | twemproxy | direct)
      local up=$((port + 1000)) # below the ephemeral ports (32768 up), as the stats port
      spawn "$name-upstream" taskset -c "$UPSTREAM_CPUS" redis-server --port "$up" --bind 127.0.0.1 \
        --save '' --appendonly no --dir "$tmp" --daemonize no
      UPSTREAM_PID=$SPAWNED
      [ "$DRY_RUN" = 1 ] || wait_listen "$up"
      case "$name" in
        proxy-*)
          spawn "$name" env GOMAXPROCS=1 taskset -c "$SERVER_CPUS" "$tmp/redis_proxy" \
            -addr "127.0.0.1:$port" -servers "127.0.0.1:$up" -backend "${name#proxy-}" -cores "$first"
          ;;
        twemproxy)
          # twemproxy's README: a pool with the servers, redis: true, the hash and
          # distribution the proxy also uses.
          cat >"$tmp/nutcracker-$port.yml" <<YML
bench:
  listen: 127.0.0.1:$port
  hash: fnv1a_64
  distribution: modula
  redis: true
  timeout: 5000
  servers:
   - 127.0.0.1:$up:1
YML
          spawn "$name" taskset -c "$SERVER_CPUS" nutcracker -c "$tmp/nutcracker-$port.yml" \
            -s $((port + 2000)) -o "$tmp/nutcracker-$port.log"
          ;;
        direct)
          SERVER_PID=$UPSTREAM_PID
          BENCH_PORT=$up
          return 0
          ;;
      esac
      ;;
    *)
      echo "bench-resp.sh: unknown server $name" >&2
      exit 2
      ;;
  esac
  SERVER_PID=$SPAWNED
  [ "$DRY_RUN" = 1 ] || wait_listen "$port"
}

# cross_share PORT prints the share of kv's key commands that ran for clients of another loop.
cross_share() {
  redis-cli -h 127.0.0.1 -p "$1" INFO | tr -d '\r' | awk -F: '
    $1 == "percore_key_commands" { n = $2 } $1 == "percore_cross_loop_commands" { r = $2 }
    END { if (n > 0) printf "%.3f", r / n; else print "NA" }'
}

port=$BASE_PORT
for repeat in $(seq "$REPEATS"); do
  for table in $TABLES; do
    case "$table" in
      kv | load) servers=$KV_SERVERS extra=() ;;
      proxy) servers=$PROXY_SERVERS extra=() ;;
      loops) servers=$LOOP_SERVERS extra=(-r "$KEYSPACE") ;;
      *)
        echo "bench-resp.sh: unknown table $table" >&2
        exit 2
        ;;
    esac
    for name in $servers; do
      port=$((port + 1))
      start_server "$name" "$port"
      for p in $PIPELINES; do
        if [ "$table" = load ]; then
          bench=(timeout -k 5 "$RUN_TIMEOUT" env GOMAXPROCS=1 taskset -c "$CLIENT_CPUS" "$tmp/load" -engine resp
            -addr "127.0.0.1:$BENCH_PORT" -conns "$CLIENTS" -pipeline "$p" -bytes 3 -resp-get 50 -resp-keys 1
            -warmup 1 -seconds "$LOAD_SECONDS" -server-pid "$SERVER_PID" -json)
        else
          bench=(timeout -k 5 "$RUN_TIMEOUT" taskset -c "$CLIENT_CPUS" redis-benchmark -h 127.0.0.1 -p "$BENCH_PORT"
            -q -t "set,get" -c "$CLIENTS" -n "$REQUESTS" -P "$p" "${extra[@]}" --csv)
        fi
        if [ "$DRY_RUN" = 1 ]; then
          run "${bench[@]}"
          continue
        fi
        if [ "$table" = load ]; then
          # load measures the server's CPU and its own CPUs' busy share over its window.
          out=$("${bench[@]}" 2>/dev/null) || out=""
          printf '%s\n' "$out" | tr -d '{}"' | tr ',' '\n' | awk -F: -v tb="$table" -v s="$name" -v p="$p" -v r="$repeat" '
            { v[$1] = $2 }
            END { if (v["requests"] + 0 > 0 && v["errors"] + 0 == 0 && v["mismatches"] + 0 == 0)
              printf "%s\t%s\t%s\t%s\tMIX\t%.0f\t%s\t%.0f\tNA\t%.0f\n", tb, s, p, r, v["rps"], v["requests"],
                1000 * v["server_cpu_us_per_req"], v["client_busy_pct"] }' >>"$OUT/resp-runs.tsv"
          echo "bench-resp.sh: $table $name -P $p repeat $repeat: $(tail -n1 "$OUT/resp-runs.tsv" | cut -f6,8)" >&2
          continue
        fi
        before=$(cpu_ticks "$SERVER_PID")
        c0=$(cpu_stat "$CLIENT_CPUS")
        csv=$("${bench[@]}" 2>/dev/null) || csv=""
        c1=$(cpu_stat "$CLIENT_CPUS")
        after=$(cpu_ticks "$SERVER_PID")
        client=$(busy_pct "$c0" "$c1")
        share=NA
        if [ "$table" = loops ]; then share=$(cross_share "$BENCH_PORT"); fi
        # Both tests ran when the CSV has their rows; the CPU covers both.
        tests=$(printf '%s\n' "$csv" | grep -c '^"\(SET\|GET\)"' || true)
        total=$((REQUESTS * tests))
        cpu="NA"
        if [ "$total" -gt 0 ]; then
          cpu=$(awk -v t=$((after - before)) -v hz="$hz" -v n="$total" 'BEGIN { printf "%.0f", t * 1e9 / hz / n }')
        fi
        printf '%s\n' "$csv" | awk -F'","' -v tb="$table" -v s="$name" -v p="$p" -v r="$repeat" -v n="$REQUESTS" \
          -v c="$cpu" -v x="$share" -v cl="$client" \
          '/^"(SET|GET)"/ { gsub(/"/, "", $1); printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", tb, s, p, r, $1, $2, n, c, x, cl }' \
          >>"$OUT/resp-runs.tsv"
        echo "bench-resp.sh: $table $name -P $p repeat $repeat: ${cpu} ns of CPU per request (cross-loop share $share, client busy $client%)" >&2
      done
      stop "$SERVER_PID"
      if [ "$UPSTREAM_PID" != "$SERVER_PID" ]; then stop "$UPSTREAM_PID"; fi
    done
  done
done

if [ "$DRY_RUN" = 1 ]; then exit 0; fi

# The summary: medians per table, server, pipeline and test, and ratios to the table's
# reference.
awk -F'\t' '
  NR == 1 { next }
  { k = $1 SUBSEP $2 SUBSEP $3 SUBSEP $5; rps[k] = rps[k] " " $6; cpu[k] = cpu[k] " " $8; share[k] = share[k] " " $9
    busy[k] = busy[k] " " $10; keys[k] = 1 }
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    ref["kv"] = "redis"; ref["load"] = "redis"; ref["proxy"] = "twemproxy"; ref["loops"] = "kv1-uring"
    print "| table | server | -P | test | requests/s | CPU ns/request | rps vs ref | CPU vs ref | cross-loop share | client busy % |"
    print "|---|---|---:|---|---:|---:|---:|---:|---:|---:|"
    for (k in keys) { m[k] = median(rps[k]); c[k] = median(cpu[k]); x[k] = median(share[k]); b[k] = median(busy[k]) }
    n = 0
    for (k in keys) order[++n] = k
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, f, SUBSEP); r = f[1] SUBSEP ref[f[1]] SUBSEP f[3] SUBSEP f[4]
      printf "| %s | %s | %s | %s | %.0f | %.0f | %.2f | %.2f | %s | %.0f |\n", f[1], f[2], f[3], f[4], m[k], c[k],
        (r in m && m[r] > 0) ? m[k] / m[r] : 0, (r in c && c[r] > 0) ? c[k] / c[r] : 0, (share[k] ~ /NA/) ? "" : x[k], b[k]
    }
  }' "$OUT/resp-runs.tsv" >"$OUT/resp-summary.md"
cat "$OUT/resp-summary.md"
echo "bench-resp.sh: runs in $OUT/resp-runs.tsv, summary in $OUT/resp-summary.md" >&2
