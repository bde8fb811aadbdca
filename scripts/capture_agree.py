#!/usr/bin/env python3
"""Does tshark agree with `weft decode` on every RoCEv2 packet of a capture?

    scripts/capture_agree.py WEFT_BINARY CAPTURE...

For each capture: `weft decode --json` (which also checks every ICRC over the real
IP header) and tshark's InfiniBand dissector, packet by packet: opcode, destination
QP, PSN and AckReq, and the RETH, AETH and DETH fields where present. Prints one line
per capture and exits 1 if any field differs, any ICRC is bad, or the packet counts
differ. (Used for docs/results/interop.md.)
"""
import json
import subprocess
import sys

FIELDS = [
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.msn",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
]


def num(v):
    if v in ("", None):
        return None
    v = v.split(",")[0]
    if v in ("True", "False"):
        return int(v == "True")
    return int(v, 0)


def check(weft, cap):
    ours = [
        json.loads(l)
        for l in subprocess.run(
            [weft, "decode", "--json", cap], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        if l.startswith("{")
    ]
    args = ["tshark", "-r", cap, "-Y", "udp.dstport == 4791", "-T", "fields"]
    for f in FIELDS:
        args += ["-e", f]
    theirs = [
        l.split("\t")
        for l in subprocess.run(args, capture_output=True, text=True, check=True).stdout.splitlines()
    ]
    bad = []
    if len(ours) != len(theirs):
        bad.append(f"{len(ours)} packets decoded by weft, {len(theirs)} by tshark")
    for d, t in zip(ours, theirs):
        t = [num(x) for x in t]
        want = [d["opcode"], d["dest_qp"], d["psn"], int(d["ack_req"])]
        reth, aeth, deth = d.get("reth"), d.get("aeth"), d.get("deth")
        want += [reth["va"], reth["rkey"], reth["len"]] if reth else [None] * 3
        want += [aeth["msn"]] if aeth else [None]
        want += [deth["qkey"], deth["src_qp"]] if deth else [None] * 2
        # tshark shows an AtomicETH's VA and R_Key in the reth fields: compare only
        # where weft has a RETH.
        got = t[:4] + (t[4:7] if reth else [None] * 3) + t[7:]
        if got != want:
            bad.append(f"packet {d['index']}: weft {want} tshark {got}")
        if not d["icrc_ok"]:
            bad.append(f"packet {d['index']}: ICRC bad")
    print(f"{cap}: {len(ours)} packets, tshark agrees on {len(FIELDS)} fields: "
          f"{'yes' if not bad else 'NO'}; every ICRC good: "
          f"{'yes' if all(d['icrc_ok'] for d in ours) else 'NO'}")
    for b in bad[:10]:
        print("  " + b)
    return not bad


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    ok = all([check(sys.argv[1], c) for c in sys.argv[2:]])
    sys.exit(0 if ok else 1)


main()
