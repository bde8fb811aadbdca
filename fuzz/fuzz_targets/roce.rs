//! Arbitrary bytes as an IB transport packet (a RoCEv2 UDP payload): the checked view
//! and the Repr must never panic, and whatever parses must re-emit to an equal Repr.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::roce::{IbPacket, IbPacketRepr, IcrcPath};

fuzz_target!(|data: &[u8]| {
    let path = IcrcPath::v4([198, 18, 0, 1].into(), [198, 18, 0, 2].into(), 49152);
    let _ = path.check(data);
    let Ok(pkt) = IbPacket::new_checked(data) else { return };
    let payload = pkt.payload();
    let _ = (pkt.icrc(), pkt.layout(), pkt.without_icrc());
    let Ok(repr) = IbPacketRepr::parse(&pkt) else { return };
    let mut out = vec![0u8; repr.buffer_len(payload.len())];
    let n = repr.emit(&mut out, payload).expect("a parsed repr re-emits");
    let again = IbPacket::new_checked(&out[..n]).expect("emitted bytes parse");
    let mut back = IbPacketRepr::parse(&again).expect("emitted repr parses");
    back.bth.pad_count = repr.bth.pad_count;
    assert_eq!(back, repr);
    assert_eq!(again.payload(), payload);
});
