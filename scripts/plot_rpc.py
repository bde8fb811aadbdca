#!/usr/bin/env python3
"""Plot `weft rpc-bench --json` rows: throughput and p50 latency of weft-rpc (udp,
shm; batching off/on) beside gRPC (tonic) for each concurrency.

usage: scripts/plot_rpc.py RUN.jsonl OUT.png [MIX [SIZE [CLUSTERS]]]
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src, out = sys.argv[1], sys.argv[2]
    mix = sys.argv[3] if len(sys.argv) > 3 else "null"
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 32
    clusters = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    rows = [json.loads(l) for l in open(src) if l.strip().startswith("{")]
    rows = [r for r in rows if r["mix"] == mix and (mix != "null" or r["size"] == size)]
    conc = sorted({(r["clients"], r["outstanding"]) for r in rows})
    series = [("gRPC (tonic) tcp", lambda r: r["system"] == "grpc")]
    for link in ("udp", "shm"):
        for b in (False, True):
            series.append(
                (
                    f"weft {link}{' batched' if b else ''}",
                    lambda r, link=link, b=b: r["system"] == "weft"
                    and r["link"] == link
                    and r["batching"] == b
                    and r["clusters"] == clusters,
                )
            )
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(series)
    for i, (name, pick) in enumerate(series):
        tput, lat = [], []
        for c in conc:
            m = [r for r in rows if pick(r) and (r["clients"], r["outstanding"]) == c]
            tput.append(m[0]["ops_per_s"] if m else 0)
            lat.append(m[0]["p50_us"] if m else 0)
        xs = [j + (i - len(series) / 2 + 0.5) * width for j in range(len(conc))]
        ax1.bar(xs, tput, width, label=name)
        ax2.bar(xs, lat, width, label=name)
    labels = [f"{c} cl x {o} out" for c, o in conc]
    for ax, title in (
        (ax1, "calls per second (higher is better)"),
        (ax2, "p50 latency, us (lower is better)"),
    ):
        ax.set_xticks(range(len(conc)))
        ax.set_xticklabels(labels)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    ax1.legend(fontsize=8)
    what = f"null RPC {size} B" if mix == "null" else "namenode metadata mix"
    fig.suptitle(f"weft-rpc vs gRPC (tonic), {what}, {clusters} cluster(s), same run")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
