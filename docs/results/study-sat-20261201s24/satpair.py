"""satpair.py FILE... : per configuration, new ÷ base per round (the two runs of a
configuration in one exclusive hold), median [range], and how many rounds new was higher;
plus each side's median [range] (M ops/s) and the pair's CPU µs/op."""
import json, sys, statistics as st
rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.strip()]
by = {}
for i, r in enumerate(rows):
    by.setdefault((r['round'], i // 1000), {})  # placeholder
runs = {}
# rounds restart per batch: key on (file order batch, round) by walking in order
batch, last = 0, 0
for r in rows:
    if r['round'] < last:
        batch += 1
    last = r['round']
    runs.setdefault((batch, r['round']), {})[r['name']] = r['row']
cfgs = sorted({n.split('-', 1)[1] for v in runs.values() for n in v})
for c in cfgs:
    rat, bs, ns, bc, nc = [], [], [], [], []
    for v in runs.values():
        b, n = v.get('b-' + c), v.get('n-' + c)
        if b: bs.append(b['rtt_per_s'] / 1e6); bc.append(b['cpu_client_us_per_op'] + b['cpu_server_us_per_op'])
        if n: ns.append(n['rtt_per_s'] / 1e6); nc.append(n['cpu_client_us_per_op'] + n['cpu_server_us_per_op'])
        if b and n: rat.append(n['rtt_per_s'] / b['rtt_per_s'])
    f = lambda x: f"{st.median(x):.3f} [{min(x):.3f}-{max(x):.3f}]" if x else '-'
    print(f"{c:6} base {f(bs)} n={len(bs)} cpu {st.median(bc) if bc else 0:.2f} | new {f(ns)} n={len(ns)} cpu {st.median(nc) if nc else 0:.2f} | new/base paired {f(rat)} higher {sum(x > 1 for x in rat)}/{len(rat)}")
