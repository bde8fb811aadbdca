# sum.py WBW.log LAT.jsonl : medians [ranges], slow-run counts, paired ratios
import re, sys, json, statistics as st
def rat(v): return f"{st.median(v):.2f} [{min(v):.2f}–{max(v):.2f}] n={len(v)}" if v else "-"
def med(v): return f"{st.median(v):.1f} [{min(v):.1f}–{max(v):.1f}] n={len(v)}" if v else "-"
runs = {}
for l in open(sys.argv[1]):
    m = re.match(r'\s*([AB])(h?)(\d+) MB/s\s+(-?\d+)\s+srv sleeps\s+(-?\d+) passes\s+(-?\d+) moved\s+(-?\d+) \| cli passes\s+(-?\d+) sleeps\s+(-?\d+) moved\s+(-?\d+)', l)
    if m:
        s, h, i = m.group(1), m.group(2), int(m.group(3))
        runs[(s, h, i)] = dict(mbs=int(m.group(4)), ss=int(m.group(5)), sm=int(m.group(7)), cm=int(m.group(10)))
for h, name in (('', 'plain'), ('h', 'beside a hog')):
    print(f"## write-bw, {name}")
    for s in 'AB':
        rs = [v for (ss, hh, i), v in sorted(runs.items()) if ss == s and hh == h]
        if not rs: continue
        slow = [r for r in rs if r['mbs'] < 10000]
        print(f"{s}: MB/s {med([r['mbs'] for r in rs])}; slow (<10 GB/s) {len(slow)}/{len(rs)} {[r['mbs'] for r in slow]}; srv sleeps {med([r['ss'] for r in rs])}, > 300 in {sum(r['ss'] > 300 for r in rs)}; moved srv {sum(max(r['sm'],0) for r in rs)} cli {sum(max(r['cm'],0) for r in rs)}")
    pr = [runs[('B', h, i)]['mbs'] / runs[('A', h, i)]['mbs'] for (s, hh, i) in runs if s == 'A' and hh == h and ('B', h, i) in runs]
    if pr: print(f"paired B/A: {rat(pr)}")
if len(sys.argv) > 2:
    rows = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
    for t in ('pp', 'idle'):
        print(f"## {t}")
        for fig, f in (('rtt/s', lambda r: r['rtt_per_s']), ('p50 us', lambda r: r['p50_us']),
                       ('cpu us/rt', lambda r: r['cpu_client_us_per_op'] + r['cpu_server_us_per_op'])):
            d = {(x['side'], x['round']): f(x['run']) for x in rows if x['test'] == t and x['run']}
            a = [v for (s, i), v in d.items() if s == 'A']; b = [v for (s, i), v in d.items() if s == 'B']
            pr = [d[('B', i)] / d[('A', i)] for (s, i) in d if s == 'A' and ('B', i) in d]
            print(f"{fig}: A {med(a)} | B {med(b)} | B/A medians {st.median(b)/st.median(a) if a and b else 0:.3f}; paired {rat(pr)}")
