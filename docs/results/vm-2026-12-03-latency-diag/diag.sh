#!/bin/bash
# diag.sh: echo latency diagnostics at one open-loop rate (issue 29). Binaries in B:
#   go build -o B/ ./examples/echo && go build -C examples/bench -o B/ ./load ./baseline/netpoll
#   gcc -O2 -o B/liburing-echo examples/bench/baseline/uringc/echo.c -luring
# Run under the exclusive lock: /work/wt/bench ./diag.sh (as 2026-12-03: RATE=60000 REPS=3).
# Each variant: server pinned to cpu0, load on cpu1, -rate RATE, 50 conns,
# 1 s warm-up + 3 s window; per-thread schedstat of the server over the window.
set -u
B=${B:-/tmp/i29c/bin}; OUT=${OUT:-/tmp/i29c/d1}; RATE=${RATE:-60000}; REPS=${REPS:-3}
VARIANTS=${VARIANTS:-"liburing uring epoll uring-gmp2 uring-gcoff netpoll liburing-cgmp2"}
PERFV=${PERFV:-"liburing uring epoll"}
CONNS=${CONNS:-50}
mkdir -p "$OUT"; port=29600
snap() { for t in /proc/$1/task/*; do printf '%s %s\n' "${t##*/}" "$(cat $t/schedstat 2>/dev/null)"; done; }
srv() { # variant port -> command
  local a=127.0.0.1:$2 g="env GOMAXPROCS=1 GODEBUG=gctrace=1 taskset -c 0"
  case $1 in
    liburing|liburing-cgmp2) echo "taskset -c 0 $B/liburing-echo $a";;
    uring) echo "$g $B/echo -addr $a -backend uring -cores 0";;
    epoll) echo "$g $B/echo -addr $a -backend epoll -cores 0";;
    uring-gmp2) echo "env GOMAXPROCS=2 GODEBUG=gctrace=1 taskset -c 0 $B/echo -addr $a -backend uring -cores 0";;
    uring-gcoff) echo "env GOGC=off GOMAXPROCS=1 GODEBUG=gctrace=1 taskset -c 0 $B/echo -addr $a -backend uring -cores 0";;
    epoll-gmp2) echo "env GOMAXPROCS=2 GODEBUG=gctrace=1 taskset -c 0 $B/echo -addr $a -backend epoll -cores 0";;
    netpoll) echo "$g $B/netpoll -addr $a -loops 1";;
    *) eval "echo \"\$SRV_$(echo $1 | tr - _)\" | sed s/ADDR/$a/g";;
  esac
}
one() { # variant rep perf
  local v=$1 r=$2 pf=$3; port=$((port+1))
  local cg=1; [ "$v" = liburing-cgmp2 ] && cg=2
  $(srv $v $port) >"$OUT/$v.$r.srv.log" 2>&1 & local sp=$!
  for i in $(seq 100); do ss -ltn | grep -q ":$port " && break; sleep 0.1; done
  env GOMAXPROCS=$cg taskset -c 1 timeout 60 $B/load -addr 127.0.0.1:$port -conns $CONNS -bytes 64 -rate $RATE -warmup 1 -seconds 3 -json -server-pid $sp >"$OUT/$v.$r.json" 2>"$OUT/$v.$r.err" & local lp=$!
  sleep 1.4; snap $sp >"$OUT/$v.$r.s0"
  if [ "$pf" = 1 ]; then perf sched record -C 0 -o "$OUT/$v.$r.perf" -- sleep 2.5 >/dev/null 2>&1; else sleep 2.5; fi
  snap $sp >"$OUT/$v.$r.s1"
  wait $lp; kill $sp; wait $sp 2>/dev/null
  echo "$v #$r: $(grep -o '"p50_us":[0-9.]*\|"p99_us":[0-9.]*\|"p999_us":[0-9.]*\|"late_sends":[0-9]*\|"other_cpu_pct":[0-9.]*\|"steal_pct":[0-9.]*\|"server_busy_pct":[0-9.]*' "$OUT/$v.$r.json" | tr '\n' ' ') gc=$(grep -c '^gc ' "$OUT/$v.$r.srv.log")"
}
uptime; ps -eo pid,pcpu,comm --sort=-pcpu | head -8
for r in $(seq $REPS); do for v in $VARIANTS; do one $v $r 0; done; done
for v in $PERFV; do one $v p 1; done
uptime
