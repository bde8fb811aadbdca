import json,sys,statistics as st
from collections import defaultdict
d=defaultdict(dict)
for l in open(sys.argv[1]):
    r=json.loads(l); x=r['run']
    if not x: continue
    d[(r['wait'],r['round'])][r['name']]=(x['cpu_client_us_per_op']+x['cpu_server_us_per_op'], x['p50_us'])
for w in ('block','adaptive'):
    rs=[v for (ww,_),v in d.items() if ww==w and len(v)==3]
    print(f'{w}: {len(rs)} rounds; CPU µs/rtt median base %.0f ack %.0f ride %.0f; p50 base %.1f ack %.1f ride %.1f' % tuple(
        [st.median(v[n][0] for v in rs) for n in ('base','ack','ride')]+[st.median(v[n][1] for v in rs) for n in ('base','ack','ride')]))
    for a,b in (('ack','base'),('ride','base'),('ride','ack')):
        q=[v[a][0]/v[b][0] for v in rs]
        print(f'   {a}/{b}: median %.2f (%.2f–%.2f), %d of %d above 1' % (st.median(q),min(q),max(q),sum(x>1 for x in q),len(q)))
