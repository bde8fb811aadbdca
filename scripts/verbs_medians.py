#!/usr/bin/env python3
"""Medians of alternating rounds for scripts/verbs-perf.sh, and the issue's target table.

Used by scripts/verbs-perf.sh; tested by crates/bench/tests/verbs_medians.rs.

    verbs_medians.py tag --round K --variant V [--cpu-s S --ops N] < record.json
        adds "round" and "variant" to each weft JSON record on stdin (one line each);
        for a peer that reports no CPU time, --cpu-s (user + system seconds of its
        client and server processes, whole runs including set-up) and --ops (the
        operations those processes ran, warm-up included) add "cpu_us_per_op_total"
        and "ops_per_cpu_s", marked "cpu_scope": "whole process".
    verbs_medians.py core --before NS --after NS --threshold-ns T < records.jsonl
        adds the machine state around a sample to each record: "core_ns_before" and
        "core_ns_after" (`weft probe`'s one-way cache-line latency between the two CPUs,
        run just before and just after the sample; empty when a probe failed),
        "core_threshold_ns", and "core_state": "fast" when both probes are below T,
        "slow" when both are at or above it, "mixed" when they differ, "unknown"
        when a probe is missing.
    verbs_medians.py summary rounds.jsonl
        prints markdown: per variant, test and size, the median of every round with
        its min-max; then the issue's targets, each weft median against its peer's
        median from the same rounds, the ratio, and whether the target is met. When
        the records carry "core_state", also the same targets from only the "fast"
        samples of both sides and from only the "slow" ones (with the sample counts),
        the disagreements between the two, and the probes' own distribution. The
        all-rounds table stays the headline: no sample is left out of it.

A "variant" names one configuration: weft-shm-inline, weft-shm-thread, weft-udp-inline,
ucx-posix, ucx-sm, ucx-default, ucx-tcp, kernel-tcp, kernel-tcp-busypoll, ... Latency
is one-way (rtt/2) for every record used here: weft send-lat and UCX tag_lat both halve
the round trip. Records with "error" count as failed rounds and are listed.
"""
import argparse
import json
import sys


def median_spread(values):
    """(median, min, max) of the finite values, the median of an even count being the
    mean of the middle two; None when there are none."""
    v = sorted(x for x in values if x is not None and x == x)
    if not v:
        return None
    n = len(v)
    m = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    return (m, v[0], v[-1])


def cpu_us_per_op(r):
    """CPU us per operation of both processes: weft's own measurement of the measured
    phase, else the whole-process figure the tagger added for a peer."""
    c = r.get("cpu_client_us_per_op")
    if c is not None:
        return c + (r.get("cpu_server_us_per_op") or 0.0)
    return r.get("cpu_us_per_op_total")


# What a summary row shows, per record kind.
FIELDS = {
    "lat": [("p50_us", "p50 µs"), ("p99_us", "p99 µs"), ("rtt_per_s", "round trips/s")],
    "bw": [("mb_per_s", "MB/s"), ("mmsg_per_s", "M msg/s")],
}


def kind(r):
    return "lat" if r.get("p50_us") is not None or r.get("mean_us") is not None else "bw"


def group(records):
    """(variant, test, size) -> records, in order of first appearance."""
    out = {}
    for r in records:
        out.setdefault((r.get("variant", r.get("system")), r["test"], r["size"]), []).append(r)
    return out


def stat(rs, field):
    if field == "cpu":
        return median_spread([cpu_us_per_op(r) for r in rs])
    if field == "ops_per_cpu_s":
        return median_spread([r.get("ops_per_cpu_s") for r in rs])
    return median_spread([r.get(field) for r in rs])


def fmt(x):
    if x is None:
        return "–"
    if x >= 1000:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def cell(s):
    return "–" if s is None else f"{fmt(s[0])} [{fmt(s[1])}–{fmt(s[2])}]"


# The issue's targets (issue 13's factors: shm p50 within 2x, shm rate at least half): (name, weft variants, weft test, peer variants (the best of
# them counts), peer test, size, field, better, factor). "lower": met when weft <=
# factor x peer; "higher": met when weft >= factor x peer.
TARGETS = [
    ("shm 64 B SEND one-way p50 ≤ 2 × UCX posix tag_lat",
     ["weft-shm-inline", "weft-shm-thread"], "send-lat", ["ucx-posix"], "tag_lat", 64, "p50_us", "lower", 2.0),
    ("shm 64 B SEND message rate ≥ 0.5 × UCX posix tag_bw 64 B",
     ["weft-shm-inline", "weft-shm-thread"], "send-bw", ["ucx-posix"], "tag_bw", 64, "mmsg_per_s", "higher", 0.5),
    ("shm 64 KiB WRITE ≥ 0.8 × UCX best shm (posix, sm, default)",
     ["weft-shm-inline", "weft-shm-thread"], "write-bw", ["ucx-posix", "ucx-sm", "ucx-default"], "tag_bw", 65536, "mb_per_s", "higher", 0.8),
    ("udp 64 B SEND one-way p50 ≤ UCX tcp tag_lat",
     ["weft-udp-inline", "weft-udp-thread"], "send-lat", ["ucx-tcp"], "tag_lat", 64, "p50_us", "lower", 1.0),
    ("udp 64 KiB WRITE ≥ UCX tcp tag_bw",
     ["weft-udp-inline", "weft-udp-thread"], "write-bw", ["ucx-tcp"], "tag_bw", 65536, "mb_per_s", "higher", 1.0),
]


def targets(groups):
    """Rows of the target table: (target, weft variant, weft median+spread, peer
    variant, peer median+spread, ratio, met) with ratio = weft / peer."""
    rows = []
    for name, wv, wt, pv, pt, size, field, better, factor in TARGETS:
        peers = [(v, stat(groups.get((v, pt, size), []), field)) for v in pv]
        peers = [(v, s) for v, s in peers if s is not None]
        best = None
        if peers:
            pick = min if better == "lower" else max
            best = pick(peers, key=lambda p: p[1][0])
        for v in wv:
            s = stat(groups.get((v, wt, size), []), field)
            if s is None:
                continue
            if best is None:
                rows.append((name, v, s, None, None, None, None))
                continue
            ratio = s[0] / best[1][0] if best[1][0] else None
            if ratio is None:
                met = None
            elif better == "lower":
                met = s[0] <= factor * best[1][0]
            else:
                met = s[0] >= factor * best[1][0]
            rows.append((name, v, s, best[0], best[1], ratio, met))
    return rows


def state_of(before, after, threshold):
    """The machine state around a sample from the probes before and after it."""
    if before is None or after is None:
        return "unknown"
    b, a = before < threshold, after < threshold
    if b and a:
        return "fast"
    if not b and not a:
        return "slow"
    return "mixed"


STATES = ("fast", "slow")


def state_rows(groups):
    """Per target row of targets(): (name, weft variant, peer variant, {state: (weft
    median, n weft, peer median, n peer, ratio, met)}), the peer being the one the
    all-rounds row chose, each side's median over only its samples in that state."""
    by_name = {t[0]: t for t in TARGETS}
    out = []
    for name, v, _s, pv, _ps, _ratio, _met in targets(groups):
        if pv is None:
            continue
        _, _, wt, _, pt, size, field, better, factor = by_name[name]
        per = {}
        for st in STATES:
            w = [r for r in groups.get((v, wt, size), []) if r.get("core_state") == st]
            p = [r for r in groups.get((pv, pt, size), []) if r.get("core_state") == st]
            ws, ps = stat(w, field), stat(p, field)
            ratio = met = None
            if ws is not None and ps is not None and ps[0]:
                ratio = ws[0] / ps[0]
                met = ws[0] <= factor * ps[0] if better == "lower" else ws[0] >= factor * ps[0]
            per[st] = (ws and ws[0], len(w), ps and ps[0], len(p), ratio, met)
        out.append((name, v, pv, per))
    return out


def state_section(records, groups):
    """The state-split target table, its disagreements and the probes' distribution;
    empty when no record carries a probe."""
    probed = [r for r in records if "core_state" in r]
    if not probed:
        return []
    thr = probed[0].get("core_threshold_ns")
    out = [f"## Targets by machine state (core-to-core probe, threshold {fmt(thr)} ns)\n",
           "Each sample is labelled from `weft probe` run just before and just after it: "
           f"fast (both < {fmt(thr)} ns one-way), slow (both ≥), mixed (one of each). Below, "
           "each side's median over only its fast samples, then only its slow ones (n = "
           "samples used; weft and peer samples are separate runs, not paired by round). "
           "Mixed and unknown samples are only in the all-rounds table above.\n",
           "| target | weft (variant) | peer | fast: weft (n) | fast: peer (n) | fast: weft / peer | fast: met? "
           "| slow: weft (n) | slow: peer (n) | slow: weft / peer | slow: met? |",
           "| --- | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | --- |"]
    disagree = []
    rows = state_rows(groups)
    for name, v, pv, per in rows:
        cells = []
        for st in STATES:
            wm, nw, pm, np_, ratio, met = per[st]
            m = "–" if met is None else ("yes" if met else "**no**")
            cells += [f"{fmt(wm)} ({nw})", f"{fmt(pm)} ({np_})", fmt(ratio), m]
        out.append(f"| {name} | {v} | {pv} | " + " | ".join(cells) + " |")
        f, sl = per["fast"][5], per["slow"][5]
        if f is not None and sl is not None and f != sl:
            disagree.append(f"- **The states disagree** on {name}, {v}: fast says "
                            f"{'met' if f else 'not met'} ({fmt(per['fast'][4])}), slow says "
                            f"{'met' if sl else 'not met'} ({fmt(per['slow'][4])}).")
    out.append("")
    if disagree:
        out += disagree
    elif rows:
        out.append("The fast and the slow samples agree on every \"met?\" they both have "
                   "(a state with no samples on one side gives –).")
    out.append("")
    probes = [x for r in probed for x in (r.get("core_ns_before"), r.get("core_ns_after")) if x is not None]
    states = {}
    for r in probed:
        states[r["core_state"]] = states.get(r["core_state"], 0) + 1
    fast = median_spread([x for x in probes if x < thr])
    slow = median_spread([x for x in probes if x >= thr])
    out.append(f"Probes: {len(probes)} (two per sample). Below the threshold: "
               f"{sum(1 for x in probes if x < thr)}, one-way {cell(fast)} ns; at or above: "
               f"{sum(1 for x in probes if x >= thr)}, {cell(slow)} ns. Samples: "
               + ", ".join(f"{k} {states[k]}" for k in ("fast", "slow", "mixed", "unknown") if k in states)
               + ".\n")
    return out


def summary(records):
    out = []
    good = [r for r in records if not r.get("error")]
    failed = [r for r in records if r.get("error")]
    groups = group(good)
    rounds = sorted({r.get("round") for r in records if r.get("round") is not None})
    out.append(f"Rounds: {len(rounds)}. Each cell: the median of the rounds, [min–max]. "
               "CPU: both processes, µs per operation (a latency operation is one round trip, "
               "a bandwidth operation one message); weft's over the measured phase, a peer's "
               "over its whole processes (set-up included, so an upper bound).\n")
    out.append("## Targets\n")
    out.append("| target | weft (variant) | weft median [min–max] | peer (best of the listed, same rounds) | peer median [min–max] | weft / peer | met? |")
    out.append("| --- | --- | ---: | --- | ---: | ---: | --- |")
    for name, v, s, pv, ps, ratio, met in targets(groups):
        m = "–" if met is None else ("yes" if met else "**no**")
        out.append(f"| {name} | {v} | {cell(s)} | {pv or '–'} | {cell(ps)} | {fmt(ratio)} | {m} |")
    out.append("")
    out += state_section(good, groups)
    for k, title in (("lat", "Latency (one-way, rtt/2)"), ("bw", "Bandwidth and message rate")):
        rows = [(key, rs) for key, rs in groups.items() if kind(rs[0]) == k]
        if not rows:
            continue
        out.append(f"## {title}\n")
        heads = [h for _, h in FIELDS[k]] + ["CPU µs/op", "ops/CPU-s", "n"]
        out.append("| variant | test | size | " + " | ".join(heads) + " |")
        out.append("| --- | --- | ---: | " + " | ".join("---:" for _ in heads) + " |")
        for (v, t, size), rs in rows:
            cells = [cell(stat(rs, f)) for f, _ in FIELDS[k]]
            cells += [cell(stat(rs, "cpu")), cell(stat(rs, "ops_per_cpu_s")), str(len(rs))]
            out.append(f"| {v} | {t} | {size} | " + " | ".join(cells) + " |")
        out.append("")
    if failed:
        out.append("## Failed runs\n")
        for r in failed:
            err = str(r.get("error")).replace("|", "\\|").replace("\n", " ")
            out.append(f"- round {r.get('round')} {r.get('variant')} {r['test']} {r['size']} B: {err}")
        out.append("")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tag")
    t.add_argument("--round", type=int, required=True)
    t.add_argument("--variant", required=True)
    t.add_argument("--cpu-s", type=float)
    t.add_argument("--ops", type=int)
    c = sub.add_parser("core")
    c.add_argument("--before", default="")
    c.add_argument("--after", default="")
    c.add_argument("--threshold-ns", type=float, required=True)
    s = sub.add_parser("summary")
    s.add_argument("file")
    a = p.parse_args()
    if a.cmd == "tag":
        for line in sys.stdin:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            r = json.loads(line)
            r["round"] = a.round
            r["variant"] = a.variant
            if a.cpu_s is not None and a.ops and r.get("cpu_client_us_per_op") is None:
                r["cpu_us_per_op_total"] = a.cpu_s * 1e6 / a.ops
                r["ops_per_cpu_s"] = a.ops / a.cpu_s if a.cpu_s > 0 else None
                r["cpu_scope"] = "whole process"
            print(json.dumps(r))
    elif a.cmd == "core":
        def ns(x):
            try:
                return float(x)
            except ValueError:
                return None
        before, after = ns(a.before), ns(a.after)
        for line in sys.stdin:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            r = json.loads(line)
            r["core_ns_before"] = before
            r["core_ns_after"] = after
            r["core_threshold_ns"] = a.threshold_ns
            r["core_state"] = state_of(before, after, a.threshold_ns)
            print(json.dumps(r))
    else:
        with open(a.file) as f:
            recs = [json.loads(l) for l in f if l.strip() and not l.startswith("#")]
        print(summary(recs))


if __name__ == "__main__":
    main()
