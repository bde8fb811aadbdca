import json,statistics as st,sys
rows=[json.loads(l) for f in sys.argv[1:] for l in open(f)]
for i,f in enumerate(sys.argv[1:]):
    pass
for q in (256,4096):
    out=[]
    for v in ('base','new'):
        x=[r['r']['mmsg_per_s'] for r in rows if r['qps']==q and r['variant']==v]
        c=[r['r']['cpu_client_us_per_op'] for r in rows if r['qps']==q and r['variant']==v]
        out.append('%.3f [%.3f–%.3f], CPU %.2f' % (st.median(x),min(x),max(x),st.median(c)))
    key=lambda r:(r['time'][:2],r['round'])
    pairs={}
    for f in sys.argv[1:]:
        for l in open(f):
            r=json.loads(l)
            if r['qps']==q: pairs.setdefault((f,r['round']),{})[r['variant']]=r['r']['mmsg_per_s']
    rat=[p['new']/p['base'] for p in pairs.values() if len(p)==2]
    b=[r['r']['mmsg_per_s'] for r in rows if r['qps']==q and r['variant']=='base']
    n=[r['r']['mmsg_per_s'] for r in rows if r['qps']==q and r['variant']=='new']
    print('| %d QPs × 1 | %s | %s | %.3f / %.3f (n=%d) |' % (q,out[0],out[1],st.median(n)/st.median(b),st.median(rat),len(rat)))
