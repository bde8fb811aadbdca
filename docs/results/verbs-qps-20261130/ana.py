import sys,json,statistics as st,collections
# ana.py FILE...: per binary and (N, depth): rate median (min-max), ratio to the same
# binary's one QP at depth 512 and at depth 16 in the same round, CPU per message, memory.
rows=[json.loads(l) for f in sys.argv[1:] for l in open(f)]
R=collections.defaultdict(dict)
for d in rows:
    if d['res']: R[(d['bin'],d['N'],d['depth'])][d['round']]=d['res']
bins=sorted({k[0] for k in R}, key=lambda b: b!='main')
cfgs=sorted({(k[1],k[2]) for k in R})
def med(v): return f"{st.median(v):.2f} ({min(v):.2f}–{max(v):.2f})" if v else "–"
print("| N × window per QP | binary | M msg/s, median (min–max) | ÷ one QP ×512, per round | median | ÷ one QP ×16, median | CPU ns/msg (both), median | bytes/QP client / +conn / server / +conn |")
print("| --- | --- | --- | --- | ---: | ---: | ---: | --- |")
for N,D in cfgs:
    for b in bins:
        r=R[(b,N,D)]; rs=sorted(r)
        v=[r[k]['mmsg_per_s'] for k in rs]
        q512=[r[k]['mmsg_per_s']/R[(b,1,512)][k]['mmsg_per_s'] for k in rs if k in R[(b,1,512)]]
        q16=[r[k]['mmsg_per_s']/R[(b,1,16)][k]['mmsg_per_s'] for k in rs if k in R[(b,1,16)]]
        cpu=[1000*(r[k]['cpu_client_us_per_op']+r[k]['cpu_server_us_per_op']) for k in rs]
        mem=" / ".join(str(int(st.median([r[k].get(f) or 0 for k in rs]))) for f in ['client_bytes_per_qp','client_bytes_per_qp_connected','server_bytes_per_qp','server_bytes_per_qp_connected']) if N>1 else "–"
        print(f"| {N} × {max(1,D//N)} | {b} | {med(v)} | {' '.join(f'{x:.2f}' for x in q512) if N>1 or D!=512 else '–'} | {st.median(q512):.2f} | {st.median(q16):.2f} | {st.median(cpu):.0f} | {mem} |")
for other in bins[1:]:
    print()
    print(f"| N × window | {other} ÷ main, same round, per round | median |")
    print("| --- | --- | ---: |")
    for N,D in cfgs:
        a=R[('main',N,D)]; b=R[(other,N,D)]
        x=[b[k]['mmsg_per_s']/a[k]['mmsg_per_s'] for k in sorted(a) if k in b]
        print(f"| {N} × {max(1,D//N)} | {' '.join(f'{y:.2f}' for y in x)} | {st.median(x):.2f} |")
