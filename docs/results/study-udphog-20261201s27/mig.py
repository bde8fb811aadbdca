import sys, subprocess, collections
for f in sys.argv[1:]:
    out = subprocess.run(['perf','sched','timehist','--state','-i',f], capture_output=True, text=True).stdout
    last = {}  # thread -> (cpu, state)
    cnt = collections.Counter()
    apps=collections.Counter()
    rows=[]
    for l in out.splitlines()[3:]:
        p=l.split()
        if len(p)<7: continue
        try: t=float(p[0]); cpu=int(p[1].strip('[]'))
        except: continue
        n=p[2]; st=p[-1]
        if not (n.split('[')[0] in ('base-weft','new-weft','diag-weft') and '/' not in n): continue
        rows.append((t,cpu,n,st))
        apps[n]+=1
    top=[n for n,_ in apps.most_common(2)]
    for t,cpu,n,st in rows:
        if n not in top: continue
        if n in last and last[n][0]!=cpu:
            cnt['cpu change after '+last[n][1]]+=1
        cnt['switch-out '+st]+=1
        last[n]=(cpu,st)
    print(f, dict(cnt))
