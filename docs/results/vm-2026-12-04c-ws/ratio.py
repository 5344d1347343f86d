import sys,re,collections,statistics
# ratio.py base=file other=file...: per-rep ratio other/base (runs paired in order), median (range)
def load(f):
    d=collections.OrderedDict()
    for l in open(f):
        m=re.match(r'(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op',l)
        if m: d.setdefault(m.group(1),[]).append(float(m.group(2)))
    return d
args=[a.split('=',1) for a in sys.argv[1:]]
base=load(args[0][1]); others=[(n,load(f)) for n,f in args[1:]]
print('| benchmark | '+' | '.join(f'{n}/{args[0][0]}' for n,_ in others)+' |')
for b,v in base.items():
    cells=[]
    for n,o in others:
        r=[x/y for x,y in zip(o[b],v)]
        cells.append(f'{statistics.median(r):.3f} ({min(r):.2f}-{max(r):.2f})')
    print(f'| {b} | '+' | '.join(cells)+' |')
