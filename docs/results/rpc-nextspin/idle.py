import json,sys,statistics as st
rows=[json.loads(l) for f in sys.argv[1:] for l in open(f) if l.startswith('{') and 'client_cores' in l]
g={}
for r in rows:
    g.setdefault((r['progress'],r['link'],r['mode']),{}).setdefault(r['adapt'],[]).append(r)
print("| progress | link | client mode | adapt | n | client % of a core median (min–max) | server % of a core median (min–max) | server next÷spin |")
print("|---|---|---|---|---:|---:|---:|---:|")
for k in sorted(g):
    med={}
    for a in ('spin','next'):
        rs=g[k].get(a,[])
        if not rs: continue
        c=sorted(100*r['client_cores'] for r in rs); s=sorted(100*(r['server_cores'] or 0) for r in rs)
        med[a]=(st.median(c),c[0],c[-1],st.median(s),s[0],s[-1],len(rs))
    for a in ('spin','next'):
        if a not in med: continue
        m=med[a]
        ratio=f"{m[3]/med['spin'][3]:.2f}" if a=='next' and 'spin' in med else ''
        print(f"| {k[0]} | {k[1]} | {k[2]} | {a} | {m[6]} | {m[0]:.2f} ({m[1]:.2f}–{m[2]:.2f}) | {m[3]:.2f} ({m[4]:.2f}–{m[5]:.2f}) | {ratio} |")
