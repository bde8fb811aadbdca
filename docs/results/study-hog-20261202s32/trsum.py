"""trsum.py FILE... : adaptive ÷ the phase's oracle per phased trace (one line each), then
median [range] per side, the side being the file name's letter after "hog" (M: main,
N: the change) and the link; adaptive's own idle CPU (cores of the pair)."""
import json, sys, os, statistics as st
from collections import defaultdict
P = ['idle', 'saturated', 'hogs', 'background', 'trace']
side = defaultdict(lambda: defaultdict(list))
for f in sys.argv[1:]:
    s = {}
    for l in open(f):
        if l.strip():
            r = json.loads(l)
            if r.get('study') == 'weft-phased-summary':
                s[(r['phase'], r['config'])] = r
    if not s:
        print(f, 'no summary'); continue
    link = next(iter(s.values()))['link']
    name = os.path.basename(f).split('-')[0]
    k = (name[3] if name.startswith('hog') else name, link)
    vals = {}
    for p in P:
        a = s.get((p, 'adaptive'), {})
        vals[p] = a.get('median') if p == 'trace' else a.get('vs_oracle')
        side[k][p].append(vals[p])
    idle = s.get(('idle', 'adaptive'), {}).get('median')
    side[k]['idle_cores'].append(idle)
    print(f"{name:7} {link}: " + ' '.join(f"{p} {vals[p]:.3f}" for p in P) + f" | idle adaptive {100*idle:.2f} % of a core, oracle {s[('idle','adaptive')]['oracle']}")
print()
for k in sorted(side):
    d = side[k]
    n = len(d['trace'])
    print(f"{k[0]} {k[1]} ({n}): " + ' '.join(f"{p} {st.median(d[p]):.3f} [{min(d[p]):.2f}-{max(d[p]):.2f}]" for p in P)
          + f" | idle adaptive {100*st.median(d['idle_cores']):.2f} %; within 10 %: {sum(x <= 1.10 for p in P[:4] for x in d[p])} of {4*n}")
