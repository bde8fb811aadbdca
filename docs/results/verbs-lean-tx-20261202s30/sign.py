#!/usr/bin/env python3
# sign.py FILE...: per cell, rounds in which each variant beat base (same file, same
# round), with a two-sided sign test (send-lat: lower p50 better; send-bw: higher rate).
import json, sys
from math import comb
by = {}
for f in sys.argv[1:]:
    for l in open(f):
        x = json.loads(l); r = x['r']
        if r.get('test') == 'failed': continue
        key = (r['test'], x['progress'])
        by[(f, x['round']) + key + (x['variant'],)] = r['p50_us'] if r['test'] == 'send-lat' else r['mmsg_per_s']
for v in sorted({k[4] for k in by} - {'base'}):
    for key in sorted({k[2:4] for k in by}):
        better = n = 0
        for k, val in by.items():
            if k[2:4] == key and k[4] == v and (b := by.get(k[:4] + ('base',))) is not None:
                n += 1; better += (val < b) if key[0] == 'send-lat' else (val > b)
        m = min(better, n - better); p = min(1, 2 * sum(comb(n, i) for i in range(m + 1)) / 2 ** n)
        print(f'{v} {key[0]} {key[1]}: {better} of {n} better, p {p:.3f}')
