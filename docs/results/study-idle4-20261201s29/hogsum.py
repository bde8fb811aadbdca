#!/usr/bin/env python3
# hogsum.py FILE [BASE]: per round and binary, the pooled mean round trip (Σ iters·rtt / Σ iters,
# as the phased trace's hogs phase); medians with ranges, paired ratios to BASE, sign counts,
# Wilcoxon-free exact sign test and a permutation rank-sum p.
import json, sys, statistics as st, itertools, random
f = sys.argv[1]; base = sys.argv[2] if len(sys.argv) > 2 else None
acc = {}
cpu = {}
for line in open(f):
    d = json.loads(line)
    r = d['row']
    if not r or not r.get('rtt_per_s'): continue
    k = (d['round'], d['name'])
    us, n = acc.get(k, (0.0, 0))
    it = r['iters']; acc[k] = (us + it * 1e6 / r['rtt_per_s'], n + it)
    c = cpu.setdefault(k, [0.0, 0]); c[0] += (r['cpu_client_us_per_op'] + r['cpu_server_us_per_op']) * it; c[1] += it
names = sorted({k[1] for k in acc})
rounds = sorted({k[0] for k in acc})
val = {k: us / n for k, (us, n) in acc.items()}
cval = {k: c[0] / c[1] for k, c in cpu.items()}
def med(xs): return f"{st.median(xs):.1f} ({min(xs):.1f}–{max(xs):.1f}) n={len(xs)}"
for n in names:
    xs = [val[(r, n)] for r in rounds if (r, n) in val]
    cs = [cval[(r, n)] for r in rounds if (r, n) in cval]
    print(f"{n:10s} rtt_mean_us {med(xs)}   cpu_us_per_op {med(cs)}")
if base:
    for n in names:
        if n == base: continue
        pr = [val[(r, n)] / val[(r, base)] for r in rounds if (r, n) in val and (r, base) in val]
        if not pr: continue
        up = sum(1 for x in pr if x > 1)
        a = [val[(r, base)] for r in rounds if (r, base) in val]; b = [val[(r, n)] for r in rounds if (r, n) in val]
        # permutation test on the difference of medians
        obs = abs(st.median(b) - st.median(a)); pool = a + b; cnt = 0; T = 20000
        rnd = random.Random(1)
        for _ in range(T):
            rnd.shuffle(pool)
            if abs(st.median(pool[len(a):]) - st.median(pool[:len(a)])) >= obs - 1e-12: cnt += 1
        # two-sided sign test
        from math import comb
        m = len(pr); k = min(up, m - up)
        ps = min(1.0, 2 * sum(comb(m, i) for i in range(k + 1)) / 2 ** m)
        print(f"{n}/{base}: median ratio {st.median(b)/st.median(a):.3f}; paired {med(pr)}; {up}/{m} rounds slower; sign p={ps:.3f}; perm p={cnt/T:.3f}")
