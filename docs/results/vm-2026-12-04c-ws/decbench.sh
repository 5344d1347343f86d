#!/usr/bin/env bash
# decbench.sh OUTDIR REPS NAME=BIN...: the ws decoder benchmarks of each test binary (go test -c ./runtime/frame/ws/)
# in turn, once per repeat, on cpu0, appended to OUTDIR/NAME.txt; BENCH (the -test.bench pattern) and BT
# (-test.benchtime) pick what and how long. Changes nothing outside OUTDIR.
set -euo pipefail
out=$1; reps=$2; shift 2
mkdir -p "$out"
for _ in $(seq "$reps"); do
  for nb in "$@"; do
    name=${nb%%=*}; bin=${nb#*=}
    taskset -c 0 "$bin" -test.run '^$' -test.bench "${BENCH:-Benchmark(Conn)?Decode\$}" -test.count 1 -test.benchtime "${BT:-1s}" >> "$out/$name.txt"
  done
done
