"""boot.py FILE... : the hogs phase's figure resampled from measured windows. Each
simulated trace: 3 rounds, each round 4 windows per configuration drawn with replacement
from that configuration's windows (adaptive from weft-main only; poll-thread and
poll-inline from every binary: their code is the same), a round's figure their time over
their round trips, the phase's figure the median of 3 rounds; adaptive ÷ the better of
poll-thread and poll-inline."""
import json, sys, random, statistics as st
from collections import defaultdict
w = defaultdict(list)
for f in sys.argv[1:]:
    for l in open(f):
        r = json.loads(l)
        if r['mode'] != 'hogs' or not r.get('rtt_per_s'): continue
        if not r['bin'].endswith('weft-main'): continue
        w[r['config']].append((r['iters'], r['iters'] / r['rtt_per_s']))
print({k: len(v) for k, v in w.items()})
random.seed(1)
def fig(c):
    rounds = []
    for _ in range(3):
        ws = [random.choice(w[c]) for _ in range(4)]
        rounds.append(1e6 * sum(t for _, t in ws) / sum(n for n, _ in ws))
    return st.median(rounds)
rs = []; orc = defaultdict(int)
for _ in range(20000):
    a = fig('adaptive'); o = {c: fig(c) for c in ('poll-thread', 'poll-inline')}
    b = min(o, key=o.get); orc[b] += 1
    rs.append(a / o[b])
rs.sort()
q = lambda p: rs[int(p * len(rs))]
print(f"adaptive/oracle: median {q(.5):.2f}, 10-90% {q(.1):.2f}-{q(.9):.2f}, P(>1.10) {sum(x > 1.10 for x in rs)/len(rs):.2f}, P(>1.40) {sum(x > 1.40 for x in rs)/len(rs):.2f}; oracle {dict(orc)}")
