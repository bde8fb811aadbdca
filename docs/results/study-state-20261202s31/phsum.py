"""Adaptive against each phase's oracle from one phased trace's summary rows
(`weft study --parts phased --json`), as a markdown table.

  python3 phsum.py TRACE.jsonl...
"""
import json, sys
for f in sys.argv[1:]:
    s = {}
    for l in open(f):
        if l.strip():
            r = json.loads(l)
            if r.get('study') == 'weft-phased-summary':
                s[(r['phase'], r['config'])] = r
    link = next(iter(s.values()))['link'] if s else '?'
    print(f'\n{f} ({link}):\n')
    print('| phase (metric) | adaptive | oracle (its figure) | adaptive ÷ oracle | block | poll-thread | poll-inline |')
    print('| --- | ---: | --- | ---: | ---: | ---: | ---: |')
    for p in ['idle', 'saturated', 'hogs', 'background', 'trace']:
        a = s.get((p, 'adaptive'))
        if not a:
            continue
        if p == 'trace':
            best = min((s[(p, c)]['median'], c) for c in ['block', 'poll-thread', 'poll-inline'] if (p, c) in s)
            print(f"| trace (geometric mean of ÷ oracle) | **{a['median']:.3f}** | best static: {best[1]} {best[0]:.3f} | – "
                  f"| {s[(p,'block')]['median']:.3f} | {s[(p,'poll-thread')]['median']:.3f} | {s[(p,'poll-inline')]['median']:.3f} |")
            continue
        o = s.get((p, a.get('oracle')), {})
        def v(c):
            r = s.get((p, c))
            return '–' if not r else f"{r['median']:.4g}"
        print(f"| {p} ({a['metric']}) | {a['median']:.4g} | {a.get('oracle')} ({o.get('median', float('nan')):.4g}) "
              f"| **{a.get('vs_oracle', float('nan')):.3f}** | {v('block')} | {v('poll-thread')} | {v('poll-inline')} |")
