import sys,re,collections,statistics
# med.py name=file ...: median (min-max) ns/op per benchmark per file
res=collections.OrderedDict()
names=[]
for a in sys.argv[1:]:
    n,f=a.split('=',1); names.append(n)
    for l in open(f):
        m=re.match(r'(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op',l)
        if m: res.setdefault(m.group(1),{}).setdefault(n,[]).append(float(m.group(2)))
def fmt(v):
    u='ns'
    if statistics.median(v)>1000: v=[x/1000 for x in v]; u='us'
    return f"{statistics.median(v):.4g} {u} ({min(v):.4g}-{max(v):.4g})"
print('| benchmark | '+' | '.join(names)+' |')
for b,d in res.items():
    print(f'| {b} | '+' | '.join(fmt(d[n]) if n in d else '' for n in names)+' |')
