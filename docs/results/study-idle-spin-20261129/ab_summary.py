import json, sys, glob, statistics, os
d = sys.argv[1] if len(sys.argv) > 1 else '.'
phases = ['idle', 'saturated', 'hogs', 'background', 'trace']
def med(xs):
    xs = [x for x in xs if x is not None]
    if not xs: return '–'
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}–{max(xs):.2f})"
def medn(xs, fmt="{:.0f}"):
    xs = [x for x in xs if x is not None]
    if not xs: return '–'
    return (fmt + " (" + fmt + "–" + fmt + ")").format(statistics.median(xs), min(xs), max(xs))
for link in ['udp', 'shm']:
    print(f"\n### {link}\n")
    print("| side | runs | " + " | ".join(f"{p} adaptive/oracle" for p in phases) + " |")
    print("|---|---|" + "---|" * len(phases))
    cpu = {}
    for side in ['A', 'B']:
        files = sorted(glob.glob(f"{d}/{side}[0-9]-{link}.jsonl"))
        per = {p: [] for p in phases}
        for f in files:
            sums = [json.loads(l) for l in open(f) if '"weft-phased-summary"' in l]
            for s in sums:
                if s['config'] == 'adaptive' and s['phase'] in per:
                    per[s['phase']].append(s.get('vs_oracle') if s['phase'] != 'trace' else s.get('median'))
            for s in sums:
                if s['phase'] in phases[:4]:
                    cpu.setdefault((side, s['phase'], s['config']), []).append(s.get('cpu_us_per_op'))
                    if s['config'] == 'adaptive':
                        cpu.setdefault((side, s['phase'], 'oracle-name'), []).append(s.get('oracle'))
        print(f"| {side} | {len(files)} | " + " | ".join(med(per[p]) for p in phases) + " |")
    print("\nCPU µs per operation (both processes; median of the runs' medians, range):\n")
    print("| phase | side | oracles | block | adaptive | poll-thread | poll-inline |")
    print("|---|---|---|---|---|---|---|")
    for p in phases[:4]:
        for side in ['A', 'B']:
            o = cpu.get((side, p, 'oracle-name'), [])
            oc = ",".join(sorted(set(x for x in o if x)))
            row = [medn(cpu.get((side, p, c), [])) for c in ['block', 'adaptive', 'poll-thread', 'poll-inline']]
            print(f"| {p} | {side} | {oc} | " + " | ".join(row) + " |")
