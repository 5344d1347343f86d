#!/usr/bin/env python3
"""cpu0 sample by sample around each long dispatch (perf1.sh): python3 windows.py X.script perf1-X.txt"""
import sys,re
sys.argv=[sys.argv[0]]+sys.argv[1:]
import os
exec(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'samples.py')).read().replace('\nmain()\n','\n'))
path, longs = sys.argv[1], sys.argv[2]
wins=[(int(l.split()[2]),int(l.split()[3])) for l in open(longs) if l.startswith('long dispatch')]
recs=list(records(path))
for s,d in wins:
    print('== window',s,d/1e6)
    for r in recs:
        if s-300000 <= r['t'] <= s+d+300000:
            tag = 'IN ' if s<=r['t']<=s+d else '   '
            print(tag, (r['t']-s)//1000, r['comm'], r['tid'], r['ev'], r['rest'][:150] if r['ev']!='cpu-clock' else classify(r['stack']))
