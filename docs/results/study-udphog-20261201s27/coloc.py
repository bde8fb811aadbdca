import sys, subprocess, json, os
def load(f):
    out = subprocess.run(['perf','sched','timehist','-i',f], capture_output=True, text=True).stdout
    rows=[]
    for l in out.splitlines()[3:]:
        p=l.split()
        if len(p)<6: continue
        try: t=float(p[0]); r=float(p[-1]); cpu=int(p[1].strip('[]'))
        except: continue
        rows.append((t-r/1e3,t,cpu,p[2]))
    return rows
def union(a):
    a=sorted(a); o=[]
    for s,e in a:
        if o and s<=o[-1][1]: o[-1]=(o[-1][0],max(o[-1][1],e))
        else: o.append((s,e))
    return o
def inter(a,b):
    i=j=0;o=[]
    while i<len(a) and j<len(b):
        s=max(a[i][0],b[j][0]); e=min(a[i][1],b[j][1])
        if s<e:o.append((s,e))
        if a[i][1]<b[j][1]: i+=1
        else: j+=1
    return o
tot=lambda a: sum(e-s for s,e in a)
for f in sys.argv[1:]:
    rows=load(f)
    apps={}
    for s,e,c,n in rows:
        if n.split('[')[0] in ('base-weft','new-weft','diag-weft','weft') and '/' not in n: apps.setdefault(n,[]).append((s,e,c))
    apps=sorted(apps, key=lambda k:-sum(e-s for s,e,_ in apps[k]))[:2]
    A=[(s,e,c) for s,e,c,n in rows if n==apps[0]]; B=[(s,e,c) for s,e,c,n in rows if n==apps[1]]
    t0=min(x[0] for x in A+B); t1=max(x[1] for x in A+B)
    # per 10ms window: cpu where each app ran most; colocated if same cpu and both ran >=1ms
    W=0.01; n=int((t1-t0)/W)+1
    import collections
    acc=collections.defaultdict(float)
    for tag,L in (('A',A),('B',B)):
        for s,e,c in L:
            acc[(int((s-t0)/W),tag,c)]+=e-s
    col=0; sep=0
    for w in range(n):
        a=[acc[(w,'A',c)] for c in (0,1)]; b=[acc[(w,'B',c)] for c in (0,1)]
        if sum(a)<0.002 or sum(b)<0.002: continue
        ca=0 if a[0]>a[1] else 1; cb=0 if b[0]>b[1] else 1
        if ca==cb: col+=1
        else: sep+=1
    both=tot(inter(union([(s,e) for s,e,_ in A]),union([(s,e) for s,e,_ in B])))
    js=f.replace('.data','.json'); rate=''
    if os.path.exists(js):
        d=json.loads(open(js).read().strip().splitlines()[-1]); rate='%.0fk'%(d['rtt_per_s']/1e3)
    print('%-28s rate %5s span %.2fs coloc %3.0f%% of 10ms windows (%d/%d), both-apps-on %.2fs'%(os.path.basename(f),rate,t1-t0,100*col/max(1,col+sep),col,col+sep,both))
