"""Summary of the phased-trace runs in this directory: TAG-LINK.jsonl, TAG = side + run
number (A1, B2, C1 ...). Adaptive / oracle per phase from each run's summary lines
(median and range over the runs of a side); the hogs phase's per-configuration figures
(pooled mean round trip, µs) and, for comparison, what the old figure (p50 of a
single child) would have read: the windows' p50s, per round the median of them."""
import json, sys, glob, statistics, collections
d = sys.argv[1] if len(sys.argv) > 1 else '.'
phases = ['idle', 'saturated', 'hogs', 'background', 'trace']
configs = ['poll-inline', 'poll-thread', 'block', 'adaptive']
def rng(xs, f="{:.2f}"):
    xs = [x for x in xs if x is not None]
    if not xs: return '–'
    return (f + " (" + f + "–" + f + ")").format(statistics.median(xs), min(xs), max(xs))
sides = sorted({f.split('/')[-1][0] for f in glob.glob(f"{d}/[A-Z][0-9]-*.jsonl")})
for link in ['shm', 'udp']:
    print(f"\n### {link}\n")
    print("| side | runs | " + " | ".join(phases) + " | within 10 % |")
    print("|---|---|" + "---|" * len(phases) + "---|")
    hogs = collections.defaultdict(list)
    p50 = collections.defaultdict(list)
    idle = collections.defaultdict(list)
    for side in sides:
        files = sorted(glob.glob(f"{d}/{side}[0-9]-{link}.jsonl"))
        per = {p: [] for p in phases}
        within = [0, 0]
        for f in files:
            lines = [json.loads(l) for l in open(f) if l.strip()]
            for s in lines:
                if s.get('study') != 'weft-phased-summary': continue
                if s['phase'] == 'hogs':
                    hogs[(side, s['config'])].append(s.get('median'))
                if s['phase'] == 'idle':
                    idle[(side, s['config'])].append(s.get('median'))
                if s['config'] == 'adaptive' and s['phase'] in per:
                    v = s.get('vs_oracle') if s['phase'] != 'trace' else s.get('median')
                    per[s['phase']].append(v)
                    if s['phase'] != 'trace' and v is not None:
                        within[1] += 1
                        within[0] += v <= 1.10
            # The old figure: p50 per round (the median of the round's windows).
            rounds = collections.defaultdict(list)
            for r in lines:
                if r.get('study') == 'weft' and r.get('phase') == 'hogs' and r.get('p50_us'):
                    rounds[(r['verb'], r['round'])].append(r['p50_us'])
            for c in configs:
                vals = [statistics.median(v) for (cc, _), v in rounds.items() if cc == c]
                if vals: p50[(side, c)].append(statistics.median(vals))
        print(f"| {side} | {len(files)} | " + " | ".join(rng(per[p]) for p in phases) + f" | {within[0]} of {within[1]} |")
    print(f"\nhogs phase, {link}: mean round trip µs (pooled windows; median of rounds), median (range) over the runs\n")
    print("| side | " + " | ".join(configs) + " | adaptive / poll-thread |")
    print("|---|" + "---|" * (len(configs) + 1))
    for side in sides:
        ratio = [a / b for a, b in zip(hogs[(side, 'adaptive')], hogs[(side, 'poll-thread')]) if a and b]
        print(f"| {side} | " + " | ".join(rng(hogs[(side, c)], "{:.1f}") for c in configs) + f" | {rng(ratio)} |")
    print(f"\nthe old figure from the same rows, {link}: p50 µs one-way (median of a round's windows, median of rounds)\n")
    print("| side | " + " | ".join(configs) + " |")
    print("|---|" + "---|" * len(configs))
    for side in sides:
        print(f"| {side} | " + " | ".join(rng(p50[(side, c)], "{:.2f}") for c in configs) + " |")
    print(f"\nidle phase, {link}: cores both processes kept busy (median of rounds), median (range) over the runs\n")
    print("| side | block | adaptive |")
    print("|---|---|---|")
    for side in sides:
        print(f"| {side} | " + " | ".join(rng(idle[(side, c)], "{:.4f}") for c in ['block', 'adaptive']) + " |")
