import json,sys,statistics as st
rows=[json.loads(l) for l in open(sys.argv[1])]
for v in ['base','new']:
    r=[x for x in rows if x['variant']==v]
    rate=[x['rtt_per_s'] for x in r]; cpu=[x['cpu_client_us_per_op']+x['cpu_server_us_per_op'] for x in r]
    p50=[x['p50_us'] for x in r]
    print(f"{v}: n={len(r)} rtt_per_s median {st.median(rate):.0f} [{min(rate):.0f}-{max(rate):.0f}]  cpu us/op median {st.median(cpu):.3f} [{min(cpu):.3f}-{max(cpu):.3f}]  p50 {st.median(p50):.2f} [{min(p50):.2f}-{max(p50):.2f}]")
b=[x for x in rows if x['variant']=='base']; n=[x for x in rows if x['variant']=='new']
mb=st.median([x['rtt_per_s'] for x in b]); mn=st.median([x['rtt_per_s'] for x in n])
cb=st.median([x['cpu_client_us_per_op']+x['cpu_server_us_per_op'] for x in b]); cn=st.median([x['cpu_client_us_per_op']+x['cpu_server_us_per_op'] for x in n])
print(f"ratio new/base: rate {mn/mb:.3f}, cpu/op {cn/cb:.3f}")
# per-round paired ratios
rs=[]
for k in sorted(set(x['round'] for x in rows)):
    a=[x for x in b if x['round']==k]; c=[x for x in n if x['round']==k]
    if a and c: rs.append(c[0]['rtt_per_s']/a[0]['rtt_per_s'])
print("paired rate ratios:", " ".join(f"{x:.3f}" for x in rs), f"median {st.median(rs):.3f}")
