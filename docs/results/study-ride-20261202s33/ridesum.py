# ridesum.py ROWS: medians over rounds of CPU per sparse round trip (client + server
# µs per rtt) and p50, binaries "base" and "ride" (ride.sh's rows), per wait mode.
import json, sys, statistics as st
from collections import defaultdict
d = defaultdict(dict)
for l in open(sys.argv[1]):
    r = json.loads(l); x = r['run']
    if not x: continue
    d[(r['wait'], r['round'])][r['name']] = (x['cpu_client_us_per_op'] + x['cpu_server_us_per_op'], x['p50_us'])
for w in ('block', 'adaptive'):
    rs = [v for (ww, _), v in sorted(d.items()) if ww == w and len(v) == 2]
    if not rs: continue
    print(f'{w}: {len(rs)} rounds; CPU µs/rtt median base %.1f ride %.1f; p50 µs base %.1f ride %.1f' % tuple(
        [st.median(v[n][0] for v in rs) for n in ('base', 'ride')] + [st.median(v[n][1] for v in rs) for n in ('base', 'ride')]))
    q = [v['ride'][0] / v['base'][0] for v in rs]
    print('   ride/base CPU per round: ' + ' '.join('%.2f' % x for x in q))
    print('   median %.2f (%.2f–%.2f), %d of %d above 1' % (st.median(q), min(q), max(q), sum(x > 1 for x in q), len(q)))
