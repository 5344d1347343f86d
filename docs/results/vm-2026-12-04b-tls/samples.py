#!/usr/bin/env python3
"""What the loop's thread was doing in each dispatch over 1 ms.

Usage: perf script --ns -F comm,tid,cpu,time,event,ip,sym,trace -i X.data > X.script
       python3 samples.py X.script LONG_DISPATCHES   (the diagnosis build's "long dispatch START DUR" lines)

perf1.sh samples cpu0 at 10 kHz (cpu-clock) with call chains, and records sched_switch. For each
long dispatch: the loop thread's samples (100 us each) grouped by what they were in (the
collector's work on the loop: gcAssistAlloc/gcDrain/scanstack...; the kernel: page faults,
io_uring_enter, other syscalls; percore's own frames otherwise, named by the innermost percore
function and the outermost handler-facing one), and cpu0's samples of other threads in the window.
"""
import re
import sys
from collections import Counter, defaultdict

HEAD = re.compile(r'^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d+):\s+(\S+):(.*)$')


def records(path):
    rec = None
    with open(path) as f:
        for line in f:
            if not line.strip():
                if rec:
                    yield rec
                rec = None
                continue
            if rec is None:
                m = HEAD.match(line.rstrip('\n'))
                if not m:
                    continue
                t = int(m[4]) * 10**9 + int(m[5])
                rec = dict(comm=m[1], tid=int(m[2]), t=t, ev=m[6], rest=m[7], stack=[])
            else:
                parts = line.split(None, 1)
                if len(parts) == 2:
                    rec['stack'].append(parts[1].strip())
    if rec:
        yield rec


GC = ('runtime.gcAssistAlloc', 'runtime.gcDrain', 'runtime.scanstack', 'runtime.gcBgMarkWorker',
      'runtime.markroot', 'runtime.bgsweep', 'runtime.sweepone', 'runtime.(*mspan).sweep',
      'runtime.wbBufFlush', 'runtime.gcWriteBarrier', 'runtime.bulkBarrierPreWrite')


def classify(stack):
    s = stack
    for g in GC:
        if any(f.startswith(g) for f in s):
            return 'gc:' + g.split('.', 1)[1]
    if any('page_fault' in f or 'handle_mm_fault' in f for f in s):
        return 'kernel:page fault'
    if any('io_uring_enter' in f for f in s):
        k = next((f for f in s if f.startswith(('tcp_', 'inet_', 'sock_', 'io_'))), '')
        return 'kernel:io_uring_enter ' + k
    if s and s[0].startswith(('ffff', '[k')) or any(f.startswith(('do_syscall_64', 'entry_SYSCALL')) for f in s):
        sc = next((f for f in s if f.startswith('__x64_sys_')), 'kernel')
        return 'kernel:' + sc
    pc = [f for f in s if 'percore' in f]
    inner = pc[0].replace('github.com/percore/percore/', '') if pc else (s[0] if s else '?')
    leaf = s[0] if s else '?'
    if leaf.startswith('runtime.mallocgc') or 'mallocgc' in leaf or leaf.startswith(('runtime.memclr', 'runtime.(*mcache)', 'runtime.(*mcentral)', 'runtime.(*mheap)', 'runtime.nextFreeFast')):
        return 'alloc: ' + inner
    return inner + ' [' + leaf + ']'


def main():
    path, longs = sys.argv[1], sys.argv[2]
    wins = []
    for line in open(longs):
        if line.startswith('long dispatch'):
            _, _, s, d = line.split()
            wins.append((int(s), int(d)))
    recs = [r for r in records(path)]
    cnt = Counter(r['tid'] for r in recs if r['ev'] == 'cpu-clock' and any('(*Loop).turn' in f for f in r['stack']))
    loop = cnt.most_common(1)[0][0]
    print(f'loop thread {loop}; {len(wins)} dispatches over 1 ms')
    total = Counter()
    for s, d in wins:
        w0, w1 = s, s + d
        mine = Counter()
        other = Counter()
        for r in recs:
            if r['ev'] != 'cpu-clock' or not (w0 <= r['t'] <= w1):
                continue
            if r['tid'] == loop:
                mine[classify(r['stack'])] += 1
            else:
                other[r['comm']] += 1
        n = sum(mine.values())
        print(f'\ndispatch at {s} ({d / 1e6:.2f} ms): {n} samples of the loop (~{n / 10:.1f} ms), others on cpu0: '
              + ', '.join(f'{c} {k}' for c, k in other.most_common(5)))
        for k, v in mine.most_common(12):
            print(f'   {v:4d} {k}')
        total.update(mine)
    print('\nall windows:')
    for k, v in total.most_common(25):
        print(f'   {v:4d} {k}')


main()
