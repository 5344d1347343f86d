#!/usr/bin/env bash
# interleaved decoder benchmarks: decbench.sh OUTDIR REPS NAME=BIN...
set -euo pipefail
out=$1; reps=$2; shift 2
mkdir -p "$out"
for r in $(seq "$reps"); do
  for nb in "$@"; do
    name=${nb%%=*}; bin=${nb#*=}
    taskset -c 0 "$bin" -test.run '^$' -test.bench "${BENCH:-Benchmark(Conn)?Decode\$}" -test.count 1 -test.benchtime "${BT:-1s}" >> "$out/$name.txt"
  done
done
