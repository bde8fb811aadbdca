//! ICMP for IPv4 (RFC 792): echo, destination unreachable and time exceeded — what a
//! host answers and a router sends.
//!
//! ```text
//!  0      1      2          4                                  8
//!  type | code | checksum | ident, seq (echo) / unused, MTU | data / invoking datagram
//! ```
//! The view's buffer is the whole ICMP message (the IPv4 payload): the checksum covers
//! all of it.

use crate::checksum;
use crate::{check_len, Error, Field, Header, Result};
use core::fmt;

mod field {
    use crate::Bytes as Field;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    pub const ECHO_IDENT: Field = 4..6;
    pub const ECHO_SEQNO: Field = 6..8;
    pub const UNUSED: Field = 4..6;
    pub const MTU: Field = 6..8;
}

/// Length of the ICMP header.
pub const HEADER_LEN: usize = 8;

/// An ICMPv4 message type; open, so unknown types survive a view read.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Icmpv4Message(pub u8);

impl Icmpv4Message {
    /// Echo reply.
    pub const ECHO_REPLY: Icmpv4Message = Icmpv4Message(0);
    /// Destination unreachable.
    pub const DST_UNREACHABLE: Icmpv4Message = Icmpv4Message(3);
    /// Echo request.
    pub const ECHO_REQUEST: Icmpv4Message = Icmpv4Message(8);
    /// Time exceeded.
    pub const TIME_EXCEEDED: Icmpv4Message = Icmpv4Message(11);
}

impl fmt::Debug for Icmpv4Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Icmpv4Message::ECHO_REPLY => f.write_str("EchoReply"),
            Icmpv4Message::DST_UNREACHABLE => f.write_str("DstUnreachable"),
            Icmpv4Message::ECHO_REQUEST => f.write_str("EchoRequest"),
            Icmpv4Message::TIME_EXCEEDED => f.write_str("TimeExceeded"),
            Icmpv4Message(v) => write!(f, "{v}"),
        }
    }
}

open_code! {
    /// Code of a destination unreachable (RFC 792, RFC 1812 §5.2.7.1).
    UnreachableCode {
        /// Net unreachable.
        NET = 0 => "Net",
        /// Host unreachable.
        HOST = 1 => "Host",
        /// Protocol unreachable.
        PROTOCOL = 2 => "Protocol",
        /// Port unreachable.
        PORT = 3 => "Port",
        /// Fragmentation needed and DF set; the next-hop MTU is in bytes 6..8 (RFC 1191).
        FRAG_NEEDED = 4 => "FragNeeded",
    }
}

open_code! {
    /// Code of a time exceeded (RFC 792).
    TimeExceededCode {
        /// TTL exceeded in transit.
        TTL = 0 => "Ttl",
        /// Fragment reassembly time exceeded.
        REASSEMBLY = 1 => "Reassembly",
    }
}

/// The part of an offending datagram an error message quotes: its IP header and the
/// first 8 bytes of its payload (RFC 792), cut to what `datagram` holds. Never panics.
pub fn quote(datagram: &[u8]) -> &[u8] {
    let hl = datagram
        .first()
        .map_or(0, |b| usize::from(b & 0x0f) * 4)
        .max(20);
    &datagram[..datagram.len().min(hl + 8)]
}

#[inline]
fn be16(b: &[u8], f: crate::Bytes) -> u16 {
    let s = &b[f];
    u16::from_be_bytes([s[0], s[1]])
}

/// A zero-copy view of an ICMPv4 message.
#[derive(Debug, Clone, Copy)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
    /// Wrap without checking; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Icmpv4Packet<T> {
        Icmpv4Packet { buffer }
    }

    /// Wrap after checking that the 8-byte header fits.
    pub fn new_checked(buffer: T) -> Result<Icmpv4Packet<T>> {
        let p = Icmpv4Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Check that the 8-byte header fits.
    pub fn check_len(&self) -> Result<()> {
        check_len(Header::Icmpv4, self.buffer.as_ref().len(), HEADER_LEN)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Message type.
    pub fn msg_type(&self) -> Icmpv4Message {
        Icmpv4Message(self.buffer.as_ref()[field::TYPE])
    }
    /// Code.
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }
    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// Echo identifier (bytes 4..6).
    pub fn echo_ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ECHO_IDENT)
    }
    /// Echo sequence number (bytes 6..8).
    pub fn echo_seq_no(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }
    /// Next-hop MTU of a "fragmentation needed" (bytes 6..8).
    pub fn next_hop_mtu(&self) -> u16 {
        be16(self.buffer.as_ref(), field::MTU)
    }
    /// Everything after the 8-byte header: echo data or the invoking datagram.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
    /// True when the checksum over the whole message verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    /// Set the type.
    pub fn set_msg_type(&mut self, t: Icmpv4Message) {
        self.buffer.as_mut()[field::TYPE] = t.0;
    }
    /// Set the code.
    pub fn set_msg_code(&mut self, c: u8) {
        self.buffer.as_mut()[field::CODE] = c;
    }
    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the echo identifier.
    pub fn set_echo_ident(&mut self, v: u16) {
        self.buffer.as_mut()[field::ECHO_IDENT].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the echo sequence number.
    pub fn set_echo_seq_no(&mut self, v: u16) {
        self.buffer.as_mut()[field::ECHO_SEQNO].copy_from_slice(&v.to_be_bytes());
    }
    /// Clear the unused bytes 4..6 and set the next-hop MTU (0 when not used).
    pub fn set_unused_and_mtu(&mut self, mtu: u16) {
        self.buffer.as_mut()[field::UNUSED].fill(0);
        self.buffer.as_mut()[field::MTU].copy_from_slice(&mtu.to_be_bytes());
    }
    /// The data after the header, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
    /// Compute and write the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.buffer.as_ref());
        self.set_checksum(c);
    }
}

/// The ICMPv4 messages weft handles, as plain values borrowing their data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Icmpv4Repr<'a> {
    /// Echo request.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data, echoed back.
        data: &'a [u8],
    },
    /// Echo reply.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Data.
        data: &'a [u8],
    },
    /// Destination unreachable.
    DstUnreachable {
        /// Why.
        code: UnreachableCode,
        /// Next-hop MTU for [`UnreachableCode::FRAG_NEEDED`], else 0.
        next_hop_mtu: u16,
        /// The invoking datagram's header and first 8 payload bytes (see [`quote`]).
        invoking: &'a [u8],
    },
    /// Time exceeded.
    TimeExceeded {
        /// Why.
        code: TimeExceededCode,
        /// The invoking datagram's header and first 8 payload bytes (see [`quote`]).
        invoking: &'a [u8],
    },
}

/// The quoted datagram must at least hold a whole IPv4 header.
fn check_invoking(b: &[u8]) -> Result<()> {
    let ok = b.len() >= 20
        && b[0] >> 4 == 4
        && usize::from(b[0] & 0x0f) * 4 >= 20
        && usize::from(b[0] & 0x0f) * 4 <= b.len();
    if ok {
        Ok(())
    } else {
        Err(Error::Field {
            header: Header::Icmpv4,
            field: Field::Invoking,
            value: b.len() as u32,
        })
    }
}

impl<'a> Icmpv4Repr<'a> {
    /// Parse a checked view: the checksum must verify; types other than the four
    /// above are `Unsupported` (the view still reads them).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Icmpv4Packet<&'a T>) -> Result<Icmpv4Repr<'a>> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Error::Checksum {
                header: Header::Icmpv4,
            });
        }
        let data = &packet.buffer.as_ref()[HEADER_LEN..];
        match packet.msg_type() {
            Icmpv4Message::ECHO_REQUEST | Icmpv4Message::ECHO_REPLY if packet.msg_code() != 0 => {
                Err(Error::Field {
                    header: Header::Icmpv4,
                    field: Field::Code,
                    value: u32::from(packet.msg_code()),
                })
            }
            Icmpv4Message::ECHO_REQUEST => Ok(Icmpv4Repr::EchoRequest {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            Icmpv4Message::ECHO_REPLY => Ok(Icmpv4Repr::EchoReply {
                ident: packet.echo_ident(),
                seq_no: packet.echo_seq_no(),
                data,
            }),
            Icmpv4Message::DST_UNREACHABLE => {
                check_invoking(data)?;
                let code = packet.msg_code();
                let code = UnreachableCode(code);
                let next_hop_mtu = if code == UnreachableCode::FRAG_NEEDED {
                    packet.next_hop_mtu()
                } else {
                    0
                };
                Ok(Icmpv4Repr::DstUnreachable {
                    code,
                    next_hop_mtu,
                    invoking: data,
                })
            }
            Icmpv4Message::TIME_EXCEEDED => {
                check_invoking(data)?;
                Ok(Icmpv4Repr::TimeExceeded {
                    code: TimeExceededCode(packet.msg_code()),
                    invoking: data,
                })
            }
            t => Err(Error::Unsupported {
                header: Header::Icmpv4,
                field: Field::Type,
                value: u32::from(t.0),
            }),
        }
    }

    /// Header plus data.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN
            + match self {
                Icmpv4Repr::EchoRequest { data, .. } | Icmpv4Repr::EchoReply { data, .. } => {
                    data.len()
                }
                Icmpv4Repr::DstUnreachable { invoking, .. }
                | Icmpv4Repr::TimeExceeded { invoking, .. } => invoking.len(),
            }
    }

    /// Write the message and its checksum. The view's buffer must be exactly
    /// `buffer_len()` long, since the checksum covers all of it.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv4Packet<T>) -> Result<()> {
        let have = packet.buffer.as_ref().len();
        check_len(Header::Icmpv4, have, self.buffer_len())?;
        if have != self.buffer_len() {
            return Err(Error::Length {
                header: Header::Icmpv4,
                field: Field::Length,
                value: have,
            });
        }
        let data = match *self {
            Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }
            | Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data,
            } => {
                let t = if matches!(self, Icmpv4Repr::EchoRequest { .. }) {
                    Icmpv4Message::ECHO_REQUEST
                } else {
                    Icmpv4Message::ECHO_REPLY
                };
                packet.set_msg_type(t);
                packet.set_msg_code(0);
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
                data
            }
            Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu,
                invoking,
            } => {
                packet.set_msg_type(Icmpv4Message::DST_UNREACHABLE);
                packet.set_msg_code(code.0);
                packet.set_unused_and_mtu(next_hop_mtu);
                invoking
            }
            Icmpv4Repr::TimeExceeded { code, invoking } => {
                packet.set_msg_type(Icmpv4Message::TIME_EXCEEDED);
                packet.set_msg_code(code.0);
                packet.set_unused_and_mtu(0);
                invoking
            }
        };
        packet.data_mut().copy_from_slice(data);
        packet.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // An echo request, ident 0x1234, seq 1, data "abcdefgh"; checksum 0x5435 computed
    // by an independent script.
    const ECHO: [u8; 16] = [
        8, 0, 0x54, 0x35, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd', b'e', b'f', b'g', b'h',
    ];
    // The IPv4+UDP header of the classic 192.168.0.1 -> 192.168.0.199 datagram.
    const INVOKING: [u8; 28] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7, 0xc0, 0x00, 0x12, 0xb7, 0x00, 0x5f, 0x00, 0x00,
    ];

    #[test]
    fn decode_echo() {
        let p = Icmpv4Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(p.msg_type(), Icmpv4Message::ECHO_REQUEST);
        assert_eq!(p.msg_code(), 0);
        assert_eq!(p.checksum(), 0x5435);
        assert!(p.verify_checksum());
        assert_eq!(
            Icmpv4Repr::parse(&p).unwrap(),
            Icmpv4Repr::EchoRequest {
                ident: 0x1234,
                seq_no: 1,
                data: b"abcdefgh"
            }
        );
    }

    #[test]
    fn emit_echo_reproduces_bytes() {
        let r = Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&ECHO[..]).unwrap()).unwrap();
        let mut out = [0u8; 16];
        r.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]))
            .unwrap();
        assert_eq!(out, ECHO);
    }

    #[test]
    fn time_exceeded_hand_checked() {
        // Checksum 0x21e9 from the same independent script.
        let mut b = vec![11, 0, 0x21, 0xe9, 0, 0, 0, 0];
        b.extend_from_slice(&INVOKING);
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        let r = Icmpv4Repr::parse(&p).unwrap();
        assert_eq!(
            r,
            Icmpv4Repr::TimeExceeded {
                code: TimeExceededCode::TTL,
                invoking: &INVOKING
            }
        );
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]))
            .unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn quote_takes_header_plus_eight() {
        let mut d = INVOKING.to_vec();
        d.extend_from_slice(&[0xee; 100]);
        assert_eq!(quote(&d), &INVOKING[..]);
        assert_eq!(quote(&d[..10]), &d[..10]);
        assert_eq!(quote(&[]), &[] as &[u8]);
        let mut opt = d.clone();
        opt[0] = 0x46;
        assert_eq!(quote(&opt).len(), 24 + 8);
    }

    #[test]
    fn frag_needed_carries_mtu() {
        let r = Icmpv4Repr::DstUnreachable {
            code: UnreachableCode::FRAG_NEEDED,
            next_hop_mtu: 1400,
            invoking: &INVOKING,
        };
        let mut out = vec![0u8; r.buffer_len()];
        r.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..]))
            .unwrap();
        let p = Icmpv4Packet::new_checked(&out[..]).unwrap();
        assert_eq!(p.next_hop_mtu(), 1400);
        assert_eq!(Icmpv4Repr::parse(&p).unwrap(), r);
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(
            Icmpv4Packet::new_checked(&ECHO[..7]).unwrap_err(),
            Error::Truncated {
                header: Header::Icmpv4,
                need: 8,
                have: 7
            }
        );
        let mut b = ECHO;
        b[9] ^= 1;
        assert_eq!(
            Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Checksum {
                header: Header::Icmpv4
            })
        );
        // Unknown type: the view reads it, the Repr refuses it.
        let mut b = ECHO;
        b[0] = 13; // timestamp
        Icmpv4Packet::new_unchecked(&mut b[..]).fill_checksum();
        let p = Icmpv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.msg_type(), Icmpv4Message(13));
        assert_eq!(
            Icmpv4Repr::parse(&p),
            Err(Error::Unsupported {
                header: Header::Icmpv4,
                field: Field::Type,
                value: 13
            })
        );
        // A time exceeded that quotes less than an IPv4 header.
        let mut b = vec![11, 0, 0, 0, 0, 0, 0, 0];
        b.extend_from_slice(&INVOKING[..19]);
        Icmpv4Packet::new_unchecked(&mut b[..]).fill_checksum();
        assert_eq!(
            Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&b[..]).unwrap()),
            Err(Error::Field {
                header: Header::Icmpv4,
                field: Field::Invoking,
                value: 19
            })
        );
        // Emit into a wrong-size buffer.
        let r = Icmpv4Repr::EchoReply {
            ident: 1,
            seq_no: 2,
            data: b"xy",
        };
        let mut out = [0u8; 11];
        assert_eq!(
            r.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..9])),
            Err(Error::Truncated {
                header: Header::Icmpv4,
                need: 10,
                have: 9
            })
        );
        assert_eq!(
            r.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..])),
            Err(Error::Length {
                header: Header::Icmpv4,
                field: Field::Length,
                value: 11
            })
        );
    }

    proptest! {
        #[test]
        fn round_trip(kind in 0u8..4, ident in any::<u16>(), seq_no in any::<u16>(), code in any::<u8>(),
                      mtu in any::<u16>(), data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut inv = INVOKING.to_vec();
            inv.extend_from_slice(&data);
            let r = match kind {
                0 => Icmpv4Repr::EchoRequest { ident, seq_no, data: &data },
                1 => Icmpv4Repr::EchoReply { ident, seq_no, data: &data },
                2 => Icmpv4Repr::DstUnreachable {
                    code: UnreachableCode(code), next_hop_mtu: if code == UnreachableCode::FRAG_NEEDED.0 { mtu } else { 0 }, invoking: &inv },
                _ => Icmpv4Repr::TimeExceeded { code: TimeExceededCode(code), invoking: &inv },
            };
            let mut out = vec![0u8; r.buffer_len()];
            r.emit(&mut Icmpv4Packet::new_unchecked(&mut out[..])).unwrap();
            prop_assert_eq!(Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&out[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn any_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = quote(&b);
            if let Ok(p) = Icmpv4Packet::new_checked(&b[..]) {
                let _ = (p.echo_ident(), p.echo_seq_no(), p.next_hop_mtu(), p.data(), p.verify_checksum());
                let _ = Icmpv4Repr::parse(&p);
            }
        }
    }
}
