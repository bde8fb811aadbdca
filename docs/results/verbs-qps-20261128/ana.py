import json,sys,statistics as st,collections
rows=[json.loads(l) for l in open(sys.argv[1])]
rate={}; mem={}
for r in rows:
    rec=r['rec'] or {}
    rate[(r['round'],r['side'],r['qps'],r['tx_depth'])]=rec.get('mmsg_per_s')
    if r['qps']>1: mem.setdefault((r['side'],r['qps'],r['tx_depth']),[]).append([rec.get(k) for k in ('client_bytes_per_qp','client_bytes_per_qp_connected','server_bytes_per_qp','server_bytes_per_qp_connected')])
rounds=sorted({k[0] for k in rate}); sides=sorted({k[1] for k in rate}); cfgs=sorted({(k[2],k[3]) for k in rate})
for c in cfgs:
    for s in sides:
        v=[rate.get((r,s)+c) for r in rounds]
        ratio=[ (rate.get((r,s)+c) or 0)/rate[(r,s,1,512)] for r in rounds if rate.get((r,s,1,512))]
        vv=[x for x in v if x]
        print(f"{c[0]:5} {c[1]:6} {s} rates {' '.join(f'{x:.2f}' if x else '-' for x in v)} med {st.median(vv):.2f} | ratio {' '.join(f'{x:.2f}' for x in ratio)} med {st.median(ratio):.2f} [{min(ratio):.2f}-{max(ratio):.2f}]")
for k,v in sorted(mem.items()):
    print(k,[int(st.median([x[i] for x in v])) for i in range(4)])
