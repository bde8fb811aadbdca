//! Arbitrary bytes as an Ethernet frame that may carry RoCEv2: finding the IB packet and
//! checking its ICRC must never panic, and a frame that parses must re-build from its
//! parts to a frame that parses the same way.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::frame::{parse, FrameBuilder, IpHeader};
use weft_wire::roce::{IbPacket, IbPacketRepr};

fuzz_target!(|data: &[u8]| {
    let Ok(Some(f)) = parse(data) else { return };
    let _ = (f.icrc_ok(), f.computed_icrc(), f.stored_icrc());
    let Ok(pkt) = IbPacket::new_checked(f.ib) else { return };
    let Ok(repr) = IbPacketRepr::parse(&pkt) else { return };
    let mut b = match f.ip {
        IpHeader::V4(ip) => FrameBuilder::v4(ip.src_addr, ip.dst_addr, f.udp.src_port),
        IpHeader::V6(ip) => FrameBuilder::v6(ip.src_addr, ip.dst_addr, f.udp.src_port),
    };
    b.src_mac = f.eth.src_addr;
    b.dst_mac = f.eth.dst_addr;
    b.vlan = f.eth.vlan;
    let payload = pkt.payload();
    let mut out = vec![0u8; b.frame_len(repr.buffer_len(payload.len()))];
    let n = b.emit(&mut out, &repr, payload).expect("a parsed frame re-builds");
    let again = parse(&out[..n]).expect("rebuilt frame parses").expect("still RoCEv2");
    assert!(again.icrc_ok(), "a built frame carries a good ICRC");
    assert_eq!(again.ip_pair(), f.ip_pair());
});
