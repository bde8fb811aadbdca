//! Arbitrary bytes as an ICMPv6 message from fe80::1 to fe80::2 (the addresses the
//! seed corpus was made with): the checked view, the NDP option walk and the Repr must
//! never panic, and whatever parses must re-emit to an equal Repr. The input is also
//! tried with its checksum refilled, so the checks behind the checksum are reached.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::Ipv6Addr;
use weft_wire::icmpv6::{quote, Icmpv6Packet, Icmpv6Repr};

const SRC: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);
const DST: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);

fn exercise(data: &[u8]) {
    let _ = quote(data);
    let Ok(p) = Icmpv6Packet::new_checked(data) else {
        return;
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
    let Ok(repr) = Icmpv6Repr::parse(&p, SRC, DST) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), SRC, DST)
        .expect("a parsed repr emits");
    let q = Icmpv6Packet::new_checked(&out[..]).expect("emitted message checks");
    assert_eq!(
        Icmpv6Repr::parse(&q, SRC, DST).expect("emitted message parses"),
        repr
    );
}

fuzz_target!(|data: &[u8]| {
    exercise(data);
    let mut fixed = data.to_vec();
    if let Ok(mut p) = Icmpv6Packet::new_checked(&mut fixed[..]) {
        p.fill_checksum(SRC, DST);
        exercise(&fixed);
    }
});
