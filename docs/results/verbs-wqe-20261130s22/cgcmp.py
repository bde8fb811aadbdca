import re,sys
def load(f):
    d={}
    for l in open(f):
        m=re.match(r'\s*([\d,]+)\s+\([^)]*\)\s+(.*)',l)
        if m:
            k=m.group(2).split(' [')[0].replace('/work/main/','').replace('/work/wt/wqe/','')
            d[k]=d.get(k,0)+int(m.group(1).replace(',',''))
    return d
A,B=sys.argv[1],sys.argv[2]
r={}
for t in [A,B]:
    a=load(f'/tmp/wqe/cg/{t}-s60k.full'); b=load(f'/tmp/wqe/cg/{t}-s10k.full')
    r[t]={k:(a[k]-b.get(k,0))/50000 for k in a}
keys=set(r[A])|set(r[B])
rows=sorted(keys,key=lambda k:-abs(r[B].get(k,0)-r[A].get(k,0)))
for k in rows[:int(sys.argv[3])]:
    print(f"{r[A].get(k,0):8.1f} {r[B].get(k,0):8.1f} {r[B].get(k,0)-r[A].get(k,0):+7.1f} {k[:150]}")
