#!/usr/bin/env python3
"""Count the "link watch stays armed" bad mode of thread progress (issues 13/16).

Runs `weft perf send-lat` (thread progress, --stats) N times per binary, binaries
alternating run by run (A B A B ...), the server and the client as separate
processes so that their --stats do not interleave on one stderr. The lock is held
for --hold rounds at a time (default 5). One JSON row per run on stdout:

  binary, run, link, p50/p90/p99 (one-way µs as weft perf prints them), the
  client's CPU per round trip from its report (measured rounds), both processes'
  whole CPU time per round trip (warm-up and set-up included; the children's
  rusage), the server's from /proc over the client's life, and the
  client's and the server's engine counters (standbys, takeovers, link_takeovers,
  quiet_gap_ns, watches, plus any *_why counters a binary prints).

A run is classified two ways: "slow" when p90 > 2 x the median p90 of all runs of
the same link (the symptom: the good mode's p90 is about 4 us on udp, the bad
mode's 13-20 us), and "watch" when either side counted at least 100 link takeovers
(the mechanism; good runs count 0).

usage: watchruns.py --link udp --runs 40 NAME=BINARY [NAME=BINARY ...] > rows.jsonl
       watchruns.py --summary rows.jsonl
"""

import argparse
import fcntl
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

LOCK = "/work/notes/quiet.lock"
WARMUP = 1000  # weft perf's default warm-up for -n 20000
COUNTERS = re.compile(r"^\s+([a-z_]+):\s+(\d+),$")
ROW = re.compile(r"^\s*64\s+(\d+)\s+" + r"\s+".join([r"([\d.]+)"] * 11))


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick


def engine_counters(text):
    """The EngineStats block's counters (the first block in the --stats dump)."""
    out = {}
    inside = False
    for line in text.splitlines():
        if "EngineStats {" in line:
            inside = True
            continue
        if inside:
            if line.strip().startswith("}"):
                break
            m = COUNTERS.match(line)
            if m:
                out[m.group(1)] = int(m.group(2))
    return out


def one_run(binary, link, iters, progress, test="send-lat"):
    common = ["--link", link, "--size", "64", "--progress", progress, "--stats"]
    srv = subprocess.Popen(
        [binary, "perf", test, "--port", "0", "--idle-timeout", "20", *common],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    port = None
    for line in srv.stdout:
        m = re.search(r"port=(\d+)", line)
        if m:
            port = m.group(1)
            break
    if port is None:
        srv.kill()
        raise RuntimeError("server printed no port")
    t0 = time.time()
    cpu_srv0 = proc_cpu_s(srv.pid)
    cli = subprocess.run(
        ["timeout", "60", binary, "perf", test, "127.0.0.1", "--port", port,
         "-n", str(iters), *common],
        capture_output=True,
        text=True,
    )
    wall = time.time() - t0
    # The server prints its counters after the run it served; give it a moment.
    time.sleep(0.3)
    cpu_srv = proc_cpu_s(srv.pid) - cpu_srv0
    srv.kill()
    _, srv_err = srv.communicate()
    row = {"rc": cli.returncode, "wall_s": round(wall, 3)}
    for line in cli.stdout.splitlines():
        m = ROW.match(line)
        if m:
            v = [float(x) for x in m.groups()[1:]]
            row.update(
                p50=v[1], p90=v[4], p99=v[5], p999=v[6], max=v[7],
                rtt_per_s=v[8], cli_cpu_us_rtt=v[9],
            )
    row["cli"] = engine_counters(cli.stderr)
    row["srv"] = engine_counters(srv_err)
    row["srv_cpu_us_rtt_all"] = round(cpu_srv * 1e6 / (iters + WARMUP), 3)
    return row


def run(args):
    bins = [b.split("=", 1) for b in args.binaries]
    lock = None
    for r in range(args.runs):
        # Hold the quiet lock for --hold rounds at a time (each run is about a second).
        if r % args.hold == 0:
            if lock:
                fcntl.flock(lock, fcntl.LOCK_UN)
                lock.close()
            lock = open(LOCK)
            fcntl.flock(lock, fcntl.LOCK_EX)
        for name, path in bins:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            row = one_run(path, args.link, args.iters, args.progress, args.test)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            # Both processes (the server is reaped too), whole lives.
            both_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            row["both_cpu_us_rtt_all"] = round(both_cpu * 1e6 / (args.iters + WARMUP), 3)
            row.update(binary=name, run=r, link=args.link, test=args.test, progress=args.progress,
                       t=time.strftime("%H:%M:%S", time.gmtime()))
            print(json.dumps(row), flush=True)
            time.sleep(args.pause)
    if lock:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def q(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]


def summary(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    by_link = {}
    for r in rows:
        by_link.setdefault(r["link"], []).append(r)
    for link, rs in by_link.items():
        ok = [r for r in rs if "p90" in r]
        med90 = statistics.median(r["p90"] for r in ok)
        print(f"## {link}: {len(rs)} runs, slow = p90 > {2 * med90:.2f} us (2 x median p90),"
              " watch = >= 100 link takeovers on a side")
        print("| binary | runs | slow | watch | p50 med [min-max] | p90 med [min-max] | p99 med [min-max]"
              " | CPU us/rtt client (report) | CPU us/rtt both (all) | link takeovers, busier side, med [max] |")
        print("| --- | ---: | ---: | ---: | --- | --- | --- | ---: | ---: | --- |")
        names = []
        for r in rs:
            if r["binary"] not in names:
                names.append(r["binary"])
        for n in names:
            b = [r for r in ok if r["binary"] == n]
            bad = [r for r in b if r["p90"] > 2 * med90]
            def s(k):
                v = [r[k] for r in b]
                return f"{statistics.median(v):.2f} [{min(v):.2f}-{max(v):.2f}]"
            both = [r["both_cpu_us_rtt_all"] for r in b]
            lt = [max(r["cli"].get("link_takeovers", 0), r["srv"].get("link_takeovers", 0))
                  for r in b]
            watch = [x for x in lt if x >= 100]
            print(f"| {n} | {len(b)} | {len(bad)} | {len(watch)} | {s('p50')} | {s('p90')} | {s('p99')} | "
                  f"{statistics.median(r['cli_cpu_us_rtt'] for r in b):.2f} | "
                  f"{statistics.median(both):.2f} | {statistics.median(lt):.0f} [{max(lt)}] |")
        print()
        for n in names:
            for r in ok:
                lk = max(r["cli"].get("link_takeovers", 0), r["srv"].get("link_takeovers", 0))
                if r["binary"] == n and (r["p90"] > 2 * med90 or lk >= 100):
                    def brief(c):
                        return (f"takeovers {c.get('takeovers')} link {c.get('link_takeovers')}"
                                f" arms {c.get('watch_arms', '-')} rearms {c.get('watch_rearms', '-')}"
                                f" gap {c.get('quiet_gap_ns')}")
                    print(f"- {n} run {r['run']}: p50 {r['p50']} p90 {r['p90']} p99 {r['p99']};"
                          f" client {brief(r['cli'])}; server {brief(r['srv'])}")
        print()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--link", default="udp")
    ap.add_argument("--test", default="send-lat", help="any latency test of weft perf")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--progress", default="thread")
    ap.add_argument("--pause", type=float, default=0.2)
    ap.add_argument("--hold", type=int, default=5, help="rounds per hold of the lock")
    ap.add_argument("--summary")
    ap.add_argument("binaries", nargs="*")
    a = ap.parse_args()
    if a.summary:
        summary(a.summary)
    else:
        run(a)


if __name__ == "__main__":
    main()
