#!/usr/bin/env python3
# diagsum.py STATS...: diag.diff's counters per round trip (messages_completed/2, as statsum.py), medians over windows, per side
import re, sys, statistics as st
K = ['sleeps','sleeps_free','diag_db','diag_link','diag_timeout','diag_short','diag_work_after','early_acks','acks_sent','handbacks','post_flushes','polls_held']
for f in sys.argv[1:]:
    per = {}
    for b in re.split(r'\n(?=(?:client|server)[^\n]*:\n)', open(f).read()):
        m = re.match(r'\s*(client|server)', b)
        if not m: continue
        d = {k: int(v) for k, v in re.findall(r'(\w+): (\d+),', b)}
        r = d.get('messages_completed', 0) / 2
        if r < 50: continue
        per.setdefault(m.group(1), []).append({k: d.get(k, 0) / r for k in K})
    for s, rows in per.items():
        print(f, s, len(rows), ' '.join(f"{k}={st.median(x[k] for x in rows):.2f}" for k in K))
