# ratio.py ROWS.jsonl [BASE_N:BASE_DEPTH]: per binary and configuration (N QPs × the
# per-QP window, `weft perf --qps N --tx-depth D` since the window is per QP), the
# 64 B rate's median [min–max], CPU per message (both processes), and the ratio to
# one QP's rate at BASE (default 1:128, perftest's default window) in the same round.
import sys, json, statistics as st, collections
rows = [json.loads(l) for l in open(sys.argv[1])]
bn, bd = map(int, (sys.argv[2] if len(sys.argv) > 2 else '1:128').split(':'))
R = collections.defaultdict(dict)
for d in rows:
    if d['res']:
        R[(d['bin'], d['N'], d['depth'])][d['round']] = d['res']
bins = sorted({k[0] for k in R})
cfgs = sorted({(k[1], k[2]) for k in R}, key=lambda c: (-c[1], c[0]))
f = lambda v: f"{st.median(v):.3f} [{min(v):.3f}–{max(v):.3f}]" if v else '-'
print(f"| binary | N × in flight per QP | M msg/s | CPU ns/msg | ÷ {bn} × {bd}, per round | median |")
print("| --- | --- | --- | ---: | --- | ---: |")
for b in bins:
    one = R.get((b, bn, bd), {})
    for N, D in cfgs:
        a = R.get((b, N, D), {})
        if not a:
            continue
        v = [a[k]['mmsg_per_s'] for k in sorted(a)]
        c = [1000 * (a[k]['cpu_client_us_per_op'] + a[k]['cpu_server_us_per_op']) for k in sorted(a)]
        x = [a[k]['mmsg_per_s'] / one[k]['mmsg_per_s'] for k in sorted(a) if k in one]
        mem = a[sorted(a)[-1]]
        m = f" ({mem.get('client_bytes_per_qp', 0)/1024:.1f} / {mem.get('server_bytes_per_qp', 0)/1024:.1f} KB)" if N > 1 else ''
        print(f"| {b} | {N} × {D}{m} | {f(v)} | {st.median(c):.0f} | "
              f"{' '.join(f'{y:.2f}' for y in x)} | {st.median(x) if x else 0:.2f} |")
# With two or more binaries: each one's rate ÷ the binary named `base` (else the
# first in the rows), per configuration and round (the rounds alternate the binaries).
order = list(dict.fromkeys(d['bin'] for d in rows if d['res']))
if len(order) > 1:
    b0 = 'base' if 'base' in order else order[0]
    order = [b0] + [b for b in order if b != b0]
    print(f"\n| N × in flight per QP | binary ÷ {b0}, per round | median | ratio of medians |")
    print("| --- | --- | ---: | ---: |")
    for b in order[1:]:
        for N, D in cfgs:
            a, z = R.get((b, N, D), {}), R.get((b0, N, D), {})
            ks = [k for k in sorted(a) if k in z]
            if not ks:
                continue
            x = [a[k]['mmsg_per_s'] / z[k]['mmsg_per_s'] for k in ks]
            rm = st.median(a[k]['mmsg_per_s'] for k in ks) / st.median(z[k]['mmsg_per_s'] for k in ks)
            print(f"| {b}: {N} × {D} | {' '.join(f'{y:.2f}' for y in x)} | {st.median(x):.2f} | {rm:.2f} |")
