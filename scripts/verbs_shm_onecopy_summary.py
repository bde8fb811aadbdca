#!/usr/bin/env python3
"""Medians (min-max) per size and variant of scripts/verbs-shm-onecopy.sh's rounds.jsonl,
and each variant's ratio to UCX posix (median over median). Markdown on stdout."""
import json
import statistics
import sys
from collections import defaultdict

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = defaultdict(list)
for r in rows:
    by[(r["size"], r["variant"])].append(r)
order = ["weft-map", "weft-ring", "weft-cma", "ucx-posix", "ucx-sm"]


def cpu(r):
    c = r.get("cpu_client_us_per_op")
    if c is not None:
        return c + (r.get("cpu_server_us_per_op") or 0.0)
    return r.get("cpu_us_per_op_total")


def ms(v):
    v = [x for x in v if x is not None]
    if not v:
        return None, "-"
    m = statistics.median(v)
    return m, f"{m:,.0f} ({min(v):,.0f}-{max(v):,.0f})"


def ms2(v):
    v = [x for x in v if x is not None]
    if not v:
        return "-"
    m = statistics.median(v)
    return f"{m:.2f} ({min(v):.2f}-{max(v):.2f})"


for size in sorted({s for s, _ in by}):
    print(f"\n### {size} B\n")
    print("| variant | MB/s median (min-max) | CPU µs/op, both processes | × UCX posix | runs |")
    print("|---|---|---|---|---|")
    posix, _ = ms([r.get("mb_per_s") for r in by[(size, "ucx-posix")]])
    for v in order:
        rs = by.get((size, v), [])
        m, cell = ms([r.get("mb_per_s") for r in rs])
        ratio = f"{m / posix:.2f}" if m and posix else "-"
        print(f"| {v} | {cell} | {ms2([cpu(r) for r in rs])} | {ratio} | {len(rs)} |")
