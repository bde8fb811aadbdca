#!/usr/bin/env python3
# statsum.py FILE...: per file and side, engine counters per round trip (messages_completed/2), medians over runs
import re, sys, statistics as st
KEYS = ['passes','sleeps','watches','standbys','takeovers','handbacks','polls_held','post_flushes','qp_rings_drained','tx_bursts','early_acks','acks_sent','rx_packets','tx_packets']
for f in sys.argv[1:]:
    txt = open(f).read()
    blocks = re.split(r'\n(?=(?:client|server)[^\n]*:\n)', txt)
    per = {}
    for b in blocks:
        m = re.match(r"\s*(client|server)", b)
        if not m: continue
        side = m.group(1)
        d = {k: int(v) for k, v in re.findall(r'(\w+): (\d+),', b)}
        n = d.get('messages_completed', 0) / 2
        if n < 50: continue
        w = re.search(r'waits: (.*)', b)
        per.setdefault(side, []).append({k: d.get(k, 0) / n for k in KEYS})
    for side, rows in per.items():
        print(f"{f} {side} runs={len(rows)}: " + " ".join(f"{k}={st.median(r[k] for r in rows):.2f}" for k in KEYS))
