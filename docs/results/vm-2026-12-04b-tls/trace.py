#!/usr/bin/env python3
"""Line the loop's long dispatches up with a Go execution trace.

Usage: go tool trace -d=parsed X.trace > X.parsed; python3 trace.py X.parsed [LOOP_GOID]

The diagnosis build (diag-trace.patch) logs trace.Log("longdispatch", "START DUR") on the loop's
goroutine at the end of each dispatch over 1 ms; START is CLOCK_MONOTONIC, the trace's clock.
For each mark this prints the loop goroutine's states in the window (running, in a syscall and
which, waiting and on what, runnable), its GC mark assists, the collector's phases and
stop-the-worlds that overlap, what else ran on the loop's P, and the CPU profile's samples of the
loop goroutine in the window (their stacks' percore frames).
"""
import re
import sys
from collections import defaultdict

HEAD = re.compile(r'^M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(\d+)(.*)$')


def events(path):
    ev = None
    with open(path) as f:
        for line in f:
            if line.startswith('M='):
                if ev:
                    yield ev
                m = HEAD.match(line.rstrip('\n'))
                if not m:
                    ev = None
                    continue
                ev = dict(M=int(m[1]), P=int(m[2]), G=int(m[3]), kind=m[4], t=int(m[5]), rest=m[6], stack=[])
            elif ev is not None and line.startswith('\t') and not line.startswith('\t\t'):
                ev['stack'].append(line.strip().split(' @ ')[0])
    if ev:
        yield ev


def short(stack, n=6):
    fr = [f for f in stack if not f.startswith(('runtime.trace', 'runtime/trace.'))]
    return ' < '.join(f.replace('github.com/percore/percore/', '') for f in fr[:n])


def main():
    path = sys.argv[1]
    marks = []  # (start, dur, goid)
    gstate = defaultdict(list)  # goid -> [(t, from, to, reason, stack)]
    ranges = defaultdict(list)  # scope -> [(name, t0, t1)]
    open_r = {}
    samples = defaultdict(list)  # goid -> [(t, stack)]
    pruns = defaultdict(list)  # P -> [(t, goid)] goroutine becoming Running on P
    for e in events(path):
        k = e['kind']
        if k == 'Log' and 'Category="longdispatch"' in e['rest']:
            s, d = re.search(r'Message="(\d+) (\d+)"', e['rest']).groups()
            marks.append((int(s), int(d), e['G']))
        elif k == 'StateTransition' and 'GoID=' in e['rest']:
            m = re.search(r'GoID=(\d+) (\w+)->(\w+) Reason="([^"]*)"', e['rest'])
            g = int(m[1])
            gstate[g].append((e['t'], m[2], m[3], m[4], e['stack'], e['P']))
            if m[3] == 'Running':
                pruns[e['P']].append((e['t'], g))
        elif k in ('RangeBegin', 'RangeEnd'):
            name = re.search(r'Name="([^"]*)"', e['rest'])[1]
            scope = re.search(r'Scope=(\S+)', e['rest'])[1]
            key = (name, scope)
            if k == 'RangeBegin':
                open_r[key] = e['t']
            elif key in open_r:
                ranges[scope].append((name, open_r.pop(key), e['t']))
        elif k == 'StackSample':
            samples[e['G']].append((e['t'], e['stack']))
    loopg = int(sys.argv[2]) if len(sys.argv) > 2 else (marks[0][2] if marks else None)
    print(f'loop goroutine {loopg}; {len(marks)} long dispatches marked')
    tot = defaultdict(int)
    for s, d, g in marks:
        w0, w1 = s, s + d
        print(f'\ndispatch at {s} ({d / 1e6:.2f} ms):')
        # the loop goroutine's states in the window
        st = gstate[loopg]
        state, since = None, w0
        prev = [x for x in st if x[0] <= w0]
        state = prev[-1][2] if prev else 'Running'
        part = defaultdict(int)
        for t, fr, to, reason, stack, p in [x for x in st if w0 < x[0] < w1]:
            part[state] += t - since
            if to != 'Running' and t - since >= 0:
                pass
            if fr == 'Running' and to != 'Running':
                print(f'   +{(t - w0) / 1e3:7.0f} us {fr}->{to} {reason}: {short(stack)}')
            elif to == 'Running':
                print(f'   +{(t - w0) / 1e3:7.0f} us {fr}->{to} (after {(t - since) / 1e3:.0f} us {fr})')
            state, since = to, t
        part[state] += w1 - since
        for sc in ('Goroutine(%d)' % loopg,):
            for name, a, b in ranges.get(sc, []):
                ov = min(b, w1) - max(a, w0)
                if ov > 0:
                    part['assist (inside running)'] += ov
                    print(f'   GC mark assist on the loop: +{(max(a, w0) - w0) / 1e3:.0f} us, {ov / 1e3:.0f} us')
        for sc, rs in ranges.items():
            if sc.startswith('Goroutine'):
                if sc == 'Goroutine(%d)' % loopg:
                    continue
                for name, a, b in rs:
                    ov = min(b, w1) - max(a, w0)
                    if ov > 0 and 'stop-the-world' in name:
                        part['stop-the-world overlap'] += ov
                        print(f'   {name}: {ov / 1e3:.0f} us in the window')
            else:
                for name, a, b in rs:
                    ov = min(b, w1) - max(a, w0)
                    if ov > 0:
                        print(f'   {name} ({sc}) overlaps {ov / 1e3:.0f} us')
        print('   states: ' + ', '.join(f'{k} {v / 1e3:.0f} us' for k, v in sorted(part.items(), key=lambda x: -x[1])))
        for k, v in part.items():
            tot[k] += v
        tot['all'] += d
        for t, stack in samples.get(loopg, []):
            if w0 <= t <= w1:
                print(f'   sample +{(t - w0) / 1e3:.0f} us: {short(stack, 8)}')
    print('\nin all: ' + ', '.join(f'{k} {v / 1e6:.2f} ms' for k, v in sorted(tot.items(), key=lambda x: -x[1])))


main()
