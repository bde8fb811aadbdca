import sys, subprocess, collections
for f in sys.argv[1:]:
    out = subprocess.run(['perf','sched','timehist','-i',f], capture_output=True, text=True).stdout
    rows=[]
    for l in out.splitlines()[3:]:
        p=l.split()
        if len(p)<6: continue
        try: t=float(p[0]); r=float(p[-1]); cpu=int(p[1].strip('[]'))
        except: continue
        rows.append((t-r/1e3,t,cpu,p[2]))
    apps=collections.Counter()
    for s,e,c,n in rows:
        if n.split('[')[0] in ('base-weft','new-weft','diag-weft','weft') and '/' not in n: apps[n]+=e-s
    top=[n for n,_ in apps.most_common(2)]
    t0=min(s for s,e,c,n in rows if n in top)
    W=0.02; acc=collections.defaultdict(float)
    for s,e,c,n in rows:
        if n in top: acc[(int((s-t0)/W),top.index(n),c)]+=e-s
    nw=max(k[0] for k in acc)+1; line=''
    for w in range(nw):
        a=[acc[(w,0,c)] for c in (0,1)]; b=[acc[(w,1,c)] for c in (0,1)]
        if sum(a)<0.003 or sum(b)<0.003: line+='.'; continue
        line+='C' if (a[0]>a[1])==(b[0]>b[1]) else 's'
    print('%-22s %s'%(f.split('/')[-1],line))
