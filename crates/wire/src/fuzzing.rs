//! The checks shared by the fuzz targets (`fuzz/`) and the stable hostile-input test
//! (`tests/hostile_input.rs`), so both run one piece of code: for each parser, feed
//! arbitrary bytes through `new_checked`, every accessor, `Repr::parse`, and for what
//! parses, `emit` and a re-parse that must give the same `Repr`. A broken invariant
//! panics (that is what a fuzzer looks for); malformed input never does.
//!
//! Only compiled with the `fuzzing` feature; not part of the API.
#![allow(missing_docs, clippy::missing_panics_doc)]

use crate::arp::{ArpPacket, ArpRepr};
use crate::ethernet::{EthernetFrame, EthernetRepr};
use crate::frame::{FrameBuilder, IpHeader};
use crate::icmpv4::{self, Icmpv4Packet, Icmpv4Repr};
use crate::icmpv6::{self, Icmpv6Packet, Icmpv6Repr};
use crate::ipv4::{Ipv4Packet, Ipv4Repr};
use crate::ipv6::{Ipv6Packet, Ipv6Repr};
use crate::ring::RingDescriptor;
use crate::roce::{BthRepr, IbPacket, IbPacketRepr};
use crate::udp::{UdpPacket, UdpRepr};
use std::net::{Ipv4Addr, Ipv6Addr};

pub mod hostile;

/// The addresses the fuzz targets and the seed corpus use for pseudo-header checksums.
pub const V4_SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// IPv4 destination of the corpus.
pub const V4_DST: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// IPv6 link-local source.
pub const V6_SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
/// IPv6 link-local destination.
pub const V6_DST: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);
/// IPv6 global source.
pub const V6_GSRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
/// IPv6 global destination.
pub const V6_GDST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// Feed `data` to every accessor, `parse`, `emit` and a re-parse of an Ethernet frame.
/// Returns whether it parsed (and round-tripped); panics on a broken invariant.
pub fn ethernet(data: &[u8]) -> bool {
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

/// Feed `data` to every accessor, `parse`, `emit` and a re-parse of an ARP packet.
/// Returns whether it parsed (and round-tripped); panics on a broken invariant.
pub fn arp(data: &[u8]) -> bool {
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

/// Refill the checksum so mutated input gets past it.
pub fn fix_ipv4(b: &mut [u8]) {
    if let Ok(mut p) = Ipv4Packet::new_checked(b) {
        p.fill_checksum();
    }
}

/// Feed `data` to every accessor, `parse`, `emit` and a re-parse of an IPv4 packet (also: TTL decrement and CE marking keep a valid checksum valid).
/// Returns whether it parsed (and round-tripped); panics on a broken invariant.
pub fn ipv4(data: &[u8]) -> bool {
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

/// Feed `data` to every accessor, `parse`, `emit` and a re-parse of an IPv6 packet and its extension-header walk.
/// Returns whether it parsed (and round-tripped); panics on a broken invariant.
pub fn ipv6(data: &[u8]) -> bool {
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

/// Refill the checksum so mutated input gets past it.
pub fn fix_icmpv4(b: &mut [u8]) {
    if let Ok(mut p) = Icmpv4Packet::new_checked(b) {
        p.fill_checksum();
    }
}

/// Feed `data` to every accessor, `parse`, `emit` and a re-parse of an ICMPv4 message.
/// Returns whether it parsed (and round-tripped); panics on a broken invariant.
pub fn icmpv4(data: &[u8]) -> bool {
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

/// Refill the checksum so mutated input gets past it.
pub fn fix_icmpv6(b: &mut [u8]) {
    if let Ok(mut p) = Icmpv6Packet::new_checked(b) {
        p.fill_checksum(V6_SRC, V6_DST);
    }
}

/// Feed `data` to every accessor, `parse`, `emit` and a re-parse of an ICMPv6 message.
/// Returns whether it parsed (and round-tripped); panics on a broken invariant.
pub fn icmpv6(data: &[u8]) -> bool {
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

/// Refill the checksum so mutated input gets past it.
pub fn fix_udp(b: &mut [u8]) {
    if let Ok(mut p) = UdpPacket::new_checked(b) {
        p.fill_checksum_v4(V4_SRC, V4_DST);
    }
}

/// Feed `data` to every accessor, `parse`, `emit` and a re-parse of a UDP datagram (checksums over both pseudo-headers).
/// Returns whether it parsed (and round-tripped); panics on a broken invariant.
pub fn udp(data: &[u8]) -> bool {
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

/// Feed `data` to every accessor, `parse`, `emit` and a re-parse of an IB transport packet (RoCEv2 UDP payload).
/// Returns whether it parsed (and round-tripped); panics on a broken invariant.
pub fn roce(data: &[u8]) -> bool {
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
    repr_matches_each_parse(&p, &r);
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

/// Feed `data` to the shm ring mode's descriptor parser; for what parses, emit the
/// descriptor again for the same payload and require the same bytes (every field
/// with fewer values than bits is checked, so nothing is lost in the round trip).
/// Returns whether it parsed; panics on a broken invariant.
pub fn ring_descriptor(data: &[u8]) -> bool {
    let Ok((d, payload)) = RingDescriptor::parse(data) else {
        return false;
    };
    let mut out = vec![0u8; d.header_len() + payload.len()];
    let n = d
        .emit(&mut out, payload.len())
        .expect("a parsed descriptor re-emits");
    assert_eq!(n, d.header_len());
    out[n..].copy_from_slice(payload);
    assert_eq!(out, data);
    true
}

/// Make a buffer look like a descriptor where a mutation most often breaks one: the
/// marker byte, an operation in range, the reserved byte zero (so the checks behind
/// them are reached).
pub fn fix_ring_descriptor(b: &mut [u8]) {
    if let [marker, op, _, reserved, ..] = b {
        *marker = crate::ring::MARKER;
        *op = 1 + *op % 3;
        *reserved = 0;
    }
}

/// The headers a checked packet reads in place ([`IbPacket::repr`], which trusts
/// `new_checked`'s checks and cannot fail) against each header's own checked parse:
/// what the fallible parse used to check — each slice the opcode's layout names is
/// long enough (a short one parses to `None`), and the BTH-only shortcut leaves out
/// no header the opcode has. Both read fields with the same `read` functions; the
/// offsets are the emit/parse round trips' to check.
pub fn repr_matches_each_parse<T: AsRef<[u8]>>(p: &IbPacket<T>, r: &IbPacketRepr) {
    assert_eq!(Ok(r.bth), BthRepr::parse(&p.bth()));
    assert_eq!(
        (
            r.deth,
            r.reth,
            r.atomic_eth,
            r.aeth,
            r.atomic_ack_eth,
            r.imm,
            r.ieth
        ),
        (
            p.deth(),
            p.reth(),
            p.atomic_eth(),
            p.aeth(),
            p.atomic_ack_eth(),
            p.imm(),
            p.ieth()
        )
    );
}

/// Refill the IPv4 header checksum of an untagged frame, so mutations get past it.
pub fn fix_frame(b: &mut [u8]) {
    if b.len() >= 34 && b[12..14] == [0x08, 0x00] {
        if let Ok(mut ip) = Ipv4Packet::new_checked(&mut b[14..]) {
            ip.fill_checksum();
        }
    }
}

/// Feed `data` to every accessor, `parse`, `emit` and a re-parse of an Ethernet frame that may carry RoCEv2 (rebuilt with a good ICRC).
/// Returns whether it parsed (and round-tripped); panics on a broken invariant.
pub fn frame(data: &[u8]) -> bool {
    let Ok(Some(f)) = crate::frame::parse(data) else {
        return false;
    };
    let _ = (f.icrc_ok(), f.ip_pair());
    // A frame read as a GSO send captured whole: every segment lies inside it.
    if let Some(size) = f.gso_segment_size(None) {
        let mut k = 0;
        while let Some(seg) = f.segment(k, size) {
            assert!(!seg.is_empty() && seg.len() <= size);
            let _ = f.segment_icrc_ok(k, size);
            k += 1;
        }
        assert_eq!(k, f.ib.len().div_ceil(size));
    }
    assert!(f.segment(usize::MAX, 2).is_none() && f.segment(0, 0).is_none());
    let Ok(p) = IbPacket::new_checked(f.ib) else {
        return false;
    };
    let Ok(r) = IbPacketRepr::parse(&p) else {
        return false;
    };
    repr_matches_each_parse(&p, &r);
    let mut b = match f.ip {
        IpHeader::V4(ip) => FrameBuilder::v4(ip.src_addr, ip.dst_addr, f.udp.src_port),
        IpHeader::V6(ip) => FrameBuilder::v6(ip.src_addr, ip.dst_addr, f.udp.src_port),
    };
    b.vlan = f.eth.vlan;
    let mut out = vec![0u8; b.frame_len(r.buffer_len(p.payload().len()))];
    let n = b
        .emit(&mut out, &r, p.payload())
        .expect("a parsed frame rebuilds");
    let g = crate::frame::parse(&out[..n])
        .expect("rebuilt frame parses")
        .expect("RoCEv2");
    assert!(g.icrc_ok(), "a built frame has a good ICRC");
    assert_eq!(g.ip_pair(), f.ip_pair());
    true
}

/// Leave the input as it is.
pub fn no_fix(_: &mut [u8]) {}
