#!/usr/bin/env python3
"""The loop goroutine's waits off its P in a Go trace (outside the dispatches too): how long,
why (yield's Gosched, preempted), whether in a mark phase, and what its P ran meanwhile.

Usage: python3 yieldwaits.py X.parsed [LOOP_GOID]   (X.parsed: go tool trace -d=parsed X.trace)
"""
import os
import re
import sys
from collections import Counter, defaultdict

exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'trace.py')).read().split('\ndef main')[0])
path=sys.argv[1]
if len(sys.argv) > 2:
    L = int(sys.argv[2])
else:  # the loop goroutine: the one that calls Loop.yield's Gosched
    c = Counter()
    for e in events(path):
        if e['kind'] == 'StateTransition' and 'Reason="runtime.Gosched"' in e['rest'] and any('(*Loop).yield' in f for f in e['stack']):
            c[int(re.search(r'GoID=(\d+)', e['rest'])[1])] += 1
    L = c.most_common(1)[0][0]
print('loop goroutine', L)
offs=[]; cur=None
syscalls=[]; sysc=None
gcrange=[]; openr={}
prun=defaultdict(list)
created={}
for e in events(path):
    if e['kind']=='StateTransition' and 'GoID=' in e['rest']:
        m=re.search(r'GoID=(\d+) (\w+)->(\w+) Reason="([^"]*)"',e['rest'])
        g=int(m[1])
        if m[2]=='NotExist': created[g]=e['stack']
        if m[3]=='Running': prun[e['P']].append((e['t'],g))
        if g!=L: continue
        if m[3] == 'Syscall':
            sysc = (e['t'], short(e['stack'], 5))
        elif m[2] == 'Syscall' and sysc:
            syscalls.append((e['t'] - sysc[0], sysc[1], m[3]))
            sysc = None
        if m[2]=='Running' and m[3] in ('Runnable','Waiting'):
            cur=(e['t'],m[3],m[4],short(e['stack'],4))
        elif m[3]=='Running' and cur:
            offs.append((e['t']-cur[0],cur,e['P']))
            cur=None
    elif e['kind'] in('RangeBegin','RangeEnd') and 'Scope=Goroutine' not in e['rest']:
        name=re.search(r'Name="([^"]*)"',e['rest'])[1]
        if e['kind']=='RangeBegin': openr[name]=e['t']
        elif name in openr: gcrange.append((name,openr.pop(name),e['t']))
marks=[x for x in gcrange if x[0]=='GC concurrent mark phase']
def inmark(t): return any(a<=t<=b for _,a,b in marks)
def who(P,t0,t1):
    c=Counter()
    for t,g in prun.get(P,[]):
        if t0<=t<=t1:
            st=created.get(g,[])
            c[short(st,2) or str(g)]+=1
    return c.most_common(3)
offs.sort(key=lambda x:-x[0])
print('off-CPU (Go) intervals of the loop goroutine:',len(offs),'over 0.5ms:',sum(1 for o in offs if o[0]>5e5),'over 1ms:',sum(1 for o in offs if o[0]>1e6))
byr=Counter(); 
for d,c,p in offs:
    if d>5e5: byr[(c[1],c[2],'mark' if inmark(c[0]) else 'nomark')]+=1
print(byr)
for d,c,p in offs[:25]:
    print(f'{d/1e6:.2f} ms {c[1]} {c[2]!r} mark={inmark(c[0])} at {c[3]} ; P ran: {who(p,c[0],c[0]+d)}')

syscalls.sort(key=lambda x: -x[0])
print('the loop goroutine\'s longest system calls (Go\'s view, the thread off the CPU inside included):')
for d, st, to in syscalls[:8]:
    print(f'{d/1e6:.2f} ms, then {to}: {st}')
