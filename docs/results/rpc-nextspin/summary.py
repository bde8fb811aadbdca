"""Medians (min-max) per configuration of the rows abab.sh tagged "spin" (before) and
"next" (after) (or "spin2", the A/A control), with B/spin ratios (B: next or spin2) and, where the run has gRPC rows, weft/gRPC
(unix socket) ratios of the medians.  usage: summary.py FILE.jsonl..."""
import json, sys, statistics as st

rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.startswith('{')]
weft, grpc = {}, {}
for r in rows:
    if 'ops_per_s' not in r:
        continue
    if r['system'] == 'grpc':
        grpc.setdefault((r['link'], r['clients'], r['outstanding']), []).append(r)
        continue
    k = (r['link'], r['mode'], r['clients'], r['outstanding'], r['size'], r.get('pace_us', 0))
    weft.setdefault(k, {}).setdefault(r['adapt'], []).append(r)


def ms(v):
    v = sorted(v)
    return st.median(v), v[0], v[-1]


def cpu(r):
    return (r.get('cpu_client_us_per_call') or 0) + (r.get('cpu_server_us_per_call') or 0)


def stats(rs):
    return dict(n=len(rs), ops=ms([r['ops_per_s'] for r in rs]), p50=ms([r['p50_us'] for r in rs]),
                p99=ms([r['p99_us'] for r in rs]), cpu=ms([cpu(r) for r in rs]),
                cps=ms([r['calls_per_cpu_s'] or 0 for r in rs]))


if grpc:
    print("gRPC (tonic), same runs:\n")
    print("| link | c × o | n | calls/s median (min–max) | p50 µs median (min–max) | p99 µs median | calls per CPU-s median |")
    print("|---|---|---:|---|---|---:|---:|")
    for k in sorted(grpc):
        s = stats(grpc[k])
        print(f"| {k[0]} | {k[1]} × {k[2]} | {s['n']} | {s['ops'][0]:,.0f} ({s['ops'][1]:,.0f}–{s['ops'][2]:,.0f}) "
              f"| {s['p50'][0]:.1f} ({s['p50'][1]:.1f}–{s['p50'][2]:.1f}) | {s['p99'][0]:.1f} | {s['cps'][0]:,.0f} |")
    print()
g = "| ×gRPC unix calls/s | ×gRPC unix calls/CPU-s |" if grpc else ""
hdr = ("| link | mode | c × o | pace µs | build | n | calls/s median (min–max) | p50 µs median (min–max) "
       "| p99 µs median (min–max) | CPU µs/call median (min–max) | calls per CPU-s median | B÷spin calls/s "
       "| B÷spin CPU/call |" + g[1:])
print(hdr)
print("|" + "---|" * (hdr.count('|') - 1))
for k in sorted(weft):
    res = {a: stats(v) for a, v in weft[k].items()}
    for a in ('spin', 'spin2', 'next'):
        if a not in res:
            continue
        s = res[a]
        extra = " | |"
        if a != 'spin' and 'spin' in res:
            extra = f" {s['ops'][0] / res['spin']['ops'][0]:.2f} | {s['cpu'][0] / res['spin']['cpu'][0]:.2f} |"
        if grpc:
            gr = grpc.get(('unix', k[2], k[3]))
            if gr:
                gs = stats(gr)
                extra += f" {s['ops'][0] / gs['ops'][0]:.1f} | {s['cps'][0] / gs['cps'][0]:.1f} |"
            else:
                extra += " | |"
        print(f"| {k[0]} | {k[1]} | {k[2]} × {k[3]} | {k[5]} | {a} | {s['n']} "
              f"| {s['ops'][0]:,.0f} ({s['ops'][1]:,.0f}–{s['ops'][2]:,.0f}) "
              f"| {s['p50'][0]:.1f} ({s['p50'][1]:.1f}–{s['p50'][2]:.1f}) "
              f"| {s['p99'][0]:.1f} ({s['p99'][1]:.1f}–{s['p99'][2]:.1f}) "
              f"| {s['cpu'][0]:.2f} ({s['cpu'][1]:.2f}–{s['cpu'][2]:.2f}) | {s['cps'][0]:,.0f} |{extra}")
