#!/usr/bin/env python3
"""Summarise storm-runs*.txt: per variant (and GOGC), LagMax of each repeat and the median, the
pings' p99, share over 1 ms and maximum, the connection rate, cpu0's steal.
Usage: python3 summary.py storm-runs2.txt"""
import re
import statistics
import sys
from collections import defaultdict


def dur(s):
    m = re.match(r'([\d.]+)(ns|µs|us|ms|s)$', s)
    v = float(m[1])
    return v * {'ns': 1e-6, 'µs': 1e-3, 'us': 1e-3, 'ms': 1, 's': 1e3}[m[2]]


rows = defaultdict(list)
order = []
for line in open(sys.argv[1]):
    m = re.match(r'rep(\d+) (\S+) (\S+) ', line)
    if not m or 'lag_max=' not in line:
        continue
    key = (m[2], m[3])
    if key not in rows:
        order.append(key)
    f = dict(re.findall(r'(\w+(?:/s)?)=("[^"]*"|\S+)', line))
    n = int(f['n'])
    rows[key].append(dict(lag=dur(f['lag_max']), p99=dur(f['p99']), over=int(f['over1ms']) / n * 100,
                          mx=dur(f['max']), rate=float(f.get('conns/s', f['handshakes/s'])),
                          steal=int(f['cpu0_steal'].rstrip('ms'))))
print('| variant | | LagMax, each repeat | median | ping p99 | ping >1ms | ping max | connections/s (median) | cpu0 steal |')
print('|---|---|---|---|---|---|---|---|---|')
for k in order:
    r = rows[k]
    lags = ', '.join(f"{x['lag']:.1f}" for x in r)
    med = statistics.median(x['lag'] for x in r)
    rng = lambda key, fmt: f"{fmt % min(x[key] for x in r)}-{fmt % max(x[key] for x in r)}"
    print(f"| {k[0]} | {k[1]} | {lags} ms | **{med:.1f}** | {rng('p99', '%.2f')} ms | {rng('over', '%.1f')}% | "
          f"{rng('mx', '%.1f')} ms | {statistics.median(x['rate'] for x in r):,.0f} | {rng('steal', '%d')} ms |")
