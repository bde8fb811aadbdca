//! Arbitrary bytes as an IPv4 packet: the checked view and the Repr must never panic,
//! `decrement_ttl` and `mark_ce` must keep a valid checksum valid, and whatever parses
//! must re-emit to an equal Repr. The input is also tried with its checksum refilled,
//! so the checks behind the checksum are reached.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::ipv4::{Ipv4Packet, Ipv4Repr};

fn exercise(data: &[u8]) {
    let Ok(p) = Ipv4Packet::new_checked(data) else {
        return;
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
    );
    let _ = (
        p.checksum(),
        p.src_addr(),
        p.dst_addr(),
        p.options(),
        p.header(),
        p.payload(),
    );
    let valid = p.verify_checksum();
    let mut copy = data.to_vec();
    let mut c = Ipv4Packet::new_checked(&mut copy[..]).expect("same bytes check");
    if c.decrement_ttl().is_some() && valid {
        assert!(c.verify_checksum(), "decrement_ttl broke a valid checksum");
    }
    if c.mark_ce() && valid {
        assert!(c.verify_checksum(), "mark_ce broke a valid checksum");
    }
    let Ok(repr) = Ipv4Repr::parse(&p) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    let mut q = Ipv4Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut q).expect("a parsed repr emits");
    q.payload_mut().copy_from_slice(p.payload());
    let q = Ipv4Packet::new_checked(&out[..]).expect("emitted packet checks");
    assert_eq!(Ipv4Repr::parse(&q).expect("emitted packet parses"), repr);
    assert_eq!(q.payload(), p.payload());
}

fuzz_target!(|data: &[u8]| {
    exercise(data);
    let mut fixed = data.to_vec();
    if let Ok(mut p) = Ipv4Packet::new_checked(&mut fixed[..]) {
        p.fill_checksum();
        exercise(&fixed);
    }
});
