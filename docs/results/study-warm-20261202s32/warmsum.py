import json,sys,statistics as st
from collections import defaultdict
d=defaultdict(list)
for l in open(sys.argv[1]):
    r=json.loads(l); x=r['run']
    if not x: continue
    cpu=x.get('cpu_client_us_per_op',0)+x.get('cpu_server_us_per_op',0)
    d[(r['link'],r['n'],r['wait'])].append(cpu)
for k in sorted(d): print(k, ' '.join('%.0f'%v for v in d[k]), ' median %.0f'%st.median(d[k]))
