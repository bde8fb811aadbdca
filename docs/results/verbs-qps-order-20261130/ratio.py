# ratio.py ROWS.jsonl: per binary and configuration, the 64 B rate's median [min–max],
# CPU per message (both processes), and the ratio to one QP's rate in the same round
# (the measure), per round and its median.
import sys, json, statistics as st, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
R = collections.defaultdict(dict)
for d in rows:
    if d['res']:
        R[(d['bin'], d['N'], d['depth'])][d['round']] = d['res']
bins = sorted({k[0] for k in R})
cfgs = sorted({(k[1], k[2]) for k in R})
f = lambda v: f"{st.median(v):.3f} [{min(v):.3f}–{max(v):.3f}]" if v else '-'
print("| binary | N × in flight per QP | M msg/s | CPU ns/msg | ÷ one QP, per round | median |")
print("| --- | --- | --- | ---: | --- | ---: |")
for b in bins:
    one = R.get((b, 1, 512), {})
    for N, D in cfgs:
        a = R.get((b, N, D), {})
        if not a:
            continue
        v = [a[k]['mmsg_per_s'] for k in sorted(a)]
        c = [1000 * (a[k]['cpu_client_us_per_op'] + a[k]['cpu_server_us_per_op']) for k in sorted(a)]
        x = [a[k]['mmsg_per_s'] / one[k]['mmsg_per_s'] for k in sorted(a) if k in one]
        print(f"| {b} | {N} × {max(1, D // N)} | {f(v)} | {st.median(c):.0f} | "
              f"{' '.join(f'{y:.2f}' for y in x)} | {st.median(x) if x else 0:.2f} |")
