#!/usr/bin/env python3
"""hogsum.py ROWS: per name, k round trips/s median [range], p99 and CPU µs/op (pair)
medians, from hogs.sh rows; and each name ÷ B paired by round."""
import sys, json, statistics, collections
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
d = collections.defaultdict(dict)
for x in rows:
    r = x['row']
    if r: d[x['name']][x['round']] = (r['rtt_per_s'] / 1e3, r['p99_us'], r['cpu_client_us_per_op'] + r['cpu_server_us_per_op'])
print('| name | rounds | k rtt/s median [range] | p99 µs | CPU µs/op (pair) | ÷ B paired median [range] |')
print('|---|---|---|---|---|---|')
for n, v in d.items():
    k = [a for a, _, _ in v.values()]
    pr = [v[r][0] / d['B'][r][0] for r in v if r in d.get('B', {})] if n != 'B' else []
    ps = f'{statistics.median(pr):.2f} [{min(pr):.2f}–{max(pr):.2f}]' if pr else ''
    print(f'| {n} | {len(v)} | {statistics.median(k):.0f} [{min(k):.0f}–{max(k):.0f}] | {statistics.median([b for _, b, _ in v.values()]):.1f} | {statistics.median([c for _, _, c in v.values()]):.1f} | {ps} |')
