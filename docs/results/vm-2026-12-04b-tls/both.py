#!/usr/bin/env python3
"""Each long dispatch in the Go trace's and the kernel's terms at once (both1.sh's runs).

Usage: python3 both.py X.parsed X.script X.txt
  X.parsed: go tool trace -d=parsed X.trace; X.script: perf script --ns -F comm,tid,cpu,time,event,ip,sym,trace -i X.data;
  X.txt: the run's "long dispatch START DUR" lines (CLOCK_MONOTONIC, as both the trace and perf -k).

For each dispatch over 1 ms: the loop goroutine's Go states (running, runnable and why, waiting,
in a syscall), the GC mark assists on it; the loop thread's kernel states (on cpu0, preempted,
asleep) and what cpu0 ran meanwhile, from the 10 kHz cpu-clock samples classified by stack (the
collector's workers, handshakes, other threads of the storm process, other processes, idle; a
window with fewer samples than its length is time the vCPU did not run: the host's). Then a
classification of the dispatch by its largest part.
"""
import os
import re
import sys
from collections import Counter, defaultdict

here = os.path.dirname(os.path.abspath(__file__))
ns = {}
exec(open(os.path.join(here, 'trace.py')).read().split('\ndef main')[0], ns)
ns2 = {}
exec(open(os.path.join(here, 'samples.py')).read().split('\ndef main')[0], ns2)


def cat(r, loop):
    s = r['stack']
    if r['comm'].startswith('swapper'):
        return 'idle'
    if r['tid'] == loop:
        c = ns2['classify'](s)
        return 'loop: ' + (c if c.startswith(('gc:', 'kernel:', 'alloc')) else 'own work')
    if r['pid_storm']:
        if any(f.startswith(('runtime.gcBgMarkWorker', 'runtime.gcDrain')) for f in s):
            return 'storm: GC mark worker'
        if any('tlsconn' in f or 'crypto/' in f for f in s):
            return 'storm: handshake'
        return 'storm: other (' + ns2['classify'](s)[:40] + ')'
    return 'other process: ' + r['comm']


def main():
    parsed, script, longs = sys.argv[1:4]
    wins = [(int(l.split()[2]), int(l.split()[3])) for l in open(longs) if l.startswith('long dispatch')]
    # Go side
    gst = defaultdict(list)
    rng = defaultdict(list)
    openr = {}
    loopg = None
    for e in ns['events'](parsed):
        k = e['kind']
        if k == 'Log' and 'longdispatch' in e['rest']:
            loopg = e['G']
        elif k == 'StateTransition' and 'GoID=' in e['rest']:
            m = re.search(r'GoID=(\d+) (\w+)->(\w+) Reason="([^"]*)"', e['rest'])
            gst[int(m[1])].append((e['t'], m[2], m[3], m[4], ns['short'](e['stack'], 3)))
        elif k in ('RangeBegin', 'RangeEnd'):
            name = re.search(r'Name="([^"]*)"', e['rest'])[1]
            sc = re.search(r'Scope=(\S+)', e['rest'])[1]
            if k == 'RangeBegin':
                openr[(name, sc)] = e['t']
            elif (name, sc) in openr:
                rng[sc].append((name, openr.pop((name, sc)), e['t']))
    # kernel side
    recs = list(ns2['records'](script))
    cnt = Counter(r['tid'] for r in recs if r['ev'] == 'cpu-clock' and any('(*Loop).turn' in f for f in r['stack']))
    loop = cnt.most_common(1)[0][0]
    storm = {r['tid'] for r in recs if r['comm'].startswith(('runtime-diag', 'runtime.test'))}
    for r in recs:
        r['pid_storm'] = r['tid'] in storm
    print(f'loop goroutine {loopg}, thread {loop}; {len(wins)} dispatches over 1 ms')
    totals = Counter()
    kinds = Counter()
    for s, d in wins:
        w0, w1 = s, s + d
        # Go states
        st = gst[loopg]
        prev = [x for x in st if x[0] <= w0]
        state = prev[-1][2] if prev else 'Running'
        reason = prev[-1][3] if prev else ''
        since = w0
        gpart = Counter()
        for t, fr, to, rs, stk in [x for x in st if w0 < x[0] < w1]:
            gpart[state + ('(' + reason + ')' if state != 'Running' and reason else '')] += t - since
            state, reason, since = to, rs, t
        gpart[state + ('(' + reason + ')' if state != 'Running' and reason else '')] += w1 - since
        assist = 0
        for name, a, b in rng.get(f'Goroutine({loopg})', []):
            ov = min(b, w1) - max(a, w0)
            if ov > 0 and name == 'GC mark assist':
                assist += ov
        mark = sum(max(0, min(b, w1) - max(a, w0)) for name, a, b in rng.get('None', []) if name == 'GC concurrent mark phase')
        stw = sum(max(0, min(b, w1) - max(a, w0)) for sc, rs in rng.items() for name, a, b in rs if 'stop-the-world' in name)
        # kernel: samples on cpu0 in the window
        smp = [r for r in recs if r['ev'] == 'cpu-clock' and w0 <= r['t'] <= w1]
        kc = Counter(cat(r, loop) for r in smp)
        missing = max(0, d / 1e5 - len(smp))
        if missing >= 3:
            kc['(no sample: vCPU not running)'] = int(round(missing))
        print(f'\ndispatch at {s} ({d / 1e6:.2f} ms), mark phase {mark / 1e6:.2f} ms, stop-the-world {stw / 1e6:.2f} ms')
        print('   Go: ' + ', '.join(f'{k} {v / 1e6:.2f}' for k, v in gpart.most_common()) + f'; assists on the loop {assist / 1e6:.2f} ms')
        print('   cpu0 (100 us samples): ' + ', '.join(f'{k} {v}' for k, v in kc.most_common()))
        for k, v in kc.items():
            totals[k] += v / 10
        totals['assist on the loop (Go trace)'] += assist / 1e6
        totals['all'] += d / 1e6
        # the dispatch's largest part
        big = kc.most_common(1)[0][0] if kc else '?'
        kinds[big] += 1
    print('\nin all (ms): ' + ', '.join(f'{k} {v:.1f}' for k, v in totals.most_common()))
    print('largest part of each dispatch: ' + ', '.join(f'{k} {v}' for k, v in kinds.most_common()))


main()
