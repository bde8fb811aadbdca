#!/usr/bin/env python3
"""idlerows.py DIR: the idle phase's CPU µs per round trip (pair), every round of every
trace, pooled per side (first letter of the tag) and link; block and adaptive."""
import sys, json, glob, os, statistics, collections
d = collections.defaultdict(list)
for f in sorted(glob.glob(os.path.join(sys.argv[1], '*-*.jsonl'))):
    tag, link = os.path.basename(f)[:-6].split('-')
    for l in open(f):
        r = json.loads(l)
        if r.get('phase') == 'idle' and r.get('verb') in ('block', 'adaptive'):
            d[(link, r['verb'], tag[0])].append((tag, r['cpu_us_per_op'], r['cpu_cores']))
print('| link | wait | side | traces | rounds | CPU µs/rtt median (range) | % of a core (pair) median |')
print('|---|---|---|---|---|---|---|')
for k in sorted(d):
    v = d[k]; c = [x[1] for x in v]; cores = [x[2] for x in v]
    print(f'| {k[0]} | {k[1]} | {k[2]} | {len(set(x[0] for x in v))} | {len(v)} | {statistics.median(c):.0f} ({min(c):.0f}–{max(c):.0f}) | {100*statistics.median(cores):.2f} |')
