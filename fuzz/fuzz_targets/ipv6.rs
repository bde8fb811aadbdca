//! Arbitrary bytes as an IPv6 packet: the checked view, the extension-header walk and
//! the Repr must never panic, and whatever parses must re-emit to an equal Repr with
//! the same upper layer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::ipv6::{Ipv6Packet, Ipv6Repr};

fuzz_target!(|data: &[u8]| {
    let Ok(p) = Ipv6Packet::new_checked(data) else {
        return;
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
        return;
    };
    let mut out = vec![0u8; repr.buffer_len()];
    let mut q = Ipv6Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut q).expect("a parsed repr emits");
    q.payload_mut().copy_from_slice(p.payload());
    let q = Ipv6Packet::new_checked(&out[..]).expect("emitted packet checks");
    assert_eq!(Ipv6Repr::parse(&q).expect("emitted packet parses"), repr);
    assert_eq!(q.upper_layer(), upper);
});
