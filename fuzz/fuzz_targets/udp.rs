//! Arbitrary bytes as a UDP datagram: the checked view, both checksum checks and the
//! Repr must never panic, and whatever parses must re-emit to an equal Repr whose
//! filled checksums verify.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::net::{Ipv4Addr, Ipv6Addr};
use weft_wire::udp::{UdpPacket, UdpRepr};

const V4_SRC: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const V4_DST: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const V6_SRC: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const V6_DST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

fuzz_target!(|data: &[u8]| {
    let Ok(p) = UdpPacket::new_checked(data) else {
        return;
    };
    let _ = (
        p.src_port(),
        p.dst_port(),
        p.len(),
        p.checksum(),
        p.payload(),
    );
    let _ = (
        p.verify_checksum_v4(V4_SRC, V4_DST),
        p.verify_checksum_v6(V6_SRC, V6_DST),
    );
    let Ok(repr) = UdpRepr::parse(&p) else { return };
    let mut out = vec![0u8; repr.buffer_len()];
    let mut q = UdpPacket::new_unchecked(&mut out[..]);
    repr.emit(&mut q).expect("a parsed repr emits");
    q.payload_mut().copy_from_slice(p.payload());
    q.fill_checksum_v4(V4_SRC, V4_DST);
    assert!(q.verify_checksum_v4(V4_SRC, V4_DST));
    q.fill_checksum_v6(V6_SRC, V6_DST);
    assert!(q.verify_checksum_v6(V6_SRC, V6_DST));
    let q = UdpPacket::new_checked(&out[..]).expect("emitted datagram checks");
    assert_eq!(UdpRepr::parse(&q).expect("emitted datagram parses"), repr);
    assert_eq!(q.payload(), p.payload());
});
