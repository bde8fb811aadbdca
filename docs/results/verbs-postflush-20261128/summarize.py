#!/usr/bin/env python3
"""Medians per test and variant of abab.sh's rows (the cells come in the script's
test order within each round and variant), the per-round B/A ratio, and the state of
the machine from the core probe (fast: both probes < 120 ns one-way; slow: both >=)."""
import collections, statistics as st, sys
TESTS = ["send-lat shm inline", "send-lat shm thread", "send-lat udp inline",
         "write-lat shm inline", "read-lat shm inline", "send-bw shm inline", "send-bw udp inline"]
rows = [l.split() for l in open(sys.argv[1]) if l[:1].isdigit()]
d = collections.defaultdict(lambda: collections.defaultdict(list))
seen = collections.Counter()
for r in rows:
    rnd, v, p1, p2 = r[0], r[1], float(r[2]), float(r[3])
    val, cpu = r[-2], r[-1]
    i = seen[(rnd, v)]; seen[(rnd, v)] += 1
    if val == "fail":
        continue
    state = "f" if max(p1, p2) < 120 else ("s" if min(p1, p2) >= 120 else "m")
    d[TESTS[i]][v].append((float(val), float(cpu), state, int(rnd)))
print("| test | A median [min–max] | B median [min–max] | B ÷ A | per-round B/A, median | CPU µs/op A → B | states A / B |")
print("| --- | --- | --- | ---: | ---: | --- | --- |")
for t in TESTS:
    A, B = d[t]["A"], d[t]["B"]
    if not A or not B:
        continue
    ma, mb = st.median(x[0] for x in A), st.median(x[0] for x in B)
    per = [b[0] / a[0] for a in A for b in B if a[3] == b[3]]
    unit = "M msg/s" if "bw" in t else "µs p50"
    print(f"| {t} ({unit}) | {ma:.3f} [{min(x[0] for x in A):.3f}–{max(x[0] for x in A):.3f}] "
          f"| {mb:.3f} [{min(x[0] for x in B):.3f}–{max(x[0] for x in B):.3f}] | {mb/ma:.3f} "
          f"| {st.median(per):.3f} | {st.median(x[1] for x in A):.2f} → {st.median(x[1] for x in B):.2f} "
          f"| {''.join(x[2] for x in A)} / {''.join(x[2] for x in B)} |")
