"""isum.py FILE... : the idle point per round: CPU µs per round trip (both processes) of
each (config, bin), adaptive ÷ block per binary and round, client spun waits."""
import json, re, sys, statistics as st
from collections import defaultdict
rows = defaultdict(dict)
for f in sys.argv[1:]:
    for l in open(f):
        r = json.loads(l)
        if not r.get('p50_us'): continue
        cpu = (r.get('cpu_client_us_per_op') or 0) + (r.get('cpu_server_us_per_op') or 0)
        w = re.findall(r'WaitStats \{ waits: (\d+), spun: (\d+)', r['stats'])
        rows[(f, r['round'])][(r['config'], r['bin'].split('/')[-1])] = (cpu, int(w[1][1]) if len(w) > 1 else -1, int(w[0][1]) if w else -1)
bins = sorted({b for v in rows.values() for (_, b) in v})
ratios = defaultdict(list); spun = defaultdict(list); cpus = defaultdict(list)
for k, v in sorted(rows.items()):
    line = []
    for b in bins:
        a, bl = v.get(('adaptive', b)), v.get(('block', b))
        if a and bl:
            ratios[b].append(a[0] / bl[0]); spun[b].append(a[1]); cpus[b].append((a[0], bl[0]))
            line.append(f"{b}: a {a[0]:.0f} b {bl[0]:.0f} a/b {a[0]/bl[0]:.2f} client spun {a[1]} server spun {a[2]}")
    print(k, ' | '.join(line))
for b in bins:
    rr = ratios[b]
    print(f"{b}: adaptive/block per round median {st.median(rr):.3f} [{min(rr):.2f}-{max(rr):.2f}] n={len(rr)}; adaptive cpu med {st.median(c[0] for c in cpus[b]):.0f}, block {st.median(c[1] for c in cpus[b]):.0f}; client spun waits median {st.median(spun[b])}")
