//! Sample RoCEv2 frames: one per opcode of the table, with distinct, predictable field
//! values, over IPv4 and IPv6. The demo writes them to a capture and the tshark
//! interop test checks that tshark reads back what weft wrote; both use this one
//! generator so they exercise the same bytes.

use std::net::{Ipv4Addr, Ipv6Addr};
use weft_wire::frame::FrameBuilder;
use weft_wire::roce::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, IbPacketRepr, NakCode, Opcode,
    Psn, RethRepr, Syndrome, Transport,
};
use weft_wire::EthernetAddress;

/// One sample frame and what went into it.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The transport headers written.
    pub repr: IbPacketRepr,
    /// Payload bytes written (pad excluded).
    pub payload: Vec<u8>,
    /// Whether the frame is IPv6.
    pub ipv6: bool,
    /// The whole Ethernet frame, ICRC included.
    pub frame: Vec<u8>,
}

/// Source address of the samples (RFC 2544 benchmarking range).
pub const SRC_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// Destination address of the samples.
pub const DST_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// IPv6 source (RFC 5180 benchmarking range).
pub const SRC_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
/// IPv6 destination.
pub const DST_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);

/// The headers weft writes for `op`, with values derived from `seq` so that every
/// sample differs from every other in every field.
pub fn repr_for(op: Opcode, seq: u32) -> Option<IbPacketRepr> {
    let info = op.info()?;
    let h = info.headers;
    let mut bth = BthRepr::new(
        op,
        0x10_0000 | (seq * 0x111),
        Psn::new(0xff_fff0u32.wrapping_add(seq * 3)),
    );
    bth.ack_req = seq % 2 == 0;
    bth.solicited = seq % 3 == 0;
    let mut r = IbPacketRepr::new(bth);
    r.deth = h.deth.then_some(DethRepr {
        qkey: 0x8001_0000 | seq,
        src_qp: 0x20 + seq,
    });
    r.reth = h.reth.then_some(RethRepr {
        va: 0x7f00_0000_0000 + u64::from(seq) * 0x1000,
        rkey: 0xabc0_0000 | seq,
        dma_len: 4096 + seq,
    });
    r.atomic_eth = h.atomic_eth.then_some(AtomicEthRepr {
        va: 0x7f00_0000_8000 + u64::from(seq) * 8,
        rkey: 0xdef0_0000 | seq,
        swap_add: 1_000_000 + u64::from(seq),
        compare: 2_000_000 + u64::from(seq),
    });
    r.aeth = h.aeth.then(|| AethRepr {
        // Cycle through the three kinds of syndrome.
        syndrome: match seq % 3 {
            0 => Syndrome::Ack {
                credit_code: (seq % 31) as u8,
            },
            1 => Syndrome::RnrNak {
                timer: (seq % 32) as u8,
            },
            _ => Syndrome::Nak(NakCode((seq % 4) as u8)),
        },
        msn: 0x00_0100 + seq,
    });
    r.atomic_ack_eth = h.atomic_ack_eth.then_some(AtomicAckEthRepr {
        orig: 0x0123_4567_89ab_cdef,
    });
    r.imm = h.imm_dt.then_some(0xcafe_0000 | seq);
    r.ieth = h.ieth.then_some(0x0bad_0000 | seq);
    Some(r)
}

/// One frame per opcode whose transport is in `transports`, over IPv4 and then IPv6.
pub fn frames(transports: &[Transport]) -> Vec<Sample> {
    let mut out = Vec::new();
    for ipv6 in [false, true] {
        let mut b = if ipv6 {
            FrameBuilder::v6(SRC_V6, DST_V6, 49152)
        } else {
            FrameBuilder::v4(SRC_V4, DST_V4, 49152)
        };
        b.src_mac = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
        b.dst_mac = EthernetAddress([0x02, 0, 0, 0, 0, 2]);
        for (seq, op) in Opcode::ALL.iter().enumerate() {
            if !transports.contains(&op.transport()) {
                continue;
            }
            let seq = seq as u32 + if ipv6 { 100 } else { 0 };
            let Some(repr) = repr_for(*op, seq) else {
                continue;
            };
            let has_payload = op.info().is_some_and(|i| i.has_payload);
            let payload: Vec<u8> = if has_payload {
                (0..(seq as usize % 7) + 1)
                    .map(|i| (i as u8) ^ 0x5a)
                    .collect()
            } else {
                Vec::new()
            };
            let mut frame = vec![0u8; b.frame_len(repr.buffer_len(payload.len()))];
            let n = b
                .emit(&mut frame, &repr, &payload)
                .expect("sample frames fit their buffer");
            frame.truncate(n);
            out.push(Sample {
                repr,
                payload,
                ipv6,
                frame,
            });
        }
    }
    out
}

/// Every RC opcode over IPv4 and IPv6.
pub fn rc_frames() -> Vec<Sample> {
    frames(&[Transport::Rc])
}
