import json,sys,statistics as st
rows=[json.loads(l) for f in sys.argv[1:] for l in open(f) if l.strip()]
by={}
for r in rows:
    by.setdefault(r['name'],[]).append(r['row'])
for n,v in by.items():
    ops=[x['rtt_per_s']/1e6 for x in v]; cpu=[x['cpu_client_us_per_op']+x['cpu_server_us_per_op'] for x in v]
    print(f"{n:10} n={len(v)} Mops med {st.median(ops):.3f} [{min(ops):.3f}-{max(ops):.3f}] cpu/op {st.median(cpu):.3f} p50 {st.median([x['p50_us'] for x in v]):.2f}")
