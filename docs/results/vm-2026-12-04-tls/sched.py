#!/usr/bin/env python3
"""Where the storm's loop thread spent its time off cpu0 (i26g, perf2.sh).

Reads `perf script -F comm,pid,tid,cpu,time,event,trace` of a perf record with
sched:sched_switch, sched:sched_waking, syscalls:sys_enter_futex and
syscalls:sys_enter_io_uring_enter, and the loop's thread id, and prints: the loop thread's
running stretches over 1 ms; its stretches off the CPU by kind (preempted while runnable;
asleep in futex, which is Go's scheduler: a locked M waits there for its goroutine to be
given a P; asleep in io_uring_enter, waiting for work) with, for a wake-up, the wait from
the wake-up to the CPU; and, for every wait for the CPU over 0.5 ms (preempted, or woken
and not yet running), which threads ran on cpu0 in that wait, summed by kind.

With a third argument (perf4.sh's output: "long dispatch START_NS DURATION_NS" lines, the
loop's dispatches over 1 ms on the perf record's CLOCK_MONOTONIC), it also splits each long
dispatch into the loop thread's states and says who held cpu0 while it was not running.

usage: sched.py SCRIPT LOOP_TID [LONG_DISPATCHES]
"""
import collections
import re
import sys

path, loop = sys.argv[1], int(sys.argv[2])
sw = re.compile(r'prev_comm=(.*) prev_pid=(\d+) prev_prio=(\d+) prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+) next_prio=(\d+)')
wk = re.compile(r'comm=(.*) pid=(\d+) prio=(\d+) target_cpu=(\d+)')
head = re.compile(r'^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([0-9.]+):\s+(\S+):\s*(.*)$')

tgid = {}            # tid -> pid
lastsys = {}         # tid -> last syscall entered
segs = []            # cpu0 run segments: (start, end, tid, comm, prio_in, prio_out)
cur0 = None          # (tid, comm, start, prio_in) on cpu0
on = []              # loop running stretches (start, end)
off = []             # (kind, t_out, t_wake, t_in, waker)
state = None         # loop: ('on', t) or ('off', kind, t_out, t_wake, waker)
loop_pid = None
for line in open(path):
    m = head.match(line)
    if not m:
        continue
    comm, pid, tid, cpu, t, ev, rest = m.groups()
    pid, tid, cpu, t = int(pid), int(tid), int(cpu), float(t)
    tgid[tid] = pid
    if tid == loop:
        loop_pid = pid
    if ev == 'syscalls:sys_enter_futex':
        lastsys[tid] = 'futex'
    elif ev == 'syscalls:sys_enter_io_uring_enter':
        lastsys[tid] = 'io_uring_enter'
    elif ev == 'sched:sched_waking':
        w = wk.match(rest)
        if w and int(w.group(2)) == loop and state and state[0] == 'off' and state[3] is None:
            state = ('off', state[1], state[2], t, f'{comm}/{tid}')
    elif ev == 'sched:sched_switch':
        s = sw.match(rest)
        if not s:
            continue
        pc, pp, ppr, pst, nc, npid, npr = s.groups()
        pp, ppr, npid, npr = int(pp), int(ppr), int(npid), int(npr)
        if cpu == 0:
            # cpu0 ran the thread switched in last until now; a few switches
            # away from the machine's agent (another process) are missing
            # from the record, so trust the last switch in, not this prev.
            if cur0:
                po = ppr if cur0[0] == pp else cur0[3]
                segs.append((cur0[2], t, cur0[0], cur0[1], cur0[3], po))
            cur0 = (npid, nc, t, npr)
        if pp == loop:
            if state and state[0] == 'on':
                on.append((state[1], t))
            kind = 'preempted' if pst.startswith('R') else 'sleep:' + lastsys.get(loop, '?')
            state = ('off', kind, t, None, None)
        if npid == loop:
            if state and state[0] == 'off':
                off.append((state[1], state[2], state[3], t, state[4]))
            state = ('on', t)

def who(tid, comm, prio_in, prio_out):
    if tid == 0:
        return 'idle'
    if tgid.get(tid) == loop_pid:
        p = max(prio_in, prio_out)
        return f'storm process, prio {prio_in}->{prio_out}' if prio_in != prio_out else f'storm process, prio {p} (nice {p-120})'
    return re.sub(r'[/:-]?\d+$', '', comm) + f' (other process, prio {prio_out})'

def held(a, b):
    c = collections.Counter()
    for s, e, tid, comm, pi, po in segs:
        if e <= a or s >= b or tid == loop:
            continue
        c[who(tid, comm, pi, po)] += min(e, b) - max(s, a)
    return c

ms = 1e3
print(f'loop thread {loop} (process {loop_pid}): {len(on)} running stretches, {len(off)} off the CPU')
long_on = sorted((e - s for s, e in on), reverse=True)
print(f'running stretches over 1 ms: {sum(1 for d in long_on if d > 1e-3)}, longest {", ".join(f"{d*ms:.2f}" for d in long_on[:5])} ms')
bykind = collections.defaultdict(list)
for k, to, tw, ti, w in off:
    bykind[k].append((ti - to, (ti - tw) if tw else None, to, tw, ti, w))
for k, v in sorted(bykind.items()):
    durs = sorted((x[0] for x in v), reverse=True)
    print(f'{k}: {len(v)} times, {sum(1 for d in durs if d > 1e-3)} over 1 ms, longest {", ".join(f"{d*ms:.2f}" for d in durs[:5])} ms, total {sum(durs)*ms:.0f} ms')
    delays = sorted((x[1] for x in v if x[1] is not None), reverse=True)
    if delays:
        print(f'   wake-up to CPU: {sum(1 for d in delays if d > 0.5e-3)} over 0.5 ms, {sum(1 for d in delays if d > 1e-3)} over 1 ms, longest {", ".join(f"{d*ms:.2f}" for d in delays[:5])} ms')
    if k.startswith('sleep:futex'):
        long = sorted((x for x in v if x[0] > 1e-3), key=lambda x: -x[0])
        wakers = collections.Counter(re.sub(r'/\d+$', '', x[5] or '?') for x in long)
        print(f'   futex sleeps over 1 ms woken by: {dict(wakers)}')
# waits for the CPU: preempted (out to in), woken (wake to in)
waits = []
for k, to, tw, ti, w in off:
    a = to if k == 'preempted' else tw
    if a is not None and ti - a > 0.5e-3:
        waits.append((ti - a, k, a, ti))
tot = collections.Counter()
for d, k, a, b in waits:
    tot.update(held(a, b))
print(f'waits for the CPU over 0.5 ms: {len(waits)}, {sum(d for d, *_ in waits)*ms:.0f} ms in all; cpu0 meanwhile:')
for name, d in tot.most_common(8):
    print(f'   {name}: {d*ms:.1f} ms')
print('the 5 longest waits for the CPU:')
for d, k, a, b in sorted(waits, reverse=True)[:5]:
    h = held(a, b)
    print(f'   {d*ms:.2f} ms ({k}): ' + ', '.join(f'{n} {x*ms:.2f}' for n, x in h.most_common(4)))

if len(sys.argv) > 3:
    longs = []
    for l in open(sys.argv[3]):
        if l.startswith('long dispatch '):
            a, d = map(int, l.split()[2:4])
            longs.append((a / 1e9, (a + d) / 1e9))
    # the loop's timeline: (start, end, state)
    tl = [(a, b, 'running') for a, b in on]
    for k, to, tw, ti, w in off:
        if k == 'preempted':
            tl.append((to, ti, 'preempted (runnable)'))
        else:
            tl.append((to, tw if tw else ti, k))
            if tw:
                tl.append((tw, ti, 'woken, waiting for the CPU'))
    tl.sort()
    import bisect
    starts = [x[0] for x in tl]
    def split(a, b):
        c = collections.Counter()
        i = max(0, bisect.bisect_right(starts, a) - 1)
        while i < len(tl) and tl[i][0] < b:
            s0, e0, st = tl[i]
            ov = min(e0, b) - max(s0, a)
            if ov > 0:
                c[st] += ov
            i += 1
        return c
    tot, hold = collections.Counter(), collections.Counter()
    rows = []
    for a, b in longs:
        c = split(a, b)
        tot.update(c)
        h = collections.Counter()
        for s0, e0, st in tl:
            if e0 <= a or s0 >= b or st == 'running':
                continue
            if st.startswith('sleep'):
                continue
            h.update(held(max(a, s0), min(b, e0)))
        hold.update(h)
        rows.append((b - a, c, h))
    print(f'\n{len(longs)} dispatches over 1 ms, {sum(b - a for a, b in longs)*ms:.0f} ms in all; the loop thread in them:')
    for st, d in tot.most_common():
        print(f'   {st}: {d*ms:.1f} ms')
    print('   cpu0 while the loop was runnable and not running:')
    for name, d in hold.most_common(6):
        print(f'      {name}: {d*ms:.1f} ms')
    print('the 8 longest dispatches:')
    for d, c, h in sorted(rows, key=lambda r: -r[0])[:8]:
        print(f'   {d*ms:.2f} ms: ' + ', '.join(f'{st} {x*ms:.2f}' for st, x in c.most_common()) +
              ('; cpu0: ' + ', '.join(f'{n} {x*ms:.2f}' for n, x in h.most_common(3)) if h else ''))
