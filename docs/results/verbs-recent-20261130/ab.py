import sys,json,statistics as st,collections
rows=[json.loads(l) for l in open(sys.argv[1])]
A=sys.argv[2] if len(sys.argv)>2 else 'base'; B=sys.argv[3] if len(sys.argv)>3 else 'rec'
R=collections.defaultdict(dict)
for d in rows:
    if d['res']: R[(d['bin'],d['N'],d['depth'])][d['round']]=d['res']
cfgs=sorted({(k[1],k[2]) for k in R})
for N,D in cfgs:
    a=R[(A,N,D)]; b=R[(B,N,D)]
    va=[a[k]['mmsg_per_s'] for k in sorted(a)]; vb=[b[k]['mmsg_per_s'] for k in sorted(b)]
    ca=[1000*(a[k]['cpu_client_us_per_op']+a[k]['cpu_server_us_per_op']) for k in sorted(a)]
    cb=[1000*(b[k]['cpu_client_us_per_op']+b[k]['cpu_server_us_per_op']) for k in sorted(b)]
    x=[b[k]['mmsg_per_s']/a[k]['mmsg_per_s'] for k in sorted(a) if k in b]
    f=lambda v: f"{st.median(v):.3f} [{min(v):.3f}–{max(v):.3f}]" if v else '-'
    print(f"| {N} × {max(1,D//N)} | {f(va)}, CPU {st.median(ca):.0f} ns | {f(vb)}, CPU {st.median(cb):.0f} ns | {' '.join(f'{y:.2f}' for y in x)} | {st.median(x) if x else 0:.3f} |")
