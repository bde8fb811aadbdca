import json,statistics as st,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
vs=[]
for r in rows:
    if r['variant'] not in vs: vs.append(r['variant'])
for v in vs:
    rs=[r for r in rows if r['variant']==v]
    key='p50_us' if v.startswith('lat') else 'mmsg_per_s'
    x=[r[key] for r in rs]
    cpu=[r.get('ops_per_cpu_s') for r in rs if r.get('ops_per_cpu_s')]
    print(f"{v:14s} n={len(x)} {key} median {st.median(x):.3f} [{', '.join(f'{a:.3f}' for a in sorted(x))}]" + (f"  ops/CPU-s median {st.median(cpu):,.0f}" if cpu else ""))
