#!/usr/bin/env python3
"""Summarise scripts/incast.sh output: one row per (senders, cc) with the median over
rounds and the [min-max] spread of each per-run figure, and the on/off ratio of the
medians.

usage: incast_summary.py OUT.jsonl
"""
import json
import statistics
import sys
from collections import defaultdict


def per_run(lines):
    runs = defaultdict(list)
    for l in lines:
        l = l.strip()
        if l:
            r = json.loads(l)
            runs[r["run"]].append(r)
    out = []
    prev_total = 0
    for run, procs in sorted(runs.items()):
        # Drops per run: `qdisc_dropped` (incast.sh now), or the difference of the
        # cumulative `qdisc_dropped_total` an earlier version wrote.
        t = procs[0].get("qdisc_dropped_total")
        if "qdisc_dropped" in procs[0]:
            qdrops = procs[0]["qdisc_dropped"]
        elif t is not None:
            qdrops = t - prev_total if t >= prev_total else t
            prev_total = t
        else:
            qdrops = 0
        bulk = [p for p in procs if p.get("role") == "bulk"]
        probe = [p for p in procs if p.get("role") == "probe"]
        if not bulk:
            continue
        b0 = bulk[0]
        out.append({
            "run": run,
            "senders": b0["senders"],
            "cc": b0["cc"],
            "bulk_reported": len(bulk),
            "goodput": sum(p["goodput_mbit_s"] for p in bulk),
            "retx": sum(p["retransmitted_packets"] for p in bulk),
            "tx": sum(p["tx_packets"] for p in bulk),
            "timeouts": sum(p["timeouts"] for p in bulk),
            "failed": sum(p["failed"] for p in bulk),
            "decreases": sum(p["cc_decreases"] for p in bulk),
            "window": statistics.median(p["window"] for p in bulk),
            "min_rtt": min(p["min_rtt_us"] for p in bulk),
            "qdrops": qdrops,
            "dead_qps": sum(1 for p in bulk if p["failed"] > 0),
            "p50": probe[0]["p50_us"] if probe else None,
            "p99": probe[0]["p99_us"] if probe else None,
            "probes": probe[0]["probes"] if probe else 0,
        })
    return out


def med(rows, k):
    v = [r[k] for r in rows if r[k] is not None]
    if not v:
        return None, None, None
    return statistics.median(v), min(v), max(v)


def fmt(t, d=0):
    m, lo, hi = t
    if m is None:
        return "-"
    f = f"{{:.{d}f}}"
    return f"{f.format(m)} [{f.format(lo)}–{f.format(hi)}]"


def main():
    rows = per_run(open(sys.argv[1]))
    groups = defaultdict(list)
    for r in rows:
        groups[(r["senders"], r["cc"])].append(r)
    print("| senders | cc | runs | goodput Mbit/s | retransmitted pkts | of sent | timeouts | failed WRs | QPs failed | qdisc drops | probe p50 µs | probe p99 µs | window (median QP) | decreases |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (n, cc), g in sorted(groups.items(), key=lambda x: (x[0][0], x[0][1] != "off")):
        frac = [r["retx"] / r["tx"] if r["tx"] else 0 for r in g]
        print(f"| {n} | {cc} | {len(g)} | {fmt(med(g,'goodput'))} | {fmt(med(g,'retx'))} | "
              f"{statistics.median(frac)*100:.1f} % | {fmt(med(g,'timeouts'))} | {fmt(med(g,'failed'))} | {fmt(med(g,'dead_qps'))} | "
              f"{fmt(med(g,'qdrops'))} | {fmt(med(g,'p50'))} | {fmt(med(g,'p99'))} | "
              f"{fmt(med(g,'window'),1)} | {fmt(med(g,'decreases'))} |")
    print()
    print("| senders | goodput on/off | retransmitted on/off | probe p99 on/off |")
    print("| ---: | ---: | ---: | ---: |")
    for n in sorted({k[0] for k in groups}):
        off, on = groups.get((n, "off")), groups.get((n, "delay"))
        if not off or not on:
            continue
        def ratio(k):
            a, b = med(on, k)[0], med(off, k)[0]
            return f"{a / b:.2f}" if a is not None and b else "-"
        print(f"| {n} | {ratio('goodput')} | {ratio('retx')} | {ratio('p99')} |")


if __name__ == "__main__":
    main()
