import json,sys,statistics as st
rows=[json.loads(l) for f in sys.argv[1:] for l in open(f) if l.strip().startswith('{')]
# run id: file index
runs={}
for f in sys.argv[1:]:
    for l in open(f):
        if l.strip().startswith('{'):
            r=json.loads(l); runs.setdefault(f,[]).append(r)
def med(v):
    v=[x for x in v if x is not None]
    return (st.median(v),min(v),max(v)) if v else (None,None,None)
def fmt(t,d=0):
    m,a,b=t
    if m is None: return '–'
    return f"{m:.{d}f} [{a:.{d}f}–{b:.{d}f}]"
fw=sorted({r['forwarder'] for r in rows})
for size in [64,512,1518]:
    print(f"== {size} B")
    for name in fw:
        zl=[];ro=[];rk=[];p50o=[];p99o=[];p50k=[];p99k=[];cpu=[];cpur=[];atcpu=[];flat=[];lost=[];fcpu=[]
        for f,rs in runs.items():
            by={r['forwarder']:r for r in rs if r['frame']==size}
            if name not in by: continue
            r=by[name]; k=by.get('linux kernel'); o=by.get('linux kernel, own core')
            zl.append(r['zero_loss_kpps']); flat.append(r['flat_out_kpps'])
            if o: ro.append(r['zero_loss_kpps']/o['zero_loss_kpps'])
            if k: rk.append(r['zero_loss_kpps']/k['zero_loss_kpps'])
            if o and r.get('at_p50_us') and o.get('at_p50_us'):
                p50o.append(r['at_p50_us']/o['at_p50_us']); p99o.append(r['at_p99_us']/o['at_p99_us'])
            if k and r.get('at_p50_us'):
                p50k.append(r['at_p50_us']/k['p50_us']); p99k.append(r['at_p99_us']/k['p99_us'])
            cpu.append(r.get('cpu_ns_per_pkt_all')); cpur.append(r.get('cpu_ns_per_pkt_router_core'))
            atcpu.append((r.get('at_cpu_ns_per_pkt_all'),r.get('at_cpu_ns_per_pkt_router_core')))
            fcpu.append((r.get('flat_out_cpu_ns_per_pkt_all'),r.get('flat_out_cpu_ns_per_pkt_router_core')))
            lost.append(r.get('at_lost'))
        print(f"  {name:32s} zl {fmt(med(zl))} flat {fmt(med(flat))} ÷own {fmt(med(ro),2)} ÷kern {fmt(med(rk),2)}")
        print(f"  {'':32s} per-run ÷own {[round(x,2) for x in ro]} ÷kern {[round(x,2) for x in rk]}")
        print(f"  {'':32s} at-kernel-rate p50÷own {fmt(med(p50o),2)} p99÷own {fmt(med(p99o),2)} p50÷kern {fmt(med(p50k),2)} p99÷kern {fmt(med(p99k),2)} lost {lost}")
        print(f"  {'':32s} cpu own-rate all/rc {fmt(med(cpu))} / {fmt(med(cpur))}; at kernel rate all/rc {fmt(med([a for a,_ in atcpu]))} / {fmt(med([b for _,b in atcpu]))}; flat all/rc {fmt(med([a for a,_ in fcpu]))} / {fmt(med([b for _,b in fcpu]))}")
