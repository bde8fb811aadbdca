//! The fuzz targets' code paths on stable (the checks themselves are
//! `weft_wire::fuzzing`, shared with `fuzz/`): for each parser, ~20000 seeded buffers
//! from the shared driver `weft_wire::fuzzing::hostile` — random bytes, and the
//! committed fuzz seed corpus (`fuzz/corpus/<target>/`) mutated by flips, cuts,
//! extensions, splices and extreme length bytes — go through `new_checked`,
//! every accessor, `Repr::parse`, and for whatever parses, `emit` and a re-parse that
//! must give the same `Repr`. A panic anywhere fails the test.
//!
//! Mutated inputs get their checksums refilled half of the time, so the checks behind
//! the checksum are reached, not just the checksum test.
//!
//! `WEFT_HOSTILE_ITERS=2000000 cargo test -p weft-wire --test hostile_input` soaks longer.

use std::path::PathBuf;
use weft_wire::fuzzing::hostile::{self, assert_reaches_emit};
use weft_wire::fuzzing::*;
use weft_wire::icmpv4::Icmpv4Packet;
use weft_wire::icmpv6::Icmpv6Packet;
use weft_wire::ipv4::Ipv4Packet;
use weft_wire::udp::UdpPacket;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    hostile::corpus(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus")
            .join(target),
    )
}

/// The shared driver over `target`'s seed corpus; `fix` refills checksums (it must be
/// panic-free on any input too).
fn hostile(target: &str, seed: u64, fix: fn(&mut [u8]), check: fn(&[u8]) -> bool) -> usize {
    hostile::run(target, &corpus(target), seed, |_, b| fix(b), check)
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
fn ring_descriptor_hostile() {
    assert_reaches_emit(
        "ring_descriptor",
        hostile("ring_descriptor", 10, fix_ring_descriptor, ring_descriptor),
    );
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
