"""Pools phased-trace runs (TAG-LINK.jsonl, TAG = side letter + run number) from the
directories given, side against side, per link: per run the adaptive configuration's
figures; then per side the median (range) over the runs and, between two sides, an
exact two-sided Mann-Whitney (rank-sum) p-value over the runs.

  python3 ab2.py [--sides B,E] DIR...
"""
import json, sys, glob, statistics, itertools, os

args = sys.argv[1:]
sides = ['B', 'E']
if args and args[0] == '--sides':
    sides = args[1].split(','); args = args[2:]
dirs = args or ['.']
PH = ['idle', 'saturated', 'hogs', 'background']
STATIC = ['poll-inline', 'poll-thread', 'block']

def runs(link, side):
    out = []
    for d in dirs:
        for f in sorted(glob.glob(os.path.join(d, f'{side}[0-9]*-{link}.jsonl'))):
            s = {}
            for l in open(f):
                if not l.strip(): continue
                r = json.loads(l)
                if r.get('study') == 'weft-phased-summary':
                    s[(r['phase'], r['config'])] = r
            if not s: continue
            m = {}
            for p in PH:
                a = s.get((p, 'adaptive'))
                m[p + ' ÷ oracle'] = a and a.get('vs_oracle')
            m['within 10 %'] = sum(1 for p in PH if (m[p + ' ÷ oracle'] or 99) <= 1.10)
            t = {c: s.get(('trace', c), {}).get('median') for c in STATIC + ['adaptive']}
            m['trace'] = t['adaptive']
            best = min(v for c, v in t.items() if c != 'adaptive' and v is not None)
            m['trace beats every static'] = int(t['adaptive'] is not None and t['adaptive'] < best)
            for c in ['poll-inline', 'poll-thread', 'block', 'adaptive']:
                m[f'hogs {c} µs'] = s.get(('hogs', c), {}).get('median')
            a, pt = m['hogs adaptive µs'], m['hogs poll-thread µs']
            m['hogs adaptive ÷ poll-thread'] = a / pt if a and pt else None
            for c in ['block', 'adaptive']:
                v = s.get(('idle', c), {}).get('median')
                m[f'idle {c} % core (pair)'] = v * 100 if v is not None else None
            sat = s.get(('saturated', 'adaptive'), {})
            m['saturated adaptive CPU µs/op'] = sat.get('cpu_us_per_op')
            m['_file'] = os.path.basename(f)
            out.append(m)
    return out

def mw_p(x, y):
    """Exact two-sided rank-sum p-value (ties get mid-ranks; enumeration)."""
    allv = sorted(x + y)
    rank = {}
    for v in set(allv):
        idx = [i + 1 for i, w in enumerate(allv) if w == v]
        rank[v] = sum(idx) / len(idx)
    rs = [rank[v] for v in allv]
    n = len(x); obs = sum(rank[v] for v in x)
    mean = n * (len(allv) + 1) / 2
    tot = ext = 0
    for c in itertools.combinations(range(len(allv)), n):
        s = sum(rs[i] for i in c); tot += 1
        ext += abs(s - mean) >= abs(obs - mean) - 1e-9
    return ext / tot

def fmt(v):
    if v is None: return '–'
    return f'{v:.1f}' if abs(v) >= 20 else f'{v:.2f}'

for link in ['shm', 'udp']:
    data = {s: runs(link, s) for s in sides}
    keys = [k for k in data[sides[0]][0] if not k.startswith('_')] if data[sides[0]] else []
    print(f'\n### {link}: ' + ', '.join(f'{s} {len(data[s])} runs ({" ".join(m["_file"].split("-")[0] for m in data[s])})' for s in sides) + '\n')
    print('| figure (adaptive) | ' + ' | '.join(f'{s} median (range)' for s in sides) + ' | ' + f'{sides[1]} ÷ {sides[0]} | p (rank-sum) |')
    print('|---|' + '---|' * (len(sides) + 2))
    for k in keys:
        cols, vals = [], []
        for s in sides:
            xs = [m[k] for m in data[s] if m[k] is not None]
            vals.append(xs)
            if not xs: cols.append('–'); continue
            if k in ('within 10 %', 'trace beats every static'):
                cols.append(f'{sum(xs)} of {len(xs) * (4 if k == "within 10 %" else 1)}')
            else:
                cols.append(f'{fmt(statistics.median(xs))} ({fmt(min(xs))}–{fmt(max(xs))})')
        ok = all(vals) and k not in ('within 10 %', 'trace beats every static')
        ratio = fmt(statistics.median(vals[1]) / statistics.median(vals[0])) if ok and statistics.median(vals[0]) else ''
        p = f'{mw_p(vals[0], vals[1]):.3f}' if ok else ''
        print(f'| {k} | ' + ' | '.join(cols) + f' | {ratio} | {p} |')
