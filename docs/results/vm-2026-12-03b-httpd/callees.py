import sys, collections
# callees.py FILE FRAME [depth]: samples under FRAME by its direct callee
f, target = sys.argv[1], sys.argv[2]
stacks=[]; cur=[]
for line in open(f):
    line=line.strip()
    if not line:
        if cur: stacks.append(cur); cur=[]
        continue
    parts=line.split(None,1)
    cur.append(parts[1] if len(parts)>1 else '?')
if cur: stacks.append(cur)
tot=len(stacks); c=collections.Counter(); n=0
for s in stacks:
    # s[0] is leaf
    for i,fr in enumerate(s):
        if target in fr:
            n+=1
            c[s[i-1] if i>0 else '(self)']+=1
            break
print(f"{target}: {n} of {tot} samples ({100*n/tot:.1f}%)")
for k,v in c.most_common(25): print(f"  {100*v/tot:5.2f}% {k}")
