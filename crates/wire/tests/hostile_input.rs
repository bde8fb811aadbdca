//! The fuzz targets' code paths on stable: for each parser, ~20000 seeded buffers —
//! random bytes, and the committed fuzz seed corpus (`fuzz/corpus/<target>/`) mutated
//! by flips, cuts, extensions and extreme length bytes — go through `new_checked`,
//! every accessor, `Repr::parse`, and for whatever parses, `emit` and a re-parse that
//! must give the same `Repr`. A panic anywhere fails the test.
//!
//! Mutated inputs get their checksums refilled half of the time, so the checks behind
//! the checksum are reached, not just the checksum test.
//!
//! `WEFT_HOSTILE_ITERS=2000000 cargo test -p weft-wire --test hostile_input` soaks longer.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use weft_wire::arp::{ArpPacket, ArpRepr};
use weft_wire::ethernet::{EthernetFrame, EthernetRepr};
use weft_wire::frame::{FrameBuilder, IpHeader};
use weft_wire::icmpv4::{self, Icmpv4Packet, Icmpv4Repr};
use weft_wire::icmpv6::{self, Icmpv6Packet, Icmpv6Repr};
use weft_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use weft_wire::ipv6::{Ipv6Packet, Ipv6Repr};
use weft_wire::roce::{IbPacket, IbPacketRepr};
use weft_wire::udp::{UdpPacket, UdpRepr};

/// Inputs per parser; `WEFT_HOSTILE_ITERS` raises it for a longer soak.
fn iters() -> usize {
    std::env::var("WEFT_HOSTILE_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000)
}

// The addresses the fuzz targets and the seed corpus use for pseudo-header checksums.
const V4_SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const V4_DST: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const V6_SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
const V6_DST: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);
const V6_GSRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const V6_GDST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut v: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no seeds in {}", dir.display());
    v
}

fn mutate(rng: &mut SmallRng, seed: &[u8]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for _ in 0..rng.gen_range(1..=4) {
        match rng.gen_range(0..6) {
            0 if !b.is_empty() => {
                let i = rng.gen_range(0..b.len());
                b[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if !b.is_empty() => {
                let i = rng.gen_range(0..b.len());
                b[i] = [0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff][rng.gen_range(0..6)];
            }
            2 => {
                let n = rng.gen_range(0..=b.len());
                b.truncate(n);
            }
            3 => {
                let n = rng.gen_range(1..40);
                b.extend((0..n).map(|_| rng.gen::<u8>()));
            }
            4 if !b.is_empty() => {
                let i = rng.gen_range(0..b.len());
                b[i] = rng.gen();
            }
            _ => {}
        }
    }
    b
}

/// Run `check` over random and mutated buffers; `fix` refills checksums (it must be
/// panic-free on any input too). Returns how many inputs `check` reported as parsed.
fn hostile(target: &str, seed: u64, fix: fn(&mut [u8]), check: fn(&[u8]) -> bool) -> usize {
    let seeds = corpus(target);
    for s in &seeds {
        assert!(check(s), "{target}: a seed corpus file does not parse");
    }
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut parsed = 0;
    for i in 0..iters() {
        let mut b = if i % 4 == 0 {
            let n = rng.gen_range(0..120);
            (0..n).map(|_| rng.gen::<u8>()).collect()
        } else {
            let k = rng.gen_range(0..seeds.len());
            mutate(&mut rng, &seeds[k])
        };
        if rng.gen_bool(0.5) {
            fix(&mut b);
        }
        parsed += usize::from(check(&b));
    }
    parsed
}

fn ethernet(data: &[u8]) -> bool {
    let Ok(f) = EthernetFrame::new_checked(data) else {
        return false;
    };
    let (dst, src) = (f.dst_addr(), f.src_addr());
    let _ = (
        dst.to_string(),
        dst.is_multicast(),
        src.is_unicast(),
        f.is_tagged(),
        f.vlan(),
    );
    let _ = (f.ethertype(), f.header_len(), f.payload());
    let Ok(repr) = EthernetRepr::parse(&f) else {
        return false;
    };
    let mut out = vec![0u8; repr.buffer_len() + f.payload().len()];
    let mut g = EthernetFrame::new_unchecked(&mut out[..]);
    repr.emit(&mut g).expect("a parsed repr emits");
    g.payload_mut().copy_from_slice(f.payload());
    let g = EthernetFrame::new_checked(&out[..]).expect("emitted frame checks");
    assert_eq!(EthernetRepr::parse(&g).unwrap(), repr);
    assert_eq!(g.payload(), f.payload());
    true
}

fn arp(data: &[u8]) -> bool {
    let Ok(p) = ArpPacket::new_checked(data) else {
        return false;
    };
    let _ = (
        p.hardware_type(),
        p.protocol_type(),
        p.operation(),
        p.packet_len(),
    );
    let _ = (p.source_hardware_addr(), p.source_protocol_addr());
    let _ = (p.target_hardware_addr(), p.target_protocol_addr());
    let Ok(repr) = ArpRepr::parse(&p) else {
        return false;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]))
        .expect("a parsed repr emits");
    assert_eq!(
        ArpRepr::parse(&ArpPacket::new_checked(&out[..]).unwrap()).unwrap(),
        repr
    );
    assert_eq!(&out[..], &data[..28]);
    true
}

fn fix_ipv4(b: &mut [u8]) {
    if let Ok(mut p) = Ipv4Packet::new_checked(b) {
        p.fill_checksum();
    }
}

fn ipv4(data: &[u8]) -> bool {
    let Ok(p) = Ipv4Packet::new_checked(data) else {
        return false;
    };
    let _ = (
        p.version(),
        p.header_len(),
        p.dscp(),
        p.ecn(),
        p.total_len(),
        p.ident(),
    );
    let _ = (
        p.dont_frag(),
        p.more_frags(),
        p.frag_offset(),
        p.ttl(),
        p.protocol(),
        p.checksum(),
    );
    let _ = (
        p.src_addr(),
        p.dst_addr(),
        p.options(),
        p.header(),
        p.payload(),
    );
    let valid = p.verify_checksum();
    let mut copy = data.to_vec();
    let mut c = Ipv4Packet::new_checked(&mut copy[..]).unwrap();
    if c.decrement_ttl().is_some() && valid {
        assert!(
            c.verify_checksum(),
            "decrement_ttl kept a valid checksum valid"
        );
    }
    if c.mark_ce() && valid {
        assert!(c.verify_checksum(), "mark_ce kept a valid checksum valid");
    }
    let Ok(repr) = Ipv4Repr::parse(&p) else {
        return false;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    let mut q = Ipv4Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut q).expect("a parsed repr emits");
    q.payload_mut().copy_from_slice(p.payload());
    let q = Ipv4Packet::new_checked(&out[..]).expect("emitted packet checks");
    assert_eq!(Ipv4Repr::parse(&q).unwrap(), repr);
    assert_eq!(q.payload(), p.payload());
    true
}

fn ipv6(data: &[u8]) -> bool {
    let Ok(p) = Ipv6Packet::new_checked(data) else {
        return false;
    };
    let _ = (
        p.version(),
        p.traffic_class(),
        p.ecn(),
        p.flow_label(),
        p.payload_len(),
    );
    let _ = (
        p.next_header(),
        p.hop_limit(),
        p.src_addr(),
        p.dst_addr(),
        p.payload(),
    );
    let upper = p.upper_layer();
    if let Ok((_, off)) = upper {
        assert!(off <= p.total_len());
    }
    let _ = p.fragment();
    let Ok(repr) = Ipv6Repr::parse(&p) else {
        return false;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    let mut q = Ipv6Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut q).expect("a parsed repr emits");
    q.payload_mut().copy_from_slice(p.payload());
    let q = Ipv6Packet::new_checked(&out[..]).expect("emitted packet checks");
    assert_eq!(Ipv6Repr::parse(&q).unwrap(), repr);
    assert_eq!(q.upper_layer(), upper);
    true
}

fn fix_icmpv4(b: &mut [u8]) {
    if let Ok(mut p) = Icmpv4Packet::new_checked(b) {
        p.fill_checksum();
    }
}

fn icmpv4(data: &[u8]) -> bool {
    let _ = icmpv4::quote(data);
    let Ok(p) = Icmpv4Packet::new_checked(data) else {
        return false;
    };
    let _ = (
        p.msg_type(),
        p.msg_code(),
        p.checksum(),
        p.echo_ident(),
        p.echo_seq_no(),
    );
    let _ = (p.next_hop_mtu(), p.data(), p.verify_checksum());
    let Ok(repr) = Icmpv4Repr::parse(&p) else {
        return false;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]))
        .expect("a parsed repr emits");
    let q = Icmpv4Packet::new_checked(&out[..]).expect("emitted message checks");
    assert_eq!(Icmpv4Repr::parse(&q).unwrap(), repr);
    true
}

fn fix_icmpv6(b: &mut [u8]) {
    if let Ok(mut p) = Icmpv6Packet::new_checked(b) {
        p.fill_checksum(V6_SRC, V6_DST);
    }
}

fn icmpv6(data: &[u8]) -> bool {
    let _ = icmpv6::quote(data);
    let Ok(p) = Icmpv6Packet::new_checked(data) else {
        return false;
    };
    let _ = (
        p.msg_type(),
        p.msg_code(),
        p.checksum(),
        p.echo_ident(),
        p.echo_seq_no(),
    );
    let _ = (
        p.word1(),
        p.router_flag(),
        p.solicited_flag(),
        p.override_flag(),
    );
    let _ = (p.target_addr(), p.data(), p.ndp_options().count());
    let Ok(repr) = Icmpv6Repr::parse(&p, V6_SRC, V6_DST) else {
        return false;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Icmpv6Packet::new_unchecked(&mut out[..]),
        V6_SRC,
        V6_DST,
    )
    .expect("a parsed repr emits");
    let q = Icmpv6Packet::new_checked(&out[..]).expect("emitted message checks");
    assert_eq!(Icmpv6Repr::parse(&q, V6_SRC, V6_DST).unwrap(), repr);
    true
}

fn fix_udp(b: &mut [u8]) {
    if let Ok(mut p) = UdpPacket::new_checked(b) {
        p.fill_checksum_v4(V4_SRC, V4_DST);
    }
}

fn udp(data: &[u8]) -> bool {
    let Ok(p) = UdpPacket::new_checked(data) else {
        return false;
    };
    let _ = (
        p.src_port(),
        p.dst_port(),
        p.len(),
        p.checksum(),
        p.payload(),
    );
    let v4 = p.verify_checksum_v4(V4_SRC, V4_DST);
    let v6 = p.verify_checksum_v6(V6_GSRC, V6_GDST);
    let Ok(repr) = UdpRepr::parse(&p) else {
        return false;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    let mut q = UdpPacket::new_unchecked(&mut out[..]);
    repr.emit(&mut q).expect("a parsed repr emits");
    q.payload_mut().copy_from_slice(p.payload());
    q.fill_checksum_v4(V4_SRC, V4_DST);
    assert!(q.verify_checksum_v4(V4_SRC, V4_DST));
    q.fill_checksum_v6(V6_GSRC, V6_GDST);
    assert!(q.verify_checksum_v6(V6_GSRC, V6_GDST));
    let q = UdpPacket::new_checked(&out[..]).expect("emitted datagram checks");
    assert_eq!(UdpRepr::parse(&q).unwrap(), repr);
    let _ = (v4, v6);
    true
}

fn roce(data: &[u8]) -> bool {
    let Ok(p) = IbPacket::new_checked(data) else {
        return false;
    };
    let _ = (
        p.icrc(),
        p.layout(),
        p.reth(),
        p.aeth(),
        p.deth(),
        p.imm(),
        p.ieth(),
    );
    let Ok(r) = IbPacketRepr::parse(&p) else {
        return false;
    };
    let mut out = vec![0u8; r.buffer_len(p.payload().len())];
    let n = r
        .emit(&mut out, p.payload())
        .expect("a parsed repr re-emits");
    let q = IbPacket::new_checked(&out[..n]).expect("emitted bytes parse");
    let mut back = IbPacketRepr::parse(&q).expect("emitted repr parses");
    back.bth.pad_count = r.bth.pad_count;
    assert_eq!(back, r);
    assert_eq!(q.payload(), p.payload());
    true
}

/// Refill the IPv4 header checksum of an untagged frame, so mutations get past it.
fn fix_frame(b: &mut [u8]) {
    if b.len() >= 34 && b[12..14] == [0x08, 0x00] {
        if let Ok(mut ip) = Ipv4Packet::new_checked(&mut b[14..]) {
            ip.fill_checksum();
        }
    }
}

fn frame(data: &[u8]) -> bool {
    let Ok(Some(f)) = weft_wire::frame::parse(data) else {
        return false;
    };
    let _ = (f.icrc_ok(), f.ip_pair());
    let Ok(p) = IbPacket::new_checked(f.ib) else {
        return false;
    };
    let Ok(r) = IbPacketRepr::parse(&p) else {
        return false;
    };
    let mut b = match f.ip {
        IpHeader::V4(ip) => FrameBuilder::v4(ip.src_addr, ip.dst_addr, f.udp.src_port),
        IpHeader::V6(ip) => FrameBuilder::v6(ip.src_addr, ip.dst_addr, f.udp.src_port),
    };
    b.vlan = f.eth.vlan;
    let mut out = vec![0u8; b.frame_len(r.buffer_len(p.payload().len()))];
    let n = b
        .emit(&mut out, &r, p.payload())
        .expect("a parsed frame rebuilds");
    let g = weft_wire::frame::parse(&out[..n])
        .expect("rebuilt frame parses")
        .expect("RoCEv2");
    assert!(g.icrc_ok(), "a built frame has a good ICRC");
    assert_eq!(g.ip_pair(), f.ip_pair());
    true
}

fn no_fix(_: &mut [u8]) {}

/// Every parser must let a fair share of mutated seeds through to the emit and
/// re-parse step, or this test would only be exercising the rejection paths.
fn assert_reaches_emit(target: &str, parsed: usize) {
    let n = iters();
    eprintln!("{target}: {parsed} of {n} hostile inputs parsed and round-tripped");
    assert!(
        parsed > n / 20,
        "{target}: only {parsed} of {n} inputs parsed"
    );
}

#[test]
fn ethernet_hostile() {
    assert_reaches_emit("ethernet", hostile("ethernet", 1, no_fix, ethernet));
}

#[test]
fn arp_hostile() {
    assert_reaches_emit("arp", hostile("arp", 2, no_fix, arp));
}

#[test]
fn ipv4_hostile() {
    assert_reaches_emit("ipv4", hostile("ipv4", 3, fix_ipv4, ipv4));
}

#[test]
fn ipv6_hostile() {
    assert_reaches_emit("ipv6", hostile("ipv6", 4, no_fix, ipv6));
}

#[test]
fn icmpv4_hostile() {
    assert_reaches_emit("icmpv4", hostile("icmpv4", 5, fix_icmpv4, icmpv4));
}

#[test]
fn icmpv6_hostile() {
    assert_reaches_emit("icmpv6", hostile("icmpv6", 6, fix_icmpv6, icmpv6));
}

#[test]
fn udp_hostile() {
    assert_reaches_emit("udp", hostile("udp", 7, fix_udp, udp));
}

#[test]
fn roce_hostile() {
    assert_reaches_emit("roce", hostile("roce", 8, no_fix, roce));
}

#[test]
fn frame_hostile() {
    assert_reaches_emit("frame", hostile("frame", 9, fix_frame, frame));
}

#[test]
fn seed_corpus_checksums_verify() {
    // The seeds were made by an independent script; their checksums must verify with
    // the addresses the fuzz targets use, or the targets never get past the checksum.
    for b in corpus("ipv4") {
        assert!(Ipv4Packet::new_checked(&b[..]).unwrap().verify_checksum());
    }
    for b in corpus("icmpv4") {
        assert!(Icmpv4Packet::new_checked(&b[..]).unwrap().verify_checksum());
    }
    for b in corpus("icmpv6") {
        assert!(Icmpv6Packet::new_checked(&b[..])
            .unwrap()
            .verify_checksum(V6_SRC, V6_DST));
    }
    let mut v4 = 0;
    let mut v6 = 0;
    for b in corpus("udp") {
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        v4 += usize::from(p.checksum() != 0 && p.verify_checksum_v4(V4_SRC, V4_DST));
        v6 += usize::from(p.verify_checksum_v6(V6_GSRC, V6_GDST));
    }
    assert!(
        v4 >= 1 && v6 >= 1,
        "udp seeds: {v4} verify over IPv4, {v6} over IPv6"
    );
}
