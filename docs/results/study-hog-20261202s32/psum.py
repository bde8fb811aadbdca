"""psum.py FILE... : per (mode, bin, config): windows, pooled mean RTT µs (time over round
trips, as the trace's hogs figure), median window mean RTT, p99 median; bg: p99 median
[range]; blocked waits per window (both sides), CPU µs/op."""
import json, sys, re, statistics as st
from collections import defaultdict
g = defaultdict(list)
for f in sys.argv[1:]:
    for l in open(f):
        r = json.loads(l)
        g[(r['mode'], r['bin'].split('/')[-1], r['config'])].append(r)
for k, rs in sorted(g.items()):
    ok = [r for r in rs if r.get('rtt_per_s')]
    t = sum(r['iters'] / r['rtt_per_s'] for r in ok); n = sum(r['iters'] for r in ok)
    blocked = [sum(int(x) for x in re.findall(r'blocked: (\d+)', r['stats'])) for r in ok]
    waits = [sum(int(x) for x in re.findall(r'waits: (\d+)', r['stats'])) for r in ok]
    p99 = [r['p99_us'] for r in ok]
    cpu = [(r.get('cpu_client_us_per_op') or 0) + (r.get('cpu_server_us_per_op') or 0) for r in ok]
    wm = [1e6 / r['rtt_per_s'] for r in ok]
    print(f"{k[0]:4} {k[1]:12} {k[2]:11} n={len(ok):2}/{len(rs):2} pooled_rtt={1e6*t/n if n else 0:8.2f} "
          f"med_win_rtt={st.median(wm) if wm else 0:8.2f} p50={st.median([r['p50_us'] for r in ok]):.2f} p99 med={st.median(p99):8.1f} [{min(p99):.0f}-{max(p99):.0f}] "
          f"blocked/win={st.median(blocked) if blocked else 0:.0f} waits/win={st.median(waits) if waits else 0:.0f} cpu/op={st.median(cpu):.2f}")
