#!/usr/bin/env python3
"""Medians [min-max] per variant of abab.sh rows, and per-round ratios against a base."""
import json, statistics as st, sys
from collections import defaultdict
rows = [json.loads(l) for f in sys.argv[1:] for l in open(f) if l.strip()]
by = defaultdict(dict)
for r in rows:
    cpu = r.get("cpu_us_per_op")
    if cpu is None and "cpu_client_us_per_op" in r:
        cpu = r["cpu_client_us_per_op"] + r["cpu_server_us_per_op"]
    by[r["variant"]][r["round"]] = (r["mb_per_s"], cpu)
def med(v): return f"{st.median(v):.0f} [{min(v):.0f}-{max(v):.0f}]"
print("| variant | MB/s median [min-max] | CPU us/msg median [min-max] | n |")
print("| --- | ---: | ---: | ---: |")
for v in sorted(by):
    mb = [x[0] for x in by[v].values() if x[0]]; cpu = [x[1] for x in by[v].values() if x[1]]
    print(f"| {v} | {med(mb)} | {st.median(cpu):.1f} [{min(cpu):.1f}-{max(cpu):.1f}] | {len(mb)} |")
print()
print("| ratio (per round, median [min-max]) | value |")
print("| --- | ---: |")
def ratio(a, b):
    rs = [by[a][k][0] / by[b][k][0] for k in by[a] if k in by[b] and by[a][k][0] and by[b][k][0]]
    if rs: print(f"| {a} / {b} | {st.median(rs):.3f} [{min(rs):.3f}-{max(rs):.3f}] (n={len(rs)}) |")
vs = sorted(by)
for prog in ("inline", "thread"):
    names = [v for v in vs if v.endswith("-" + prog)]
    base = [v for v in names if v.startswith(("main", "base"))]
    for v in names:
        if base and v != base[0]: ratio(v, base[0])
    for v in names:
        if "ucx-tcp" in by: ratio(v, "ucx-tcp")
