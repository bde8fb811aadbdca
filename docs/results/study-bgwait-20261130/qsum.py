import sys,collections,statistics as st
# qsum.py BASE FILE...: the quiet points (quiet2.sh output): per link, point and binary the
# median (range) of p50, p99 and CPU µs per round trip; and per binary against BASE the
# median over rounds of the ratio in the same round (paired: same file, round, link).
v=collections.defaultdict(list); byround={}
base=sys.argv[1]; seen=collections.Counter()
for f in sys.argv[2:]:
    for l in open(f):
        w=l.split()
        if len(w)<12 or w[4]!='p50': continue
        r,link,b,pt=w[0],w[1],w[2],w[3]
        seen[(f,r,link,pt,b)]+=1; r=r+'.'+str(seen[(f,r,link,pt,b)])
        p50,p99,cpu=float(w[5]),float(w[7]),float(w[11])
        v[(link,pt,b)].append((p50,p99,cpu)); byround[(f,r,link,pt,b)]=(p50,p99,cpu)
def m(x): return '%s (%s–%s)'%(fmt(st.median(x)),fmt(min(x)),fmt(max(x)))
def fmt(x): return '%.2f'%x if x<10 else '%.0f'%x
print('| link | point | binary | rounds | p50 µs | p99 µs | CPU µs per round trip | ÷ %s paired: p50 / p99 / CPU (rounds) |'%base)
print('|---|---|---|---:|---|---|---|---|')
for k in sorted(v):
    link,pt,b=k; x=v[k]
    pr=''
    if b!=base:
        rs=[(byround[kk],byround[(kk[0],kk[1],link,pt,base)]) for kk in byround if kk[2:]==(link,pt,b) and (kk[0],kk[1],link,pt,base) in byround]
        if rs:
            pr='%.2f / %.2f / %.2f (%d; CPU lower in %d)'%tuple([st.median([a[i]/c[i] for a,c in rs]) for i in range(3)]+[len(rs),sum(1 for a,c in rs if a[2]<c[2])])
    print('| %s | %s | %s | %d | %s | %s | %s | %s |'%(link,pt,b,len(x),m([a[0] for a in x]),m([a[1] for a in x]),m([a[2] for a in x]),pr))
