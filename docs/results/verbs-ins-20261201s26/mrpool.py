import json,sys,statistics as st,collections
rows=[json.loads(l) for f in sys.argv[1:] for l in open(f)]
vs=sorted({r['variant'] for r in rows}, key=lambda v:(v!='base',v))
for k in ['stream_msg_s','lat_oneway_us']:
    by={(r.get('file',''),r['round'],r['variant']):r[k] for r in rows}
    b=[r[k] for r in rows if r['variant']=='base']
    line=f"{k}: base {st.median(b):.4g} [{min(b):.4g}-{max(b):.4g}]"
    for v in vs[1:]:
        n=[r[k] for r in rows if r['variant']==v]
        rb={r['round']:r[k] for r in rows if r['variant']=='base'}; rn={r['round']:r[k] for r in rows if r['variant']==v}
        ratios=[rn[i]/rb[i] for i in rb if i in rn]
        line+=f" | {v} {st.median(n):.4g} [{min(n):.4g}-{max(n):.4g}] ratio {st.median(n)/st.median(b):.3f} / {st.median(ratios):.3f} n={len(ratios)}"
    print(line)
