import sys,collections
L=[l.split() for l in open(sys.argv[1])]
# identify engine/app threads per pid
pids=collections.OrderedDict()
for t,pid,tid,n,v in L:
    pids.setdefault(pid,set()).add(tid)
rounds={}
for pid in pids:
    posts=[l for l in L if l[1]==pid and l[3]=='app_post' and l[2]==pid]
    rounds[pid]=len(posts)
for pid,tids in pids.items():
    for tid in sorted(tids):
        c=collections.Counter((n,v if n in('spin','spin_x','sleep','watch') and False else '') for t,p,tt,n,v in L if tt==tid)
        role='app' if tid==pid else 'engine'
        print(pid,role,'posts',rounds[pid], {k[0]:v for k,v in sorted(c.items())})
# spin budgets histogram
for pid,tids in pids.items():
    for tid in tids:
        if tid==pid: continue
        b=collections.Counter(int(v) for t,p,tt,n,v in L if tt==tid and n=='spin')
        w=collections.Counter(int(v) for t,p,tt,n,v in L if tt==tid and n=='watch')
        s=collections.Counter(min(int(v),50000) for t,p,tt,n,v in L if tt==tid and n=='sleep')
        print(pid,'spin budgets',sorted(b.items())[:20]); print(pid,'watch',sorted(w.items())[:30]); print(pid,'sleep',sorted(s.items())[:30])
