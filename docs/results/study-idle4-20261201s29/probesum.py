#!/usr/bin/env python3
# probesum.py FILE BASE: per (link, wait) and binary: CPU µs per round trip (client+server; /100 = % of a core
# at 100 round trips/s), p50; medians (range, n); paired ratio to BASE per round; rounds above base.
import json, sys, statistics as st
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base = sys.argv[2]
g = defaultdict(lambda: defaultdict(dict))
for r in rows:
    if not r['run']: continue
    run = r['run']
    g[(r['link'], r['wait'])][r['name']][r['round']] = (run['cpu_client_us_per_op'] + run['cpu_server_us_per_op'], run['p50_us'])
for k in sorted(g):
    for i, fig in enumerate(['cpu', 'p50']):
        out = []
        for n in sorted(g[k]):
            xs = [v[i] for v in g[k][n].values()]
            s = f"{n} {st.median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f}) {len(xs)}"
            if n != base:
                pr = [g[k][n][r][i] / g[k][base][r][i] for r in g[k][n] if r in g[k][base]]
                if pr: s += f" [paired {st.median(pr):.2f} ({min(pr):.2f}–{max(pr):.2f}), {sum(p>1 for p in pr)}/{len(pr)} above]"
            out.append(s)
        print(f"{k[0]} {k[1]} {fig}: " + " | ".join(out))
