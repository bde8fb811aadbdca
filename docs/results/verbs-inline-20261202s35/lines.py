import sys,re,subprocess,collections
def load(f):
    out=subprocess.run(["callgrind_annotate","--auto=yes","--show-percs=no","--context=0",f],capture_output=True,text=True).stdout
    d=collections.Counter(); cur=None
    for line in out.splitlines():
        m=re.match(r"^-- Auto-annotated source: (.*)",line)
        if m: cur=m.group(1).split('/')[-1]; continue
        m=re.match(r"^\s*([0-9,]+|\.)\s(.*)$",line)
        if m and cur:
            c=0 if m.group(1)=='.' else int(m.group(1).replace(',',''))
            t=m.group(2).strip()
            if t.startswith("=>") or "unidentified" in t or "events annotated" in t: continue
            d[(cur,t)]+=c
    return d
a1,a2,b1,b2=[load(f) for f in sys.argv[1:5]]; n=int(sys.argv[5])
keys=set(a1)|set(a2)|set(b1)|set(b2)
rows=[]
for k in keys:
    da=(a2[k]-a1[k])/n; db=(b2[k]-b1[k])/n
    if abs(db-da)>=1.5: rows.append((db-da,da,db,k))
rows.sort(reverse=True)
print("total", sum(r[0] for r in rows))
for r in rows[:int(sys.argv[6]) if len(sys.argv)>6 else 60]: print(f"{r[0]:7.1f} {r[1]:7.1f} {r[2]:7.1f} {r[3][0]}: {r[3][1][:100]}")
