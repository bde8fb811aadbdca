import json,sys,statistics as st
from collections import defaultdict
d=defaultdict(dict)
for f in sys.argv[1:]:
  for l in open(f):
    r=json.loads(l); x=r['run']
    if not x: continue
    cpu=x.get('cpu_client_us_per_op',0)+x.get('cpu_server_us_per_op',0)
    d[(r['link'],r['n'],r['wait'])].setdefault(r['round'],{})[r['name']]=(cpu,x.get('p50_us'))
print('| link | n | wait | CPU/rtt base | warm | warm ÷ base paired median (range) | rounds above 1 | p50 base | p50 warm |')
print('| --- | ---: | --- | ---: | ---: | --- | --- | ---: | ---: |')
for k in sorted(d):
  rs=[v for v in d[k].values() if 'base' in v and 'warm' in v]
  if not rs: continue
  b=[v['base'][0] for v in rs]; w=[v['warm'][0] for v in rs]; q=[v['warm'][0]/v['base'][0] for v in rs]
  pb=[v['base'][1] for v in rs]; pw=[v['warm'][1] for v in rs]
  print('| %s | %d | %s | %.0f | %.0f | %.2f (%.2f–%.2f) | %d of %d | %.1f | %.1f |'%(k[0],k[1],k[2],st.median(b),st.median(w),st.median(q),min(q),max(q),sum(x>1 for x in q),len(q),st.median(pb),st.median(pw)))
