#!/usr/bin/python3
"""Plot docs/results/router-e2e.md (the table scripts/router-e2e.sh prints) as
zero-loss throughput and p50 latency per frame size, one line per forwarder.

usage: scripts/plot-router.py docs/results/router-e2e.md docs/results/router-e2e.png
"""
import sys
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = {}
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != 8 or not cells[1].isdigit():
        continue
    who, size, kpps, mbps, _, _, p50, p99 = cells
    rows.setdefault(who, []).append((int(size), float(kpps), float(mbps), float(p50), float(p99)))

fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
for who, r in rows.items():
    r.sort()
    a.plot([x[0] for x in r], [x[1] for x in r], marker="o", label=who)
    b.plot([x[0] for x in r], [x[3] for x in r], marker="o", label=who)
a.set_xlabel("frame size (B)")
a.set_ylabel("zero-loss rate (kpps)")
a.set_title("RFC 2544 throughput over veth")
b.set_xlabel("frame size (B)")
b.set_ylabel("one-way latency p50 (µs)")
b.set_yscale("log")
b.set_title("latency at the zero-loss rate")
for ax in (a, b):
    ax.set_xscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
