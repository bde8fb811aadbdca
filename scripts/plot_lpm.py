#!/usr/bin/python3
"""Plot LPM memory against route count, like Fig. 14 of the P2PNIC paper.

Reads the JSON lines of `weft lpm-bench --sweep --json` (stdin or a file given
as the first argument) and writes docs/results/lpm-memory.png (or the path given
with -o): one panel per family, one line per implementation, and the 4 MiB line
(the NIC's IMEM in the paper, where DPDK's librte_lpm stops at 60 000 routes).

Run with the system python, which has matplotlib:
    weft lpm-bench --sweep --json > docs/results/lpm-sweep.jsonl
    /usr/bin/python3 scripts/plot_lpm.py docs/results/lpm-sweep.jsonl
"""
import argparse
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MIB = 1024 * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", nargs="?", help="sweep JSON lines (default: stdin)")
    ap.add_argument("-o", "--output", default="docs/results/lpm-memory.png")
    args = ap.parse_args()
    src = open(args.input) if args.input else sys.stdin
    series = defaultdict(lambda: defaultdict(list))  # family -> impl -> [(routes, bytes)]
    source = set()
    for line in src:
        line = line.strip()
        if not line:
            continue
        row = json.loads(line)
        if not row.get("sweep"):
            continue
        series[row["family"]][row["impl"]].append((row["routes"], row["bytes"]))
        source.add(row.get("source", "?"))
    if not series:
        sys.exit("no sweep rows in the input (run: weft lpm-bench --sweep --json)")
    families = [f for f in ("ipv4", "ipv6") if f in series]
    fig, axes = plt.subplots(1, len(families), figsize=(6.5 * len(families), 4.8), squeeze=False)
    for ax, fam in zip(axes[0], families):
        for impl, pts in sorted(series[fam].items(), key=lambda kv: (kv[0] != "weft", kv[0])):
            pts.sort()
            xs = [p[0] for p in pts]
            ys = [p[1] / MIB for p in pts]
            style = dict(linewidth=2.5, color="black", zorder=5) if impl == "weft" else dict(linewidth=1.2)
            ax.plot(xs, ys, marker="o", markersize=3.5, label=impl, **style)
        ax.axhline(4, color="red", linestyle="--", linewidth=1.2, label="4 MiB (NIC IMEM)")
        if fam == "ipv6":
            ax.axhline(8, color="orange", linestyle=":", linewidth=1.2, label="8 MiB (IPv6 target)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("routes")
        ax.set_ylabel("table memory (MiB, heap bytes held after build)")
        ax.set_title(f"{fam}: memory vs routes")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("LPM table size vs number of routes (random subsets of %s), cf. P2PNIC Fig. 14" % ", ".join(sorted(source)), fontsize=10)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
