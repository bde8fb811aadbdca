#!/usr/bin/env python3
"""Per-round ratios pooled over several abab.sh files (rounds matched within a file)."""
import json, statistics as st, sys
from collections import defaultdict
rat = defaultdict(list); mb = defaultdict(list); cpu = defaultdict(list)
for f in sys.argv[1:]:
    by = defaultdict(dict)
    for l in open(f):
        if not l.strip(): continue
        r = json.loads(l)
        c = r.get("cpu_us_per_op")
        if c is None and "cpu_client_us_per_op" in r: c = r["cpu_client_us_per_op"] + r["cpu_server_us_per_op"]
        by[r["variant"]][r["round"]] = (r.get("mb_per_s"), c)
        if r.get("mb_per_s"): mb[r["variant"]].append(r["mb_per_s"]); cpu[r["variant"]].append(c)
    for v in by:
        for base in ([f"base-{v.split('-')[-1]}"] if not v.startswith(("base", "ucx")) else []) + (["ucx-tcp"] if v != "ucx-tcp" else []):
            for k in by[v]:
                if k in by.get(base, {}) and by[v][k][0] and by[base][k][0]:
                    rat[(v, base)].append(by[v][k][0] / by[base][k][0])
print("| variant | MB/s median [min-max] | CPU us/msg median | n |\n| --- | ---: | ---: | ---: |")
for v in sorted(mb): print(f"| {v} | {st.median(mb[v]):.0f} [{min(mb[v]):.0f}-{max(mb[v]):.0f}] | {st.median(cpu[v]):.1f} | {len(mb[v])} |")
print("\n| ratio, pooled per round | median [min-max] (n) |\n| --- | ---: |")
for (a, b), r in sorted(rat.items()): print(f"| {a} / {b} | {st.median(r):.3f} [{min(r):.3f}-{max(r):.3f}] ({len(r)}) |")
