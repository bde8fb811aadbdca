//! Arbitrary bytes as an ARP packet: the checked view and the Repr must never panic,
//! and whatever parses must re-emit to the same 28 bytes and an equal Repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::arp::{ArpPacket, ArpRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = ArpPacket::new_checked(data) else {
        return;
    };
    let _ = (
        p.hardware_type(),
        p.protocol_type(),
        p.hardware_len(),
        p.protocol_len(),
    );
    let _ = (
        p.operation(),
        p.packet_len(),
        p.source_hardware_addr(),
        p.source_protocol_addr(),
    );
    let _ = (p.target_hardware_addr(), p.target_protocol_addr());
    let Ok(repr) = ArpRepr::parse(&p) else { return };
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]))
        .expect("a parsed repr emits");
    let q = ArpPacket::new_checked(&out[..]).expect("emitted packet checks");
    assert_eq!(ArpRepr::parse(&q).expect("emitted packet parses"), repr);
    assert_eq!(&out[..], &data[..out.len()]);
});
