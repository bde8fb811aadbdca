#!/usr/bin/env python3
"""probesum.py FILE...: probe rows (probe.py) summarised per link/wait and variant:
median (range) of CPU µs per round trip, p50, context switches and engine counts per
round; and each variant's CPU and context switches paired against B in the same round."""
import sys, statistics as st
from collections import defaultdict
rows = []
for fi, f in enumerate(sys.argv[1:]):
    for l in open(f):
        p = l.split()
        if len(p) < 7:
            continue
        kv = dict(x.split('=') for x in p[6:])
        rows.append(dict(v=p[0], cfg=p[1] + ' ' + p[2], rnd=(fi, p[3]), cpu=float(p[4]),
                         p50=float(p[5]), **{k: float(v) for k, v in kv.items()}))
def med(xs):
    return '%.2f (%.2f-%.2f)' % (st.median(xs), min(xs), max(xs)) if xs else '-'
cfgs = sorted({r['cfg'] for r in rows}, key=lambda c: (c.split()[0], c.split()[1] != 'block'))
vs = []
for r in rows:
    if r['v'] not in vs:
        vs.append(r['v'])
vs.sort(key=lambda v: (v != 'B', v))
for c in cfgs:
    print('##', c)
    by = defaultdict(dict)
    for r in rows:
        if r['cfg'] == c:
            by[r['v']][r['rnd']] = r
    for v in vs:
        rs = list(by[v].values())
        if not rs:
            continue
        line = '%-5s n=%d cpu %s  p50 %s  csw %s' % (v, len(rs), med([r['cpu'] for r in rs]),
                                                    med([r['p50'] for r in rs]), med([r['csw'] for r in rs]))
        line += '  c_sleep %.2f c_watch %.2f s_sleep %.2f early %.2f' % tuple(
            st.median([r[k] for r in rs]) for k in ('c_sleep', 'c_watch', 's_sleep', 'early'))
        if v != 'B':
            pc = [by[v][k]['cpu'] / by['B'][k]['cpu'] for k in by[v] if k in by['B']]
            pw = [by[v][k]['csw'] / by['B'][k]['csw'] for k in by[v] if k in by['B']]
            line += '  ÷B cpu %s csw %s' % (med(pc), med(pw))
        print(line)
