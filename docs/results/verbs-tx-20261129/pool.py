import json,sys,statistics as st,collections
# usage: pool.py FILE... ; per-round ratios variant/base within each file's round
vals=collections.defaultdict(list); ratios=collections.defaultdict(list); cpus=collections.defaultdict(list)
fails=collections.Counter(); times=[]; loads=[]
for f in sys.argv[1:]:
    rows=[json.loads(l) for l in open(f)]
    by={}
    for x in rows:
        r=x['r']; times.append(x['time']); loads.append(float(x['load']))
        if 'error' in r or r.get('test')=='failed': fails[(x['variant'],x['progress'])]+=1; continue
        key=(r['test'],x['progress']); v=x['variant']
        val=r['p50_us'] if r['test']=='send-lat' else r['mmsg_per_s']
        cpu=r['cpu_client_us_per_op']+r['cpu_server_us_per_op']
        vals[key+(v,)].append(val); cpus[key+(v,)].append(cpu)
        by[(f,x['round'])+key+(v,)]=val
    for k,val in by.items():
        if k[-1]!='base':
            b=by.get(k[:-1]+('base',))
            if b: ratios[k[2:]].append(val/b)
vs=sorted({k[2] for k in vals}, key=lambda v:(v!='base',v))
print('| shm 64 B |'+''.join(f' {v} |'+('' if v=='base' else f' {v} ÷ base |') for v in vs))
print('| --- |'+' --- |'*(2*len(vs)-1))
for key in sorted(set(k[:2] for k in vals)):
    unit='µs p50' if key[0]=='send-lat' else 'M msg/s'
    s=f"| {key[0]} {key[1]} ({unit}) |"
    bm=st.median(vals[key+('base',)])
    for v in vs:
        xs=vals[key+(v,)]; m=st.median(xs)
        s+=f" {m:.3f} [{min(xs):.3f}–{max(xs):.3f}], CPU {st.median(cpus[key+(v,)]):.2f} |"
        if v!='base':
            rs=ratios[key+(v,)]
            s+=f" {m/bm:.3f} / {st.median(rs):.3f} (n={len(rs)}) |"
    print(s)
print('times',min(times),max(times),'load',min(loads),max(loads),'fails',dict(fails))
