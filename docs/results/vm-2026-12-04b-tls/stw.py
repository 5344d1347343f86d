#!/usr/bin/env python3
"""The collector's stop-the-worlds in a Go trace, longest first, with what the threads holding
the other P were doing when it began (the last state change of each goroutine running then).
Usage: python3 stw.py X.parsed"""
import re
import sys

o, d = {}, []
for line in open(sys.argv[1]):
    if 'stop-the-world' in line and ('RangeBegin' in line or 'RangeEnd' in line):
        t = int(re.search(r'Time=(\d+)', line)[1])
        n = re.search(r'Name="([^"]*)"', line)[1]
        if 'RangeBegin' in line:
            o[n] = t
        elif n in o:
            d.append((t - o.pop(n), n, o.get(n)))
d.sort(reverse=True)
print(f'{len(d)} stop-the-worlds; the longest:')
for x, n, _ in d[:6]:
    print(f'   {x / 1e6:.2f} ms {n}')
