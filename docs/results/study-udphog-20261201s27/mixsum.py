#!/usr/bin/env python3
"""mixsum.py FILE.jsonl [A/B ...]: per configuration the median [range] of round trips/s,
p50, p99 and pair CPU per op; then each ratio A/B paired per hold (median [range], holds
where A was higher) and pooled (median of A / median of B)."""
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
holds, hold, seen = [], {}, set()
for d in rows:
    if d['name'] in seen:
        holds.append(hold); hold, seen = {}, set()
    seen.add(d['name'])
    r = d['row']
    if r is not None:
        hold[d['name']] = (r['rtt_per_s'] / 1e3, r['p50_us'], r['p99_us'],
                           r['cpu_client_us_per_op'] + r['cpu_server_us_per_op'])
holds.append(hold)
names = sorted({n for h in holds for n in h})
print('| configuration | runs | k rtt/s median [range] | p50 µs | p99 µs | CPU µs/op (pair) |')
print('| --- | ---: | --- | ---: | ---: | ---: |')
for n in names:
    v = [h[n] for h in holds if n in h]
    r = [x[0] for x in v]
    print('| %s | %d | %.0f [%.0f–%.0f] | %.0f | %.0f | %.2f |' % (n, len(v), st.median(r), min(r), max(r),
          st.median([x[1] for x in v]), st.median([x[2] for x in v]), st.median([x[3] for x in v])))
for pair in sys.argv[2:]:
    a, b = pair.split('/')
    p = [h[a][0] / h[b][0] for h in holds if a in h and b in h]
    if not p:
        continue
    pa = st.median([h[a][0] for h in holds if a in h]); pb = st.median([h[b][0] for h in holds if b in h])
    print('%s: paired median %.3f [%.3f–%.3f], %d of %d holds higher; pooled %.3f' % (
        pair, st.median(p), min(p), max(p), sum(x > 1 for x in p), len(p), pa / pb))
