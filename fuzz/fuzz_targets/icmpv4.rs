//! Arbitrary bytes as an ICMPv4 message: the checked view and the Repr must never
//! panic, and whatever parses must re-emit to an equal Repr. The input is also tried
//! with its checksum refilled, so the checks behind the checksum are reached.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::icmpv4::{quote, Icmpv4Packet, Icmpv4Repr};

fn exercise(data: &[u8]) {
    let _ = quote(data);
    let Ok(p) = Icmpv4Packet::new_checked(data) else {
        return;
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
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]))
        .expect("a parsed repr emits");
    let q = Icmpv4Packet::new_checked(&out[..]).expect("emitted message checks");
    assert_eq!(Icmpv4Repr::parse(&q).expect("emitted message parses"), repr);
}

fuzz_target!(|data: &[u8]| {
    exercise(data);
    let mut fixed = data.to_vec();
    if let Ok(mut p) = Icmpv4Packet::new_checked(&mut fixed[..]) {
        p.fill_checksum();
        exercise(&fixed);
    }
});
