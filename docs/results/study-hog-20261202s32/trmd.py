import json, sys, os, statistics as st
from collections import defaultdict
P = ['idle', 'saturated', 'hogs', 'background', 'trace']
side = defaultdict(lambda: defaultdict(list)); rows = []
for f in sys.argv[1:]:
    s = {}
    for l in open(f):
        if l.strip():
            r = json.loads(l)
            if r.get('study') == 'weft-phased-summary': s[(r['phase'], r['config'])] = r
    if not s: continue
    link = next(iter(s.values()))['link']; name = os.path.basename(f).split('-')[0]
    v = {p: (s[(p, 'adaptive')]['median'] if p == 'trace' else s[(p, 'adaptive')]['vs_oracle']) for p in P}
    idle = s[('idle', 'adaptive')]['median']
    k = ('main' if name[3] == 'M' else 'change', link)
    for p in P: side[k][p].append(v[p])
    side[k]['idle_cores'].append(idle)
    rows.append(f"| {link} {name[3:]} | " + ' | '.join(f"{v[p]:.3f}" for p in P) + f" | {100*idle:.2f} |")
print('\n'.join(rows)); print()
for k in sorted(side, key=lambda k: (k[1], k[0] != 'main')):
    d = side[k]; n = len(d['trace'])
    print(f"| {k[1]} {k[0]} | {n} | " + ' | '.join(f"{st.median(d[p]):.3f} [{min(d[p]):.2f}–{max(d[p]):.2f}]" for p in P)
          + f" | {sum(x <= 1.10 for p in P[:4] for x in d[p])} of {4*n} |")
