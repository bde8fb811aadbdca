//! The shm ring mode's descriptor: what a QP whose two ends share one shm connection
//! carries instead of a RoCEv2 packet (design: docs/verbs.md, "What 1 500
//! instructions a message would take", and "The ring mode as built"; a prototype measured the
//! mode in docs/results/verbs-ring-proto-20261202s33). weft's own format, never on a
//! wire: the ring already delivers in order and uncorrupted, so there is no PSN
//! window, no ACK and no ICRC. What stays is what a verbs decision needs.
//!
//! ```text
//!  0      marker 0xF0: a BTH opcode from the manufacturer-specific range (IBTA
//!         Vol 1 §9.2: the top bits 111), so no RoCEv2 parser takes a descriptor for
//!         a packet, and no descriptor parser a packet
//!  1      operation: 1 SEND, 2 WRITE, 3 ERROR
//!  2      flags: bit 0 immediate present (SEND, WRITE), bit 1 solicited event
//!         (SEND); every other bit zero
//!  3      reserved, zero
//!  4..8   destination QPN, big-endian, below 2^24
//!  8..12  sequence number of the message on its QP (RNR go-back-N; for ERROR, the
//!         failed message's)
//! 12..16  immediate data (zero without the flag); for ERROR, the AETH syndrome in
//!         byte 12 (an RNR NAK with its timer, or a NAK code IBTA defines) and zeros
//! 16..32  WRITE only: a RETH (IBTA Vol 1 §9.3.3: remote address u64, rkey u32,
//!         length of the message u32)
//! then    the payload, to the item's end (none for ERROR; a WRITE's is the whole
//!         message: its length must equal the length field)
//! ```
//!
//! Untrusted bytes enter through [`RingDescriptor::parse`]: the peer writes the slot,
//! and the link copies the item out of the ring before anything here reads it.
//! Every field with fewer valid values than bits is checked, so what parses emits
//! back to the same bytes.

use crate::roce::ext::be_u32;
use crate::roce::{NakCode, RethRepr, Syndrome};
use crate::{check_len, Error, Field, Header, Result};

/// The first byte of every descriptor.
pub const MARKER: u8 = 0xF0;
/// Bytes of the fixed header.
pub const HEADER_LEN: usize = 16;
/// Bytes of a WRITE's RETH after the fixed header.
pub const WRITE_EXT_LEN: usize = crate::roce::opcode::len::RETH;

const FLAG_IMM: u8 = 1;
const FLAG_SOLICITED: u8 = 2;
const QPN_LIMIT: u32 = 1 << 24;

/// What a descriptor asks of the responder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RingOp {
    /// SEND: the payload goes to the next receive WQE.
    Send {
        /// Immediate data.
        imm: Option<u32>,
        /// The solicited-event bit.
        solicited: bool,
    },
    /// RDMA WRITE of the payload at `va` under `rkey`; with an immediate it also
    /// consumes a receive WQE.
    Write {
        /// Remote virtual address.
        va: u64,
        /// Remote key.
        rkey: u32,
        /// Immediate data.
        imm: Option<u32>,
    },
    /// The responder refused message `seq` of the QP: an RNR NAK (the requester
    /// retries after its timer) or a NAK code (PSN sequence, invalid request, remote
    /// access or operational error, invalid RD request).
    Error {
        /// The AETH syndrome: [`Syndrome::RnrNak`] or [`Syndrome::Nak`] with a defined
        /// code; nothing else parses or emits.
        syndrome: Syndrome,
    },
}

impl RingOp {
    fn code(&self) -> u8 {
        match self {
            RingOp::Send { .. } => 1,
            RingOp::Write { .. } => 2,
            RingOp::Error { .. } => 3,
        }
    }
}

/// One descriptor's header fields (the payload is the rest of the item).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RingDescriptor {
    /// The destination QP.
    pub dest_qpn: u32,
    /// The message's sequence number on its QP.
    pub seq: u32,
    /// The operation and its fields.
    pub op: RingOp,
}

/// The syndromes an ERROR may carry: an RNR NAK, or a NAK whose code IBTA defines.
fn error_syndrome(s: Syndrome) -> bool {
    match s {
        Syndrome::RnrNak { timer } => timer <= 0x1f,
        Syndrome::Nak(code) => code.0 <= NakCode::INVALID_RD_REQUEST.0,
        Syndrome::Ack { .. } | Syndrome::Reserved(_) => false,
    }
}

fn field(field: Field, value: u32) -> Error {
    Error::Field {
        header: Header::RingDescriptor,
        field,
        value,
    }
}

impl RingDescriptor {
    /// Bytes of this descriptor's header (the payload follows).
    pub fn header_len(&self) -> usize {
        match self.op {
            RingOp::Write { .. } => HEADER_LEN + WRITE_EXT_LEN,
            _ => HEADER_LEN,
        }
    }

    /// Parse an item: the descriptor and its payload.
    pub fn parse(b: &[u8]) -> Result<(RingDescriptor, &[u8])> {
        check_len(Header::RingDescriptor, b.len(), HEADER_LEN)?;
        if b[0] != MARKER {
            return Err(field(Field::Opcode, u32::from(b[0])));
        }
        let flags = b[2];
        let allowed = match b[1] {
            1 => FLAG_IMM | FLAG_SOLICITED,
            2 => FLAG_IMM,
            3 => 0,
            op => return Err(field(Field::Operation, u32::from(op))),
        };
        if flags & !allowed != 0 {
            return Err(field(Field::Flags, u32::from(flags)));
        }
        if b[3] != 0 {
            return Err(field(Field::Reserved, u32::from(b[3])));
        }
        let dest_qpn = be_u32(b, 4);
        if dest_qpn >= QPN_LIMIT {
            return Err(field(Field::DestQp, dest_qpn));
        }
        let seq = be_u32(b, 8);
        let word = be_u32(b, 12);
        let imm = if flags & FLAG_IMM != 0 {
            Some(word)
        } else if b[1] != 3 && word != 0 {
            return Err(field(Field::Reserved, word));
        } else {
            None
        };
        let (op, payload) = match b[1] {
            1 => (
                RingOp::Send {
                    imm,
                    solicited: flags & FLAG_SOLICITED != 0,
                },
                &b[HEADER_LEN..],
            ),
            2 => {
                check_len(Header::RingDescriptor, b.len(), HEADER_LEN + WRITE_EXT_LEN)?;
                let reth = RethRepr::parse(&b[HEADER_LEN..])?;
                let payload = &b[HEADER_LEN + WRITE_EXT_LEN..];
                if payload.len() != reth.dma_len as usize {
                    return Err(Error::Length {
                        header: Header::RingDescriptor,
                        field: Field::Payload,
                        value: payload.len(),
                    });
                }
                (
                    RingOp::Write {
                        va: reth.va,
                        rkey: reth.rkey,
                        imm,
                    },
                    payload,
                )
            }
            _ => {
                // An ERROR: the syndrome in its first byte, the rest zero, no payload.
                if word & 0x00ff_ffff != 0 {
                    return Err(field(Field::Reserved, word));
                }
                let syndrome = Syndrome::from_u8(b[12]);
                if !error_syndrome(syndrome) {
                    return Err(field(Field::Syndrome, u32::from(b[12])));
                }
                if b.len() != HEADER_LEN {
                    return Err(Error::Length {
                        header: Header::RingDescriptor,
                        field: Field::Payload,
                        value: b.len() - HEADER_LEN,
                    });
                }
                (RingOp::Error { syndrome }, &b[HEADER_LEN..])
            }
        };
        Ok((RingDescriptor { dest_qpn, seq, op }, payload))
    }

    /// Write the header for a payload of `payload_len` bytes into the front of `b`;
    /// returns the header's length (the payload goes right after it). Refuses what
    /// [`RingDescriptor::parse`] would refuse: a QPN of 2^24 or more, a payload on an
    /// ERROR or a syndrome it may not carry, a WRITE's payload longer than its length
    /// field holds.
    pub fn emit(&self, b: &mut [u8], payload_len: usize) -> Result<usize> {
        let n = self.header_len();
        check_len(Header::RingDescriptor, b.len(), n)?;
        if self.dest_qpn >= QPN_LIMIT {
            return Err(field(Field::DestQp, self.dest_qpn));
        }
        let bad_len = || Error::Length {
            header: Header::RingDescriptor,
            field: Field::Payload,
            value: payload_len,
        };
        let (flags, word) = match self.op {
            RingOp::Send { imm, solicited } => (
                (u8::from(imm.is_some()) * FLAG_IMM) | (u8::from(solicited) * FLAG_SOLICITED),
                imm.unwrap_or(0),
            ),
            RingOp::Write { va, rkey, imm } => {
                let dma_len = u32::try_from(payload_len).map_err(|_| bad_len())?;
                RethRepr { va, rkey, dma_len }.emit(&mut b[HEADER_LEN..n])?;
                (u8::from(imm.is_some()) * FLAG_IMM, imm.unwrap_or(0))
            }
            RingOp::Error { syndrome } => {
                if payload_len != 0 {
                    return Err(bad_len());
                }
                if !error_syndrome(syndrome) {
                    return Err(field(Field::Syndrome, u32::from(syndrome.to_u8())));
                }
                (0, u32::from(syndrome.to_u8()) << 24)
            }
        };
        b[0] = MARKER;
        b[1] = self.op.code();
        b[2] = flags;
        b[3] = 0;
        b[4..8].copy_from_slice(&self.dest_qpn.to_be_bytes());
        b[8..12].copy_from_slice(&self.seq.to_be_bytes());
        b[12..16].copy_from_slice(&word.to_be_bytes());
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn item(d: &RingDescriptor, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; d.header_len() + payload.len()];
        let n = d.emit(&mut b, payload.len()).unwrap();
        b[n..].copy_from_slice(payload);
        b
    }

    #[test]
    fn a_send_with_immediate_round_trips_with_its_payload() {
        let d = RingDescriptor {
            dest_qpn: 0x12_3456,
            seq: 7,
            op: RingOp::Send {
                imm: Some(0xdead_beef),
                solicited: true,
            },
        };
        let b = item(&d, b"hello");
        assert_eq!(&b[..4], &[MARKER, 1, 3, 0]);
        assert_eq!(RingDescriptor::parse(&b).unwrap(), (d, &b"hello"[..]));
    }

    #[test]
    fn a_write_carries_its_remote_buffer_and_its_length_must_match_the_payload() {
        let d = RingDescriptor {
            dest_qpn: 9,
            seq: u32::MAX,
            op: RingOp::Write {
                va: 0x7fff_0000_1000,
                rkey: 0x55,
                imm: None,
            },
        };
        let mut b = item(&d, &[1, 2, 3]);
        assert_eq!(RingDescriptor::parse(&b).unwrap(), (d, &[1u8, 2, 3][..]));
        b.push(4);
        assert_eq!(
            RingDescriptor::parse(&b),
            Err(Error::Length {
                header: Header::RingDescriptor,
                field: Field::Payload,
                value: 4
            })
        );
        assert!(matches!(
            RingDescriptor::parse(&b[..HEADER_LEN + 8]),
            Err(Error::Truncated { .. })
        ));
    }

    #[test]
    fn an_error_names_its_syndrome_and_carries_no_payload() {
        let d = RingDescriptor {
            dest_qpn: 1,
            seq: 3,
            op: RingOp::Error {
                syndrome: Syndrome::RnrNak { timer: 0 },
            },
        };
        let b = item(&d, &[]);
        assert_eq!(RingDescriptor::parse(&b).unwrap(), (d, &[][..]));
        let mut longer = b.clone();
        longer.push(0);
        assert!(RingDescriptor::parse(&longer).is_err());
        // An ACK's syndrome, and a NAK code IBTA does not define, are not errors.
        for raw in [0x00, 0x65] {
            let mut bad = b.clone();
            bad[12] = raw;
            assert_eq!(
                RingDescriptor::parse(&bad),
                Err(field(Field::Syndrome, u32::from(raw)))
            );
        }
        let ack = RingDescriptor {
            op: RingOp::Error {
                syndrome: Syndrome::Ack { credit_code: 0 },
            },
            ..d
        };
        assert!(ack.emit(&mut [0u8; 16], 0).is_err());
        assert!(d.emit(&mut [0u8; 32], 1).is_err());
    }

    #[test]
    fn every_field_with_fewer_values_than_bits_is_checked() {
        let d = RingDescriptor {
            dest_qpn: 1,
            seq: 0,
            op: RingOp::Send {
                imm: None,
                solicited: false,
            },
        };
        let good = item(&d, &[0; 4]);
        let err = |at: usize, v: u8| {
            let mut b = good.clone();
            b[at] = v;
            RingDescriptor::parse(&b).unwrap_err()
        };
        // A RoCEv2 RC SEND Only's opcode is not a descriptor.
        assert_eq!(err(0, 0x04), field(Field::Opcode, 0x04));
        assert_eq!(err(1, 0), field(Field::Operation, 0));
        assert_eq!(err(1, 4), field(Field::Operation, 4));
        assert_eq!(err(2, 4), field(Field::Flags, 4));
        assert_eq!(err(3, 1), field(Field::Reserved, 1));
        assert_eq!(err(4, 1), field(Field::DestQp, 0x0100_0001));
        // The immediate's word without the flag.
        assert_eq!(err(15, 1), field(Field::Reserved, 1));
        // A WRITE may not be solicited (the flag is a SEND's).
        let mut w = good.clone();
        w[1] = 2;
        w[2] = FLAG_SOLICITED;
        assert!(RingDescriptor::parse(&w).is_err());
        assert!(RingDescriptor::parse(&good[..HEADER_LEN - 1]).is_err());
        let big = RingDescriptor {
            dest_qpn: QPN_LIMIT,
            ..d
        };
        assert!(big.emit(&mut [0u8; 16], 0).is_err());
    }

    fn op() -> impl Strategy<Value = RingOp> {
        prop_oneof![
            (any::<Option<u32>>(), any::<bool>())
                .prop_map(|(imm, solicited)| RingOp::Send { imm, solicited }),
            (any::<u64>(), any::<u32>(), any::<Option<u32>>())
                .prop_map(|(va, rkey, imm)| RingOp::Write { va, rkey, imm }),
            (0u8..32).prop_map(|timer| RingOp::Error {
                syndrome: Syndrome::RnrNak { timer }
            }),
            (0u8..5).prop_map(|c| RingOp::Error {
                syndrome: Syndrome::Nak(NakCode(c))
            }),
        ]
    }

    proptest! {
        /// What is emitted parses back to the same descriptor and payload.
        #[test]
        fn emit_then_parse_is_the_identity(
            dest_qpn in 0u32..QPN_LIMIT,
            seq in any::<u32>(),
            op in op(),
            payload in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let payload = if matches!(op, RingOp::Error { .. }) { vec![] } else { payload };
            let d = RingDescriptor { dest_qpn, seq, op };
            let b = item(&d, &payload);
            prop_assert_eq!(RingDescriptor::parse(&b).unwrap(), (d, &payload[..]));
        }
    }
}
