#!/usr/bin/env python3
"""Turns the output of one peer benchmark run into one weft JSON record (a line).

Used by scripts/peers.sh; tested by crates/bench/tests/peers_parse.rs on real outputs
committed under crates/bench/tests/fixtures/peers/.

    peers_parse.py ucx|fi|error --system S --link L --qp Q --test T --size N
                   --iters N [--rc RC] [--error TEXT] < output.txt
    peers_parse.py best < records.jsonl   (one record: the best of repeated runs)

The record has weft's shape (crates/bench/src/perf/record.rs): system, test, link, qp,
size, iters, and
- latency (ucx_perftest tag_lat, fi_pingpong): method "rtt/2", p50_us, p90_us,
  p99_us, p999_us, mean_us, min_us, max_us, one-way. Both tools already halve the
  round trip. ucx_perftest gives a median ("50.0%ile": the median of the per-
  iteration latencies in its timing queue, the last samples of the run) and the
  overall average; fi_pingpong gives only the average ("usec/xfer" = elapsed /
  iterations / 2). What a tool does not give is null.
- bandwidth (ucx_perftest tag_bw): mb_per_s with MB = 10^6 bytes. ucx_perftest
  prints "MB/s" with MB = 2^20 bytes (64 B x 1401933 msg/s = 85.57 "MB/s"), so its
  overall bandwidth is multiplied by 1.048576 here; mmsg_per_s is its overall
  message rate / 10^6.
A run that printed no result line, or exited non-zero, becomes a record with
"error": the exit code and the last lines the tool printed, never a number.
"""

import argparse
import json
import re
import sys

MIB_TO_MB = 1048576 / 1e6


def tail(text, n=3):
    lines = [l.strip() for l in text.strip().splitlines() if l.strip()]
    return " / ".join(lines[-n:]) if lines else "(no output)"


def base(a):
    return {
        "system": a.system,
        "test": a.test,
        "link": a.link,
        "qp": a.qp,
        "size": a.size,
        "iters": a.iters,
    }


def failed(a, why):
    r = base(a)
    r["iters"] = 0
    r["error"] = why
    return r


def latency(a, mean, p50=None, iters=None):
    r = base(a)
    if iters is not None:
        r["iters"] = iters
    r.update(
        {
            "method": "rtt/2",
            "p50_us": p50,
            "p90_us": None,
            "p99_us": None,
            "p999_us": None,
            "mean_us": mean,
            "min_us": None,
            "max_us": None,
        }
    )
    return r


# ucx_perftest's result row: "Final:" (or nothing with -f) then
# iterations, 50.0%ile (or "typical"), average, overall, bw average, bw overall,
# msgrate average, msgrate overall.
UCX_ROW = re.compile(
    r"^\s*(?:Final:)?\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+(\d+)\s*$"
)


def parse_ucx(a, text):
    rows = [UCX_ROW.match(l) for l in text.splitlines()]
    rows = [m for m in rows if m]
    if a.rc != 0 or not rows:
        return failed(a, f"ucx_perftest exit {a.rc}: {tail(text)}")
    m = rows[-1]
    iters = int(m.group(1))
    pctl, _avg, overall = float(m.group(2)), float(m.group(3)), float(m.group(4))
    bw_overall = float(m.group(6))
    rate_overall = int(m.group(8))
    if a.test.endswith("lat"):
        return latency(a, mean=overall, p50=pctl, iters=iters)
    r = base(a)
    r["iters"] = iters
    r["mb_per_s"] = bw_overall * MIB_TO_MB
    r["mmsg_per_s"] = rate_overall / 1e6
    return r


# fi_pingpong: bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
FI_ROW = re.compile(
    r"^\s*([\d.]+[kmg]?)\s+(\d+[kmb]?)\s+([=+-]\d+[kmb]?)\s+([\d.]+[kmg]?)\s+([\d.]+)s\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$"
)


def parse_fi(a, text):
    rows = [FI_ROW.match(l) for l in text.splitlines()]
    rows = [m for m in rows if m]
    if a.rc != 0 or not rows:
        return failed(a, f"fi_pingpong exit {a.rc}: {tail(text)}")
    m = rows[-1]
    if not m.group(3).startswith("="):
        return failed(a, f"fi_pingpong: sent and acknowledged differ ({m.group(2)} {m.group(3)})")
    # #sent is printed rounded (2k); the requested iteration count is exact.
    return latency(a, mean=float(m.group(7)))


def best(lines):
    """The least disturbed of repeated runs of one configuration: the lowest median
    (else mean) latency, or the highest bandwidth. On a shared machine a run is only
    ever slowed down by others, so the best run is the closest to the tool's own
    speed. Failed runs lose to any run with numbers; if all failed, the last error."""
    rs = [json.loads(l) for l in lines if l.strip()]
    ok = [r for r in rs if "error" not in r]
    if not ok:
        return rs[-1]

    def key(r):
        if "mb_per_s" in r:
            return -r["mb_per_s"]
        return r["p50_us"] if r.get("p50_us") is not None else r["mean_us"]

    b = dict(min(ok, key=key))
    if len(rs) > 1:
        errors = [r["error"] for r in rs if "error" in r]
        b["note"] = f"best of {len(rs)} runs"
        if errors:
            b["note"] += f"; {len(errors)} failed: " + " | ".join(errors)
    return b


def main():
    if sys.argv[1:] == ["best"]:
        print(json.dumps(best(sys.stdin.read().splitlines())))
        return
    p = argparse.ArgumentParser()
    p.add_argument("tool", choices=["ucx", "fi", "error"])
    for k in ("system", "link", "qp", "test"):
        p.add_argument("--" + k, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--iters", type=int, required=True)
    p.add_argument("--rc", type=int, default=0)
    p.add_argument("--error", default=None)
    p.add_argument("--note", default=None)
    a = p.parse_args()
    if a.tool == "error":
        r = failed(a, a.error or "failed")
    else:
        text = sys.stdin.read()
        r = parse_ucx(a, text) if a.tool == "ucx" else parse_fi(a, text)
    if a.note:
        r["note"] = a.note
    print(json.dumps(r))


if __name__ == "__main__":
    main()
