//! Arbitrary bytes as an Ethernet frame: the checked view and the Repr must never
//! panic, and whatever parses must re-emit to bytes that parse to an equal Repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::ethernet::{EthernetFrame, EthernetRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(f) = EthernetFrame::new_checked(data) else {
        return;
    };
    let (dst, src) = (f.dst_addr(), f.src_addr());
    let _ = (
        dst.to_string(),
        dst.is_multicast(),
        dst.is_broadcast(),
        src.is_unicast(),
    );
    let _ = (
        f.is_tagged(),
        f.vlan(),
        f.ethertype(),
        f.header_len(),
        f.payload(),
    );
    let Ok(repr) = EthernetRepr::parse(&f) else {
        return;
    };
    let mut out = vec![0u8; repr.buffer_len() + f.payload().len()];
    let mut g = EthernetFrame::new_unchecked(&mut out[..]);
    repr.emit(&mut g).expect("a parsed repr emits");
    g.payload_mut().copy_from_slice(f.payload());
    let g = EthernetFrame::new_checked(&out[..]).expect("emitted frame checks");
    assert_eq!(EthernetRepr::parse(&g).expect("emitted frame parses"), repr);
    assert_eq!(g.payload(), f.payload());
});
