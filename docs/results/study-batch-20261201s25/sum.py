#!/usr/bin/env python3
"""sum.py FILE.jsonl: per configuration the median [range] of round trips/s, p99 and
CPU/op over the rounds (satload.sh rows); then adaptive against poll-thread, pooled
(n-pt and b-pt run the same poll-thread code) and paired per hold (n-ad / n-pt)."""
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by, holds, hold, seen = {}, [], {}, set()
for d in rows:
    if d['name'] in seen:  # a new hold starts when a name repeats
        holds.append(hold); hold, seen = {}, set()
    seen.add(d['name'])
    r = d['row']
    if r is None:
        continue
    v = (r['rtt_per_s'] / 1e3, r['p99_us'], r['cpu_client_us_per_op'] + r['cpu_server_us_per_op'])
    by.setdefault(d['name'], []).append(v)
    hold[d['name']] = v
holds.append(hold)
def fmt(xs):
    return '%.0f [%.0f–%.0f]' % (st.median(xs), min(xs), max(xs))
print('| configuration | runs | k rtt/s median [range] | p99 µs median | CPU µs/op (pair) median |')
print('| --- | ---: | --- | ---: | ---: |')
for n, vs in sorted(by.items()):
    print('| %s | %d | %s | %.0f | %.2f |' % (n, len(vs), fmt([v[0] for v in vs]),
          st.median([v[1] for v in vs]), st.median([v[2] for v in vs])))
pt = [v[0] for n in ('n-pt', 'b-pt') for v in by.get(n, [])]
for ad in ('n-ad', 'b-ad'):
    if ad in by and pt:
        print('%s / poll-thread (pooled medians): %.3f' % (ad, st.median([v[0] for v in by[ad]]) / st.median(pt)))
pairs = [h['n-ad'][0] / h['n-pt'][0] for h in holds if 'n-ad' in h and 'n-pt' in h]
if pairs:
    print('n-ad / n-pt paired per hold: median %.3f [%.3f–%.3f] over %d holds' % (st.median(pairs), min(pairs), max(pairs), len(pairs)))
