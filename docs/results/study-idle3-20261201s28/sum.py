"""sum.py probe.jsonl|sat.jsonl : per (link[, wait]) and side the median (range, n) of
CPU µs per op (client + server), rate and p50; N ÷ B of the medians and the median of
the per-round paired ratios."""
import json, sys, statistics as st
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
g = defaultdict(lambda: defaultdict(dict))
for r in rows:
    k = (r['link'], r.get('wait', 'adaptive'))
    run = r['run']
    g[k][r['side']][r['round']] = {
        'cpu': run['cpu_client_us_per_op'] + run['cpu_server_us_per_op'],
        'rate': run['rtt_per_s'], 'p50': run['p50_us']}
def f(v): return f'{v:.1f}' if v >= 10 else f'{v:.2f}'
print('| link | wait | figure | B median (range) n | N median (range) n | N ÷ B | paired N÷B median (range) |')
print('|---|---|---|---|---|---|---|')
for k in sorted(g):
    for fig in ['cpu', 'rate', 'p50']:
        cols = []; meds = {}
        for s in 'BN':
            xs = [v[fig] for v in g[k][s].values()]
            meds[s] = st.median(xs)
            cols.append(f'{f(meds[s])} ({f(min(xs))}–{f(max(xs))}) {len(xs)}')
        pr = [g[k]['N'][r][fig] / g[k]['B'][r][fig] for r in g[k]['N'] if r in g[k]['B']]
        print(f'| {k[0]} | {k[1]} | {fig} | ' + ' | '.join(cols) + f' | {meds["N"]/meds["B"]:.2f} | {st.median(pr):.2f} ({min(pr):.2f}–{max(pr):.2f}) |')
