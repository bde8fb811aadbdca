import sys, re, subprocess, json
def ivs(f):
    out = subprocess.run(['perf','sched','timehist','-i',f], capture_output=True, text=True).stdout
    iv = {}
    for l in out.splitlines()[3:]:
        p = l.split()
        if len(p) < 6: continue
        try: t = float(p[0]); r = float(p[-1])
        except: continue
        name = p[2]
        iv.setdefault(name, []).append((t - r/1e3, t))
    return iv
def union(a):
    a = sorted(a); o = []
    for s,e in a:
        if o and s <= o[-1][1]: o[-1] = (o[-1][0], max(o[-1][1], e))
        else: o.append((s,e))
    return o
def inter(a, b):
    i=j=0; o=[]
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0]); e = min(a[i][1], b[j][1])
        if s < e: o.append((s,e))
        if a[i][1] < b[j][1]: i += 1
        else: j += 1
    return o
tot = lambda a: sum(e-s for s,e in a)
for f in sys.argv[1:]:
    iv = ivs(f)
    apps = sorted([k for k in iv if k.startswith('base-weft[') and '/' not in k], key=lambda k: -tot(iv[k]))[:2]
    engs = [k for k in iv if k.startswith('weft-engine')]
    hog = max([k for k in iv if k.startswith('sh[')], key=lambda k: tot(iv[k]))
    A = union(iv[apps[0]]); B = union(iv[apps[1]])
    start = min(min(s for s,_ in A), min(s for s,_ in B)); end = max(max(e for _,e in A), max(e for _,e in B))
    both = inter(A, B)
    # app or its engine thread per process: side served
    d = json.loads(open(f.replace('.data','.json')).read().strip().splitlines()[-1])
    dur = 101000 / d['rtt_per_s']
    print('%s rate %.0fk  span %.3f s  A %.3f B %.3f both-apps %.3f hog %.3f  engines %.3f | rate per both-s %.0fk (run ~%.3f s)' % (
        f, d['rtt_per_s']/1e3, end-start, tot(A), tot(B), tot(both), tot(union(iv[hog])), sum(tot(iv[e]) for e in engs), 101000/tot(both)/1e3, dur))
