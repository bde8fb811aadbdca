#!/usr/bin/python3
"""Plot docs/results/router-e2e*.md (tables scripts/router-e2e.sh prints) as zero-loss
throughput, sustained rate (flat-out sent x delivered) and p50 latency per frame size,
one line per forwarder. When a file holds several rounds (the same forwarder and size
more than once), each line is the median and the band spans the lowest to highest.

usage: scripts/plot-router.py docs/results/router-e2e.md docs/results/router-e2e.png
"""
import statistics
import sys
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = {}
for line in open(sys.argv[1]):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) != 8 or not cells[1].isdigit():
        continue
    who, size, kpps, _mbps, flat, delivered, p50, _p99 = cells
    sustained = float(flat) * float(delivered.rstrip("%")) / 100.0
    rows.setdefault(who, {}).setdefault(int(size), []).append((float(kpps), sustained, float(p50)))

fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
titles = [
    ("zero-loss rate (kpps)", "RFC 2544 throughput over veth"),
    ("flat-out sent x delivered (kpps)", "sustained rate"),
    ("one-way latency p50 (µs)", "latency at the zero-loss rate"),
]
for who, by_size in rows.items():
    sizes = sorted(by_size)
    for k, ax in enumerate(axes):
        vals = [[m[k] for m in by_size[s]] for s in sizes]
        med = [statistics.median(v) for v in vals]
        (line,) = ax.plot(sizes, med, marker="o", label=who)
        if any(len(v) > 1 for v in vals):
            ax.fill_between(sizes, [min(v) for v in vals], [max(v) for v in vals],
                            color=line.get_color(), alpha=0.12)
for ax, (ylabel, title) in zip(axes, titles):
    ax.set_xlabel("frame size (B)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_xscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
axes[2].set_yscale("log")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=110)
