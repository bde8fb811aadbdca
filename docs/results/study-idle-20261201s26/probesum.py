#!/usr/bin/env python3
"""probesum.py ROWS: medians (range) of the probe's CPU µs per round trip and p50, per
link/wait and side, the pair's share of a core at 100 round trips a second, and new ÷
base paired by round."""
import sys, statistics, collections
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
d = collections.defaultdict(dict)
for side, link, wait, r, rate, cpu, p50 in rows:
    d[(link, wait)].setdefault(side, {})[int(r)] = (float(cpu), float(p50))
print('| link | wait | side | rounds | CPU µs/rtt median (range) | % of a core at 100 rtt/s | p50 µs median | N ÷ B paired median (range) |')
print('|---|---|---|---|---|---|---|---|')
for (link, wait), sides in d.items():
    for side in ('B', 'N'):
        v = sides.get(side, {})
        if not v: continue
        cpus = [c for c, _ in v.values()]; p50 = [p for _, p in v.values()]
        m = statistics.median(cpus)
        pair = ''
        if side == 'N':
            rs = [v[r][0] / sides['B'][r][0] for r in v if r in sides.get('B', {})]
            if rs: pair = f'{statistics.median(rs):.2f} ({min(rs):.2f}–{max(rs):.2f})'
        print(f'| {link} | {wait} | {side} | {len(v)} | {m:.0f} ({min(cpus):.0f}–{max(cpus):.0f}) | {m/100:.1f} | {statistics.median(p50):.0f} | {pair} |')
