import sys,json,statistics as st,collections
rows=[json.loads(l) for f in sys.argv[1:] for l in open(f)]
bins=[]
for d in rows:
    if d['bin'] not in bins: bins.append(d['bin'])
rate=collections.defaultdict(dict); mem=collections.defaultdict(list); cpu=collections.defaultdict(list); loads=collections.defaultdict(list)
for d in rows:
    r=d['res']
    if not r: continue
    rate[(d['bin'],d['N'],d['depth'])][d['round']]=r['mmsg_per_s']
    loads[d['round']].append(d['load'])
    if 'client_bytes_per_qp' in r:
        mem[(d['bin'],d['N'],d['depth'])].append((r['client_bytes_per_qp'],r['client_bytes_per_qp_connected'],r['server_bytes_per_qp'],r['server_bytes_per_qp_connected']))
    cpu[(d['bin'],d['N'],d['depth'])].append((r['cpu_client_us_per_op']+r['cpu_server_us_per_op'])*1000)
cfgs=sorted({(k[1],k[2]) for k in rate})
print("loads per round:", {k:(min(v),max(v)) for k,v in loads.items()})
print("| N x window | " + " | ".join(f"{b}: Mmsg/s median (min-max) | {b}: ratio to 1 QP per round | {b}: median ratio" for b in bins)+" |")
for N,D in cfgs:
    w=max(1,D//N)
    cells=[]
    for b in bins:
        rr=rate[(b,N,D)]; one=rate[(b,1,512)]
        vals=[rr[k] for k in sorted(rr)]
        ratios=[rr[k]/one[k] for k in sorted(rr) if k in one]
        cells.append(f"{st.median(vals):.2f} ({min(vals):.2f}-{max(vals):.2f})")
        cells.append(" ".join(f"{x:.2f}" for x in ratios) if N>1 else "-")
        cells.append(f"{st.median(ratios):.2f}" if N>1 else "-")
    print(f"| {N} x {w} | "+" | ".join(cells)+" |")
print()
print("| N x window | "+" | ".join(f"{b}: ns CPU/msg (both) | {b}: bytes/QP client, +conn, server, +conn" for b in bins)+" |")
for N,D in cfgs:
    w=max(1,D//N); cells=[]
    for b in bins:
        cells.append(f"{st.median(cpu[(b,N,D)]):.0f}")
        m=mem[(b,N,D)]
        cells.append(" / ".join(f"{st.median([x[i] for x in m]):.0f}" for i in range(4)) if m else "-")
    print(f"| {N} x {w} | "+" | ".join(cells)+" |")
