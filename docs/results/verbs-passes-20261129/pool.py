import json,sys,statistics as st,collections
# pooled: files with variant renames; per-round ratios variant/base within each file's round
import os; os.chdir(os.path.dirname(os.path.abspath(__file__)))
spec=[('ab3.jsonl',{'base':'base','c1':'c1','c2':'head'}),('ab4.jsonl',{'base':'base','c1':'c1','head':'head'}),('ab5.jsonl',{'base':'base','c1':'c1','head':'head'}),('ab6.jsonl',{'base':'base','c1':'c1','head':'head'})]
vals=collections.defaultdict(list); ratios=collections.defaultdict(list); cpus=collections.defaultdict(list)
for f,ren in spec:
    rows=[json.loads(l) for l in open(f)]
    rows=[x for x in rows if 'error' not in x['r']]
    by={}
    for x in rows:
        r=x['r']; key=(r['test'],x['progress']); v=ren[x['variant']]
        val=r['p50_us'] if r['test']=='send-lat' else r['mmsg_per_s']
        cpu=r['cpu_client_us_per_op']+r['cpu_server_us_per_op']
        vals[key+(v,)].append(val); cpus[key+(v,)].append(cpu)
        by[(f,x['round'])+key+(v,)]=val
    for k,val in by.items():
        if k[-1]!='base':
            b=by.get(k[:-1]+('base',))
            if b: ratios[k[2:]].append(val/b)
for key in sorted(set(k[:2] for k in vals)):
    unit='us p50' if key[0]=='send-lat' else 'M msg/s'
    print(f"| {key[0]} {key[1]} ({unit}) |", end='')
    bm=st.median(vals[key+('base',)])
    for v in ['base','c1','head']:
        xs=vals[key+(v,)]; m=st.median(xs)
        s=f" {m:.3f} [{min(xs):.3f}–{max(xs):.3f}], CPU {st.median(cpus[key+(v,)]):.2f} µs |"
        if v!='base':
            rs=ratios[key+(v,)]
            s+=f" {m/bm:.3f} / {st.median(rs):.3f} (n={len(rs)}) |"
        print(s,end='')
    print()
