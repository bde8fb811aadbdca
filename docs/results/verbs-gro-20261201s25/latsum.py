import json,statistics as st,sys
from collections import defaultdict
by=defaultdict(dict)
for f in sys.argv[1:]:
  for l in open(f):
    d=json.loads(l); by[d['variant']][(f,d['round'])]=d
for v in sorted({k.split('-')[0] for k in by} - {'base'}):
  for m in ('inline','thread'):
    N=by[v+'-'+m]; B=by['base-'+m]
    ks=[k for k in N if k in B]
    r=[N[k]['p50_us']/B[k]['p50_us'] for k in ks]
    c=[(N[k]['cpu_client_us_per_op']+N[k]['cpu_server_us_per_op'])/(B[k]['cpu_client_us_per_op']+B[k]['cpu_server_us_per_op']) for k in ks]
    print(v,m,'p50 ÷ base median %.3f [%.3f–%.3f] (%d; %d > 1)'%(st.median(r),min(r),max(r),len(r),sum(x>1 for x in r)),'p50 µs base %.2f %s %.2f'%(st.median([B[k]['p50_us'] for k in ks]),v,st.median([N[k]['p50_us'] for k in ks])),'CPU ratio %.3f'%st.median(c))
