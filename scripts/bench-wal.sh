#!/usr/bin/env bash
# bench-wal.sh: examples/wal against a std-net group-commit server and
# per-record fdatasync (BENCH=wal make bench, or scripts/bench.sh with
# BENCH=wal). Each server runs pinned to SERVER_CPU (one loop, or
# GOMAXPROCS=1): wal on io_uring and on epoll, examples/bench/baseline/walstd
# (a goroutine per connection and a committer goroutine), and walstd
# -group=false (each record written and fdatasynced alone, under a mutex);
# std-group-p4 is walstd with GOMAXPROCS=4 on the same CPU (not in the
# default list: with GOMAXPROCS=1, Go's own default on one CPU, the
# committer keeps the P through a short fdatasync and the connections'
# goroutines gather nothing meanwhile).
# examples/bench/walload, pinned to CLIENT_CPU, runs CLIENTS connections, each
# with one record of SIZE bytes in flight, for DURATION seconds, for each
# client count in CLIENT_COUNTS, with sync and without (SYNCS), servers
# interleaved, REPEATS times. Each run records records acknowledged per
# second, the acknowledgement latency (p50, p99), the server's CPU per
# record (utime+stime from /proc/PID/stat over the run), and the server's
# records per group (= per fdatasync with sync) from its counters at exit.
# Before the runs it measures what one fdatasync of a 100-byte append costs
# on the log's file system (FSYNC_PROBE fdatasyncs of one file).
#
# What it changes: it builds the programs into a temporary directory, keeps
# the logs there (removed on exit; set LOG_DIR to put them on another file
# system), listens on 127.0.0.1 ports from BASE_PORT up, and writes
# OUT/wal-runs.tsv and OUT/wal-summary.md. Undo: delete OUT. It changes no
# system setting.
#
# Bounded in time: each walload run is killed after DURATION + 30 seconds,
# and a server that does not listen within 10 seconds fails the script.
# With the defaults (2 repeats, 4 servers, 3 client counts, sync and not,
# 3 s each plus 1 s warm-up) it takes about 4 minutes.
#
# Usage: scripts/bench-wal.sh [--dry-run]
#   --dry-run  print what it would run, and run nothing
# Environment (defaults in parentheses):
#   REPEATS (2)  SERVER_CPU (0)  CLIENT_CPU (1)  CLIENT_COUNTS ("1 16 256")
#   SYNCS ("true false")  SIZE (100)  DURATION (3)  BASE_PORT (27600)
#   SERVERS ("wal-uring wal-epoll std-group std-record")  LOG_DIR (temporary)
#   WAL_FLAGS (extra flags for examples/wal, e.g. "-depth 2")
#   OUT (docs/results/HOST-DATE-wal)
set -euo pipefail

# shellcheck source=scripts/lib/bench-common.sh
. "$(dirname "$0")/lib/bench-common.sh"
bench_args "$@"

REPEATS=${REPEATS:-2}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CLIENT_COUNTS=${CLIENT_COUNTS:-1 16 256}
SYNCS=${SYNCS:-true false}
SIZE=${SIZE:-100}
DURATION=${DURATION:-3}
BASE_PORT=${BASE_PORT:-27600}
SERVERS=${SERVERS:-wal-uring wal-epoll std-group std-record}
WAL_FLAGS=${WAL_FLAGS:-}
OUT=${OUT:-docs/results/$(hostname)-$(date +%Y%m%d)-wal}

bench_need "Debian: apt-get install -y util-linux golang" taskset go

bench_tmp
logs=${LOG_DIR:-$tmp/logs}

run go build -o "$tmp/" ./examples/wal ./scripts/testdata/fsyncprobe
run go build -C examples/bench -o "$tmp/" ./walload ./baseline/walstd
hz=$(getconf CLK_TCK)

# start_server NAME SYNC PORT DIR starts a server pinned to SERVER_CPU; it sets SERVER_PID.
start_server() {
  local name=$1 sync=$2 port=$3 dir=$4 cmd
  case "$name" in
    wal-uring | wal-epoll)
      # shellcheck disable=SC2206 # WAL_FLAGS is a list of flags
      cmd=(env GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$tmp/wal" -addr "127.0.0.1:$port" -dir "$dir"
        -sync="$sync" -backend "${name#wal-}" -cores "$SERVER_CPU" -segment-size 1073741824 $WAL_FLAGS)
      ;;
    std-group | std-record | std-group-p4)
      local group=true procs=1
      [ "$name" = std-record ] && group=false
      [ "$name" = std-group-p4 ] && procs=4
      cmd=(env GOMAXPROCS="$procs" taskset -c "$SERVER_CPU" "$tmp/walstd" -addr "127.0.0.1:$port" -dir "$dir"
        -sync="$sync" -group="$group")
      ;;
    *)
      echo "bench-wal.sh: unknown server $name" >&2
      exit 2
      ;;
  esac
  if [ "$DRY_RUN" = 1 ]; then
    printf '+ %s &\n' "${cmd[*]}"
    return 0
  fi
  "${cmd[@]}" >"$tmp/$name.out" 2>"$tmp/$name.err" &
  SERVER_PID=$!
  pids+=("$SERVER_PID")
  wait_listen "$port"
}

if [ "$DRY_RUN" = 0 ]; then
  mkdir -p "$OUT" "$logs"
  "$tmp/fsyncprobe" -dir "$logs" -n "${FSYNC_PROBE:-2000}" | tee "$OUT/wal-fdatasync.txt" >&2
  printf 'server\tsync\tclients\trepeat\trate\tp50\tp99\terrors\tcpu_ns_per_record\trecords_per_group\n' >"$OUT/wal-runs.tsv"
else
  run "$tmp/fsyncprobe" -dir "$logs" -n "${FSYNC_PROBE:-2000}"
fi

port=$BASE_PORT
for repeat in $(seq "$REPEATS"); do
  for sync in $SYNCS; do
    for clients in $CLIENT_COUNTS; do
      for name in $SERVERS; do
        port=$((port + 1))
        dir="$logs/$name-$port"
        run mkdir -p "$dir"
        start_server "$name" "$sync" "$port" "$dir"
        if [ "$DRY_RUN" = 1 ]; then
          run taskset -c "$CLIENT_CPU" "$tmp/walload" -addr "127.0.0.1:$port" -clients "$clients" -size "$SIZE" -duration "${DURATION}s"
          continue
        fi
        before=$(cpu_ticks "$SERVER_PID")
        line=$(timeout -k 5 $((DURATION + 30)) env GOMAXPROCS=1 taskset -c "$CLIENT_CPU" "$tmp/walload" -addr "127.0.0.1:$port" \
          -clients "$clients" -size "$SIZE" -warmup 1s -duration "${DURATION}s") || line=""
        after=$(cpu_ticks "$SERVER_PID")
        kill -INT "$SERVER_PID"
        wait "$SERVER_PID" 2>/dev/null || true
        rate=$(printf '%s\n' "$line" | sed -n 's/.* rate=\([0-9.]*\)\/s.*/\1/p')
        p50=$(printf '%s\n' "$line" | sed -n 's/.* p50=\([0-9]*\)us.*/\1/p')
        p99=$(printf '%s\n' "$line" | sed -n 's/.* p99=\([0-9]*\)us.*/\1/p')
        errs=$(printf '%s\n' "$line" | sed -n 's/.* errors=\([0-9]*\).*/\1/p')
        per=$(sed -n 's/.*records\/group=\([0-9.]*\).*/\1/p; s/.*walstd: records=\([0-9]*\) groups=\([0-9]*\).*/\1 \2/p' "$tmp/$name.err" |
          awk 'NF == 1 { print $1 } NF == 2 { printf "%.2f", ($2 > 0 ? $1 / $2 : 0) }')
        # The CPU covers the warm-up too: divide by the records of the whole run.
        cpu=NA
        if [ -n "$rate" ]; then
          cpu=$(awk -v t=$((after - before)) -v hz="$hz" -v r="$rate" -v d="$DURATION" \
            'BEGIN { n = r * (d + 1); printf "%.0f", (n > 0 ? t * 1e9 / hz / n : 0) }')
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$sync" "$clients" "$repeat" "${rate:-0}" "${p50:-NA}" \
          "${p99:-NA}" "${errs:-NA}" "$cpu" "${per:-NA}" >>"$OUT/wal-runs.tsv"
        echo "bench-wal.sh: $name sync=$sync clients=$clients repeat $repeat: ${rate:-0} records/s p50 ${p50:-NA} p99 ${p99:-NA}, ${per:-NA} records/group" >&2
        rm -rf "$dir"
      done
    done
  done
done

if [ "$DRY_RUN" = 1 ]; then exit 0; fi

awk -F'\t' '
  NR == 1 { next }
  { k = $2 SUBSEP $3 SUBSEP $1; rate[k] = rate[k] " " $5; p50[k] = p50[k] " " $6; p99[k] = p99[k] " " $7
    cpu[k] = cpu[k] " " $9; per[k] = per[k] " " $10; keys[k] = 1 }
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    print "| sync | clients | server | records/s | p50 us | p99 us | server CPU us/record | records/fdatasync | vs std-group | vs std-record |"
    print "|---|---:|---|---:|---|---|---:|---:|---:|---:|"
    n = 0
    for (k in keys) { order[++n] = k; m[k] = median(rate[k]) }
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (order[j] < order[i]) { t = order[i]; order[i] = order[j]; order[j] = t }
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, f, SUBSEP); g = f[1] SUBSEP f[2] SUBSEP "std-group"; r = f[1] SUBSEP f[2] SUBSEP "std-record"
      printf "| %s | %s | %s | %.0f | %s | %s | %.2f | %s | %.2f | %.2f |\n", f[1], f[2], f[3], m[k], median(p50[k]), median(p99[k]),
        median(cpu[k]) / 1000, median(per[k]), (g in m && m[g] > 0) ? m[k] / m[g] : 0, (r in m && m[r] > 0) ? m[k] / m[r] : 0
    }
  }' "$OUT/wal-runs.tsv" >"$OUT/wal-summary.md"
cat "$OUT/wal-summary.md"
