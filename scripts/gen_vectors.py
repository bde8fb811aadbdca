#!/usr/bin/python3
"""Known-answer RoCEv2 vectors for weft-wire, made by an independent oracle: scapy.

Run with Debian's interpreter, which has python3-scapy (2.5):

    /usr/bin/python3 scripts/gen_vectors.py            # rewrites the committed file
    /usr/bin/python3 scripts/gen_vectors.py --stdout   # prints it (the Rust test diffs this)

Every frame is built by scapy as Ether()/IP or IPv6()/UDP(dport=4791)/BTH()/headers/payload.
scapy.contrib.roce only knows BTH, AETH and the CNP padding, so those come from scapy's
classes and the other extension headers (RETH, AtomicETH, AtomicAckETH, DETH, ImmDt,
IETH) are packed here from the IBTA Vol 1 §9.3 layouts as raw bytes.

Where the ICRC comes from:
  * IPv4: scapy's own BTH.post_build -> BTH.compute_icrc (pseudo-LRH of 8 x 0xff, a copy
    of the IP header with TOS, TTL and checksum set to 0xff, UDP checksum 0xffff, BTH
    FECN/BECN/resv6 set to ones; zlib CRC-32; stored little-endian). IP options are part
    of the copied header, so frames with IPv4 options are covered by scapy too. (Linux
    rdma_rxe's rxe_icrc_hdr copies a fixed sizeof(struct iphdr) + sizeof(struct udphdr)
    from the IP header, so it would disagree on such frames; it never sends options.)
  * IPv6: scapy 2.5's compute_icrc does not support IPv6 (it warns and writes 0). For
    those frames `icrc_v6` below applies scapy's recipe unchanged to an IPv6 copy, masking
    what Annex A17.3.3 (and rdma_rxe's rxe_icrc.c) mask there: traffic class, flow label,
    hop limit. Those vectors say `icrc_by=script-v6`; the IPv4 ones say `icrc_by=scapy`.

Output format (crates/wire/tests/vectors/roce_scapy.txt): '#' lines are comments; every
other line is one vector, tab-separated `key=value` fields, first `name=`. Integers are
hex without 0x; byte strings are hex (possibly empty). Keys:

  name        unique vector name
  frame       the whole Ethernet frame as scapy built it (after any deliberate corruption)
  ip          4 or 6
  ihl         IPv4 header bytes (20 + options); 40 for IPv6
  src dst     IP addresses given to scapy (4 or 16 bytes)
  tos ttl     IPv4 TOS and TTL, or IPv6 traffic class and hop limit
  ipid        IPv4 identification (IPv4 frames; DF is always set)
  fl          IPv6 flow label (IPv6 frames)
  sport       UDP source port (destination is always 4791)
  udp_csum    1 if scapy computed the UDP checksum, 0 if it was set to zero
  icrc_by     scapy | script-v6 (see above)
  icrc_ok     1 if the frame's last 4 bytes are the right ICRC for the frame, else 0
  icrc        the frame's ICRC trailer read little-endian (as weft's IbPacket::icrc reads it)
  opcode se m pad pkey fecn becn dqpn ackreq psn     the BTH fields given to scapy
  reth_va reth_rkey reth_len                         RETH, when the opcode has one
  aeth_syn aeth_msn                                  AETH
  atomic_va atomic_rkey atomic_swap atomic_cmp       AtomicETH
  atomic_ack                                         AtomicAckETH original value
  deth_qkey deth_sqp                                 DETH
  imm                                                ImmDt
  ieth                                               IETH (rkey to invalidate)
  cnp         1 for a CNP (16 zero reserved bytes after the BTH)
  payload     the payload bytes, without pad
  note        what the vector is about (free text, no tabs)

Pad bytes are zero; BTH tver, resv6 and resv7 are zero. Nothing here is random: the only
pseudo-random bytes come from a fixed-seed LCG.
"""

import struct
import sys
from socket import AF_INET, AF_INET6, inet_pton
import zlib

from scapy.compat import raw
from scapy.config import conf
from scapy.contrib.roce import AETH, BTH, CNPPadding, cnp
from scapy.layers.inet import IP, UDP, IPOption_NOP, IPOption_Router_Alert
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Ether
from scapy.packet import Raw

conf.verb = 0

OUT = "crates/wire/tests/vectors/roce_scapy.txt"

MAC_A = "02:00:00:00:00:01"
MAC_B = "02:00:00:00:00:02"
V4_A, V4_B, V4_C = "192.168.7.1", "192.168.7.2", "192.168.7.3"
V6_A, V6_B, V6_C = "fd00:7::1", "fd00:7::2", "fd00:7::3"

# IBTA Vol 1 Table 38, written out here independently of weft's opcode table:
# low 5 bits of the opcode -> (extension headers in wire order, carries payload).
RC_UC_LOW = {
    0x00: ("SEND_FIRST", (), True),
    0x01: ("SEND_MIDDLE", (), True),
    0x02: ("SEND_LAST", (), True),
    0x03: ("SEND_LAST_IMM", ("imm",), True),
    0x04: ("SEND_ONLY", (), True),
    0x05: ("SEND_ONLY_IMM", ("imm",), True),
    0x06: ("WRITE_FIRST", ("reth",), True),
    0x07: ("WRITE_MIDDLE", (), True),
    0x08: ("WRITE_LAST", (), True),
    0x09: ("WRITE_LAST_IMM", ("imm",), True),
    0x0A: ("WRITE_ONLY", ("reth",), True),
    0x0B: ("WRITE_ONLY_IMM", ("reth", "imm"), True),
}
RC_ONLY_LOW = {
    0x0C: ("READ_REQUEST", ("reth",), False),
    0x0D: ("READ_RESPONSE_FIRST", ("aeth",), True),
    0x0E: ("READ_RESPONSE_MIDDLE", (), True),
    0x0F: ("READ_RESPONSE_LAST", ("aeth",), True),
    0x10: ("READ_RESPONSE_ONLY", ("aeth",), True),
    0x11: ("ACK", ("aeth",), False),
    0x12: ("ATOMIC_ACK", ("aeth", "atomic_ack"), False),
    0x13: ("CMP_SWAP", ("atomic",), False),
    0x14: ("FETCH_ADD", ("atomic",), False),
    0x16: ("SEND_LAST_INV", ("ieth",), True),
    0x17: ("SEND_ONLY_INV", ("ieth",), True),
}


def opcode_table():
    """(opcode, name, headers, has_payload) for every opcode weft speaks, in order."""
    out = []
    for low, (name, hdrs, pay) in sorted({**RC_UC_LOW, **RC_ONLY_LOW}.items()):
        out.append((low, "RC_" + name, hdrs, pay))
    for low, (name, hdrs, pay) in sorted(RC_UC_LOW.items()):
        out.append((0x20 | low, "UC_" + name, hdrs, pay))
    out.append((0x64, "UD_SEND_ONLY", ("deth",), True))
    out.append((0x65, "UD_SEND_ONLY_IMM", ("deth", "imm"), True))
    out.append((0x81, "CNP", ("cnp",), False))
    return out


OPCODES = opcode_table()
assert len(OPCODES) == 38


class Lcg:
    """Deterministic byte and word source (Numerical Recipes LCG), seeded per vector."""

    def __init__(self, seed):
        self.s = seed & 0xFFFFFFFF

    def next(self):
        self.s = (self.s * 1664525 + 1013904223) & 0xFFFFFFFF
        return self.s

    def bytes(self, n):
        return bytes((self.next() >> 24) & 0xFF for _ in range(n))

    def bits(self, n):
        v = 0
        for _ in range((n + 31) // 32):
            v = (v << 32) | self.next()
        return v & ((1 << n) - 1)


def ext_values(hdrs, rng):
    """Field values for each extension header the opcode carries."""
    f = {}
    for h in hdrs:
        if h == "reth":
            f.update(reth_va=rng.bits(64), reth_rkey=rng.bits(32), reth_len=rng.bits(32))
        elif h == "aeth":
            # cycle through ACK (credits), RNR NAK and NAK syndromes
            syn = [0x1F, 0x00, 0x0C, 0x2E, 0x21, 0x60, 0x62, 0x63, 0x61][rng.next() % 9]
            f.update(aeth_syn=syn, aeth_msn=rng.bits(24))
        elif h == "atomic":
            f.update(
                atomic_va=rng.bits(64) & ~7,
                atomic_rkey=rng.bits(32),
                atomic_swap=rng.bits(64),
                atomic_cmp=rng.bits(64),
            )
        elif h == "atomic_ack":
            f.update(atomic_ack=rng.bits(64))
        elif h == "deth":
            f.update(deth_qkey=rng.bits(32), deth_sqp=rng.bits(24))
        elif h == "imm":
            f.update(imm=rng.bits(32))
        elif h == "ieth":
            f.update(ieth=rng.bits(32))
        elif h == "cnp":
            f.update(cnp=1)
        else:
            raise ValueError(h)
    return f


def ib_layers(hdrs, f, payload):
    """scapy layers after the BTH: scapy's AETH/CNPPadding where they exist, raw bytes
    for the other headers, then payload and zero pad."""
    layers = []
    raw_hdr = b""

    def flush():
        nonlocal raw_hdr
        if raw_hdr:
            layers.append(Raw(raw_hdr))
            raw_hdr = b""

    for h in hdrs:
        if h == "deth":
            raw_hdr += struct.pack("!II", f["deth_qkey"], f["deth_sqp"])  # resv8 + SrcQP
        elif h == "reth":
            raw_hdr += struct.pack("!QII", f["reth_va"], f["reth_rkey"], f["reth_len"])
        elif h == "atomic":
            raw_hdr += struct.pack(
                "!QIQQ", f["atomic_va"], f["atomic_rkey"], f["atomic_swap"], f["atomic_cmp"]
            )
        elif h == "aeth":
            flush()
            layers.append(AETH(syndrome=f["aeth_syn"], msn=f["aeth_msn"]))
        elif h == "atomic_ack":
            raw_hdr += struct.pack("!Q", f["atomic_ack"])
        elif h in ("imm", "ieth"):
            raw_hdr += struct.pack("!I", f[h])
        elif h == "cnp":
            flush()
            layers.append(CNPPadding())
    pad = (4 - len(payload) % 4) % 4
    raw_hdr += payload + b"\0" * pad
    flush()
    return layers


def icrc_v6(frame):
    """scapy's BTH.compute_icrc recipe, applied to an IPv6 underlayer (which scapy 2.5
    does not support): 8 x 0xff, then the IPv6 header with traffic class, flow label and
    hop limit set to ones, UDP with checksum 0xffff, BTH with byte 4 ones, the rest."""
    ip = frame[IPv6]
    pshdr = Raw(b"\xff" * 8) / ip.copy()
    pshdr.tc = 0xFF
    pshdr.fl = 0xFFFFF
    pshdr.hlim = 0xFF
    pshdr[UDP].chksum = 0xFFFF
    pshdr[BTH].fecn = 1
    pshdr[BTH].becn = 1
    pshdr[BTH].resv6 = 0xFF
    bth = pshdr[BTH].self_build()
    payload = raw(pshdr[BTH].payload)
    pshdr[UDP].payload = Raw(bth + payload + b"\xff\xff\xff\xff")
    return zlib.crc32(raw(pshdr)[:-4]) & 0xFFFFFFFF


def icrc_field(icrc_le_value):
    """BTH.icrc is an FCSField packed big-endian ('!I') when given explicitly, while
    compute_icrc stores the CRC little-endian: convert so the wire bytes are LE."""
    return struct.unpack("!I", struct.pack("<I", icrc_le_value))[0]


def build(spec):
    """Build one frame with scapy from a spec dict; returns (frame bytes, fields)."""
    rng = Lcg(spec["seed"])
    op, _, hdrs, has_payload = spec["op"]
    payload = rng.bytes(spec.get("plen", 0)) if has_payload else b""
    f = ext_values(hdrs, rng)
    f.update(spec.get("ext", {}))
    pad = (4 - len(payload) % 4) % 4
    b = dict(
        opcode=op,
        solicited=spec.get("se", 0),
        migreq=spec.get("m", 0),
        padcount=pad,
        pkey=spec.get("pkey", 0xFFFF),
        fecn=spec.get("fecn", 0),
        becn=spec.get("becn", 0),
        dqpn=spec.get("dqpn", 0x11),
        ackreq=spec.get("ackreq", 0),
        psn=spec.get("psn", 0),
    )
    if "icrc" in spec:
        b["icrc"] = icrc_field(spec["icrc"])
    if op == 0x81 and spec.get("cnp_helper"):
        bth = cnp(b["dqpn"])  # scapy's own CNP constructor: becn=1, CNPPadding
        for k, v in b.items():
            if k not in ("becn",):
                setattr(bth, k, v)
        b["becn"] = bth.becn
    else:
        bth = BTH(**b)
        for layer in ib_layers(hdrs, f, payload):
            bth = bth / layer
    udp = UDP(sport=spec.get("sport", 0xC000), dport=4791)
    if spec.get("udp_chksum") is not None:
        udp.chksum = spec["udp_chksum"]
    if spec.get("ip", 4) == 4:
        ip = IP(
            src=spec.get("src", V4_A),
            dst=spec.get("dst", V4_B),
            tos=spec.get("tos", 0),
            ttl=spec.get("ttl", 64),
            id=spec.get("id", 0),
            flags="DF",
            options=spec.get("options", []),
        )
    else:
        ip = IPv6(
            src=spec.get("src", V6_A),
            dst=spec.get("dst", V6_B),
            tc=spec.get("tos", 0),
            fl=spec.get("fl", 0),
            hlim=spec.get("ttl", 64),
        )
    frame = Ether(src=MAC_A, dst=MAC_B) / ip / udp / bth
    if spec.get("ip", 4) == 6 and "icrc" not in spec:
        frame[BTH].icrc = icrc_field(icrc_v6(frame))
    data = raw(frame)
    ihl = Ether(data)[IP].ihl * 4 if spec.get("ip", 4) == 4 else 40
    v4 = spec.get("ip", 4) == 4
    fields = dict(
        ip=spec.get("ip", 4),
        ihl=ihl,
        src=inet_pton(AF_INET if v4 else AF_INET6, ip.src),
        dst=inet_pton(AF_INET if v4 else AF_INET6, ip.dst),
        tos=spec.get("tos", 0),
        ttl=spec.get("ttl", 64),
    )
    if v4:
        fields["ipid"] = spec.get("id", 0)
    else:
        fields["fl"] = spec.get("fl", 0)
    fields.update(
        sport=spec.get("sport", 0xC000),
        udp_csum=0 if spec.get("udp_chksum") == 0 else 1,
        icrc_by="scapy" if spec.get("ip", 4) == 4 else "script-v6",
        opcode=op,
        se=b["solicited"],
        m=b["migreq"],
        pad=pad,
        pkey=b["pkey"],
        fecn=b["fecn"],
        becn=b["becn"],
        dqpn=b["dqpn"],
        ackreq=b["ackreq"],
        psn=b["psn"],
    )
    fields.update(f)
    fields["payload"] = payload
    return data, fields


def trailer(data):
    return struct.unpack("<I", data[-4:])[0]


VECTORS = []


def add(name, spec, note, corrupt=None, icrc_ok=1):
    data, fields = build(spec)
    if corrupt is not None:
        data, fields = corrupt(bytearray(data), fields)
        data = bytes(data)
    fields["icrc"] = trailer(data)
    fields["icrc_ok"] = icrc_ok
    fields["note"] = note
    VECTORS.append((name, data, fields))
    return data, fields


def spec_for(op, i, ip):
    """Varied header values for the i-th frame of the per-opcode sweep."""
    sizes = [0, 1, 3, 4, 255, 1024, 2, 5, 8, 64]
    return dict(
        op=op,
        seed=0x5EED0000 | (ip << 8) | i,
        ip=ip,
        plen=sizes[i % len(sizes)],
        tos=[0x00, 0x02, 0x03, 0x68, 0xB8, 0x01][i % 6],
        ttl=[64, 1, 255, 128, 17][i % 5],
        fl=(i * 0x1F3D5) & 0xFFFFF,
        sport=0xC000 + i * 0x111,
        se=i % 2,
        m=(i // 2) % 2,
        pkey=[0xFFFF, 0x8001, 0x7FFF, 0x1234][i % 4],
        fecn=(i // 3) % 2,
        becn=(i // 5) % 2,
        dqpn=[0x000011, 0xFFFFFF, 0x000001, 0xABCDEF, 0x000000][i % 5],
        ackreq=(i // 4) % 2 ^ 1,
        psn=[0, 0xFFFFFF, 0x123456, 0x800000, 1, 0xFFFFFE][i % 6],
    )


def generate():
    VECTORS.clear()
    # 1. Every opcode weft speaks (RC incl. SEND_*_INV, UC, UD, CNP), over IPv4 and IPv6.
    for ip in (4, 6):
        for i, op in enumerate(OPCODES):
            add(f"v{ip}_{op[1].lower()}", spec_for(op, i, ip), f"opcode sweep over IPv{ip}")

    send_only = next(o for o in OPCODES if o[0] == 0x04)
    write_only = next(o for o in OPCODES if o[0] == 0x0A)
    ack = next(o for o in OPCODES if o[0] == 0x11)
    ud = next(o for o in OPCODES if o[0] == 0x64)
    cnp_op = next(o for o in OPCODES if o[0] == 0x81)

    # 2. Payload sizes (pad 0..3) on SEND_ONLY, both IP versions.
    for ip in (4, 6):
        for n in (0, 1, 2, 3, 4, 5, 255, 256, 1024, 4000):
            add(
                f"v{ip}_send_only_len{n}",
                dict(op=send_only, seed=0x51A0 + n, ip=ip, plen=n, psn=n, dqpn=0x42, ackreq=1),
                f"payload of {n} bytes, pad {(4 - n % 4) % 4}",
            )

    # 3. IPv4 options are inside the ICRC (scapy copies the whole IP header).
    add(
        "v4_opt_router_alert_write_only",
        dict(op=write_only, seed=0x0901, plen=64, options=[IPOption_Router_Alert()]),
        "IPv4 with a Router Alert option (IHL 6)",
    )
    add(
        "v4_opt_nops_ack",
        dict(op=ack, seed=0x0902, options=[IPOption_NOP()] * 8, tos=0x03, ttl=3),
        "IPv4 with eight NOP options (IHL 7)",
    )

    # 4. UDP checksum: zero (rdma_rxe over IPv4) and computed by scapy.
    add(
        "v4_udp_csum_zero",
        dict(op=send_only, seed=0x0A01, plen=33, udp_chksum=0),
        "UDP checksum 0 over IPv4",
    )
    add(
        "v4_udp_csum_computed",
        dict(op=send_only, seed=0x0A01, plen=33),
        "UDP checksum computed by scapy; same ICRC as v4_udp_csum_zero",
    )

    # 5. scapy's own CNP constructor.
    add("v4_cnp_scapy_helper", dict(op=cnp_op, seed=0x0B01, dqpn=0x0ABCDE, cnp_helper=True),
        "scapy.contrib.roce.cnp(): BECN set, CNPPadding")
    add("v6_cnp_scapy_helper", dict(op=cnp_op, seed=0x0B02, ip=6, dqpn=0x000007, cnp_helper=True),
        "scapy.contrib.roce.cnp() over IPv6")

    # 6. Transplants: the ICRC of frame A stamped on frame B that differs from A in one
    #    field, every other byte (IP and UDP checksums included) built by scapy. A masked
    #    field keeps the ICRC valid; a covered field breaks it.
    transplants = [
        # (name, base spec, changed fields, masked?)
        ("v4_ttl", dict(ttl=64), dict(ttl=1), True),
        ("v4_tos_ecn_ce", dict(tos=0x02), dict(tos=0x03), True),
        ("v4_dscp", dict(tos=0x00), dict(tos=0xB8), True),
        ("v4_fecn_becn", dict(), dict(fecn=1, becn=1), True),
        ("v4_udp_csum", dict(udp_chksum=0), dict(udp_chksum=None), True),
        ("v4_ip_id", dict(id=0), dict(id=0x1234), False),
        ("v4_dst", dict(dst=V4_B), dict(dst=V4_C), False),
        ("v4_sport", dict(sport=0xC000), dict(sport=0xC001), False),
        ("v4_pkey", dict(pkey=0xFFFF), dict(pkey=0x7FFF), False),
        ("v4_psn", dict(psn=5), dict(psn=6), False),
        ("v4_ackreq", dict(ackreq=0), dict(ackreq=1), False),
        ("v6_hlim", dict(ip=6, ttl=64), dict(ttl=2), True),
        ("v6_tc", dict(ip=6, tos=0), dict(tos=0xFF), True),
        ("v6_flow_label", dict(ip=6, fl=0), dict(fl=0xFFFFF), True),
        ("v6_fecn", dict(ip=6), dict(fecn=1), True),
        ("v6_src", dict(ip=6, src=V6_A), dict(src=V6_C), False),
        ("v6_dqpn", dict(ip=6, dqpn=0x11), dict(dqpn=0x12), False),
    ]
    for k, (name, base, change, masked) in enumerate(transplants):
        base = dict(op=send_only, seed=0x0C00 + k, plen=17, **base)
        a, _ = build(base)
        b = dict(base, **change, icrc=trailer(a))
        add(
            f"xplant_{name}",
            b,
            f"ICRC of the frame before changing {'+'.join(sorted(change))}: "
            + ("masked field, ICRC still valid" if masked else "covered field, ICRC wrong"),
            icrc_ok=1 if masked else 0,
        )

    # 7. Bit flips after scapy built the frame.
    def flip_trailer(d, f):
        d[-1] ^= 0x80
        return d, f

    def flip_payload(d, f):
        at = len(d) - 4 - f["pad"] - len(f["payload"]) + 3
        d[at] ^= 0x01
        f["payload"] = bytes(d[at - 3 : len(d) - 4 - f["pad"]])
        return d, f

    def flip_reth_len(d, f):
        # RETH DMA length, last byte: 14 Ethernet + 20 IP + 8 UDP + 12 BTH + 15
        d[14 + 20 + 8 + 12 + 15] ^= 0x10
        f["reth_len"] ^= 0x10
        return d, f

    add("bad_v4_trailer", dict(op=send_only, seed=0x0D01, plen=40), "trailer bit flipped",
        corrupt=flip_trailer, icrc_ok=0)
    add("bad_v6_trailer", dict(op=ud, seed=0x0D02, ip=6, plen=9), "trailer bit flipped",
        corrupt=flip_trailer, icrc_ok=0)
    add("bad_v4_payload", dict(op=send_only, seed=0x0D03, plen=40), "payload bit flipped",
        corrupt=flip_payload, icrc_ok=0)
    add("bad_v6_payload", dict(op=send_only, seed=0x0D04, ip=6, plen=1024),
        "payload bit flipped", corrupt=flip_payload, icrc_ok=0)
    add("bad_v4_reth", dict(op=write_only, seed=0x0D05, plen=8), "RETH length bit flipped",
        corrupt=flip_reth_len, icrc_ok=0)
    return VECTORS


def fmt(v):
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    if isinstance(v, int):
        return format(v, "x")
    return str(v)


def render():
    lines = [
        "# RoCEv2 known-answer vectors generated by scripts/gen_vectors.py with scapy "
        + __import__("scapy").__version__
        + " (scapy.contrib.roce).",
        "# Do not edit: regenerate with `/usr/bin/python3 scripts/gen_vectors.py`.",
        "# Format: see the script's docstring. One vector per line, tab-separated key=value,",
        "# integers and bytes in hex.",
    ]
    names = set()
    for name, data, fields in generate():
        assert name not in names, name
        names.add(name)
        cols = [f"name={name}", f"frame={data.hex()}"]
        cols += [f"{k}={fmt(v)}" for k, v in fields.items()]
        assert all("\t" not in c and "\n" not in c for c in cols)
        lines.append("\t".join(cols))
    return "\n".join(lines) + "\n"


def main():
    text = render()
    if "--stdout" in sys.argv[1:]:
        sys.stdout.write(text)
    else:
        with open(OUT, "w", encoding="ascii") as fh:
            fh.write(text)
        print(f"wrote {len(VECTORS)} vectors to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
