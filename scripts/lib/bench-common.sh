# shellcheck shell=bash
# bench-common.sh: what scripts/bench-http.sh, bench-resp.sh, bench-files.sh
# and bench-wal.sh share. Source it right after `set -euo pipefail` (each
# script's --help is its header comment, up to that line), then call
# bench_args "$@" before anything else.

# bench_args ARGS... parses --dry-run and -h/--help (the calling script's
# header comment) and changes to the repository's root. It sets DRY_RUN and
# BENCH_NAME (the script's name, for messages).
bench_args() {
  local self arg
  self="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
  BENCH_NAME=$(basename "$0")
  cd "$(dirname "$0")/.." || exit 1
  DRY_RUN=0
  for arg in "$@"; do
    case "$arg" in
      --dry-run) DRY_RUN=1 ;;
      -h | --help)
        sed -n '2,/^set -euo/p' "$self" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
      *)
        echo "$BENCH_NAME: unknown argument $arg (try --help)" >&2
        exit 2
        ;;
    esac
  done
}

# run CMD... runs CMD, or with --dry-run prints it.
run() {
  if [ "$DRY_RUN" = 1 ]; then
    printf '+ %s\n' "$*"
  else
    "$@"
  fi
}

# bench_need HINT TOOL... fails the script unless each TOOL is on PATH (HINT
# says how to install them); with --dry-run it checks nothing.
bench_need() {
  local hint=$1 tool
  shift
  if [ "$DRY_RUN" = 0 ]; then
    for tool in "$@"; do
      if ! command -v "$tool" >/dev/null; then
        echo "$BENCH_NAME: needs $tool ($hint)" >&2
        exit 1
      fi
    done
  fi
}

# bench_tmp makes the temporary directory tmp and the list pids of processes
# to kill; on exit both are cleaned up.
bench_tmp() {
  tmp=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
}

bench_cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}

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
  echo "$BENCH_NAME: nothing listens on 127.0.0.1:$1 after 10s" >&2
  return 1
}
