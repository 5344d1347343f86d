#!/usr/bin/env python3
"""cpu0's scheduler timeline around each long dispatch (perf2.sh's run).

Usage: perf script --ns -F comm,tid,cpu,time,event,trace -i setattr-off.data | grep -v cpu-clock > X.sched
       python3 setattr.py X.sched perf2-setattr-off.txt
Prints, from 1.5 ms before each dispatch over 1 ms to 0.2 ms after, cpu0's switches (with the
threads' kernel priorities: 120 nice 0, 139 nice 19), wake-ups, and the pool's sched_setattr calls
(the lowering as a stretch of work begins, the restore as it ends).
"""
import re
import sys

sched, longs = sys.argv[1:3]
wins = [(int(l.split()[2]), int(l.split()[3])) for l in open(longs) if l.startswith('long dispatch')]
lines = []
for l in open(sched):
    m = re.match(r'\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d+):\s+(\S+):(.*)', l)
    if m and m[3] == '000':
        lines.append((int(m[4]) * 10**9 + int(m[5]), m[2], m[6].replace('sched:', '').replace('syscalls:', ''), m[7]))
for s, d in wins:
    print('== dispatch', s, f'{d / 1e6:.2f} ms')
    for t, tid, ev, rest in lines:
        if s - 1500000 <= t <= s + d + 200000:
            rest = rest.replace('prev_comm=', '').replace('next_comm=', '')
            if 'setattr' in ev:
                rest = ''
            print(f"{'IN ' if s <= t <= s + d else '   '}{(t - s) / 1000:8.0f}us {tid:>6} {ev:24} {rest[:120]}")
