//! IPv4 headers (RFC 791) and the IP protocol numbers shared with IPv6.
//!
//! ```text
//!  0        1          2            4        6               8     9       10        12    16    20
//!  ver|ihl | dscp|ecn | total len  | ident  | flags|frag off | ttl | proto | checksum | src | dst | options
//! ```

use crate::checksum;
use crate::{check_len, Error, Field, Header, Result};
use core::fmt;

/// IPv4 addresses are the standard library's.
pub use std::net::Ipv4Addr as Ipv4Address;

mod field {
    use crate::Bytes as Field;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    pub const FLG_OFF: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const TTL_PROTOCOL: Field = 8..10;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC: Field = 12..16;
    pub const DST: Field = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = 20;

/// An IP protocol / IPv6 next-header number (IANA "Assigned Internet Protocol
/// Numbers"); open, so unknown values survive a parse.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// IPv6 Hop-by-Hop Options (RFC 8200 §4.3).
    pub const HOP_BY_HOP: IpProtocol = IpProtocol(0);
    /// ICMP for IPv4.
    pub const ICMP: IpProtocol = IpProtocol(1);
    /// TCP.
    pub const TCP: IpProtocol = IpProtocol(6);
    /// UDP.
    pub const UDP: IpProtocol = IpProtocol(17);
    /// IPv6 Routing header (RFC 8200 §4.4).
    pub const ROUTING: IpProtocol = IpProtocol(43);
    /// IPv6 Fragment header (RFC 8200 §4.5).
    pub const FRAGMENT: IpProtocol = IpProtocol(44);
    /// Encapsulating Security Payload (RFC 4303).
    pub const ESP: IpProtocol = IpProtocol(50);
    /// Authentication Header (RFC 4302).
    pub const AH: IpProtocol = IpProtocol(51);
    /// ICMP for IPv6.
    pub const IPV6_ICMP: IpProtocol = IpProtocol(58);
    /// IPv6 No Next Header.
    pub const NO_NEXT: IpProtocol = IpProtocol(59);
    /// IPv6 Destination Options (RFC 8200 §4.6).
    pub const DEST_OPTS: IpProtocol = IpProtocol(60);
}

impl fmt::Debug for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match *self {
            IpProtocol::HOP_BY_HOP => "HopByHop",
            IpProtocol::ICMP => "ICMP",
            IpProtocol::TCP => "TCP",
            IpProtocol::UDP => "UDP",
            IpProtocol::ROUTING => "Routing",
            IpProtocol::FRAGMENT => "Fragment",
            IpProtocol::ESP => "ESP",
            IpProtocol::AH => "AH",
            IpProtocol::IPV6_ICMP => "ICMPv6",
            IpProtocol::NO_NEXT => "NoNext",
            IpProtocol::DEST_OPTS => "DestOpts",
            IpProtocol(v) => return write!(f, "0x{v:02x}"),
        };
        f.write_str(name)
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[inline]
fn be16(b: &[u8], f: crate::Bytes) -> u16 {
    let s = &b[f];
    u16::from_be_bytes([s[0], s[1]])
}

/// A zero-copy view of an IPv4 packet.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wrap without checking; accessors may panic on a short or inconsistent buffer.
    pub const fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }

    /// Wrap after [`Ipv4Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>> {
        let p = Ipv4Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Check version 4, and `20 <= IHL*4 <= total length <= buffer length` (RFC 791
    /// §3.1); bytes past the total length (Ethernet padding) are allowed and ignored.
    /// A buffer shorter than the header is `Truncated`; a total length below the
    /// header or past the buffer is a `Length` error on the total length field.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        check_len(Header::Ipv4, b.len(), HEADER_LEN)?;
        if self.version() != 4 {
            return Err(Error::Field {
                header: Header::Ipv4,
                field: Field::Version,
                value: u32::from(self.version()),
            });
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(Error::Field {
                header: Header::Ipv4,
                field: Field::Ihl,
                value: (hl / 4) as u32,
            });
        }
        check_len(Header::Ipv4, b.len(), hl)?;
        let total = usize::from(self.total_len());
        if total < hl {
            return Err(Error::Length {
                header: Header::Ipv4,
                field: Field::TotalLength,
                value: total,
            });
        }
        if total > b.len() {
            return Err(Error::Length {
                header: Header::Ipv4,
                field: Field::TotalLength,
                value: total,
            });
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version (4 once checked).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }
    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }
    /// The DSCP and ECN byte (formerly type of service).
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN]
    }
    /// Differentiated services code point (6 bits).
    pub fn dscp(&self) -> u8 {
        self.dscp_ecn() >> 2
    }
    /// Explicit congestion notification (2 bits; 0b11 = congestion experienced).
    pub fn ecn(&self) -> u8 {
        self.dscp_ecn() & 0x3
    }
    /// Total length of header and payload.
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }
    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }
    /// Don't fragment.
    pub fn dont_frag(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x4000 != 0
    }
    /// More fragments.
    pub fn more_frags(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x2000 != 0
    }
    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buffer.as_ref(), field::FLG_OFF) & 0x1fff) << 3
    }
    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }
    /// Protocol of the payload.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::PROTOCOL])
    }
    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv4Address {
        let b = &self.buffer.as_ref()[field::SRC];
        Ipv4Address::new(b[0], b[1], b[2], b[3])
    }
    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Address {
        let b = &self.buffer.as_ref()[field::DST];
        Ipv4Address::new(b[0], b[1], b[2], b[3])
    }
    /// The options, raw (empty when IHL is 5).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }
    /// The header bytes, options included.
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }
    /// The payload: from the end of the header to the total length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }
    /// True when the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.header()) == 0xffff
    }
    /// [`Ipv4Packet::verify_checksum`] as a `Result`: the `Checksum` error when it
    /// fails (RFC 1812 §5.2.2 makes it one of a router's checks).
    pub fn check_checksum(&self) -> Result<()> {
        if self.verify_checksum() {
            Ok(())
        } else {
            Err(Error::Checksum {
                header: Header::Ipv4,
            })
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Set version 4 and the header length in bytes (a multiple of 4, 20..=60).
    pub fn set_version_header_len(&mut self, header_len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | ((header_len / 4) as u8 & 0x0f);
    }
    /// Set the DSCP/ECN byte.
    pub fn set_dscp_ecn(&mut self, v: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = v;
    }
    /// Set the total length.
    pub fn set_total_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the identification.
    pub fn set_ident(&mut self, v: u16) {
        self.buffer.as_mut()[field::IDENT].copy_from_slice(&v.to_be_bytes());
    }
    /// Set DF, MF and the fragment offset in bytes (rounded down to 8).
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset: u16) {
        let v = (u16::from(dont_frag) << 14) | (u16::from(more_frags) << 13) | (offset >> 3);
        self.buffer.as_mut()[field::FLG_OFF].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the TTL (the checksum is not updated; see [`Ipv4Packet::decrement_ttl`]).
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }
    /// Set the protocol.
    pub fn set_protocol(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = p.0;
    }
    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the source address.
    pub fn set_src_addr(&mut self, a: Ipv4Address) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }
    /// Set the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv4Address) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }
    /// Compute and write the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.header());
        self.set_checksum(c);
    }
    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[h..t]
    }

    /// A congested router's mark (RFC 3168 §5): set ECN to CE (0b11) on an
    /// ECN-capable packet (ECT(0) or ECT(1)), patching the checksum by RFC 1624. A
    /// Not-ECT packet is left alone (the router drops it instead) and CE stays CE.
    /// Returns true when the packet now carries CE. RoCEv2 receivers answer CE with a
    /// CNP, so this is how a weft router signals congestion.
    pub fn mark_ce(&mut self) -> bool {
        match self.ecn() {
            0b00 => false,
            0b11 => true,
            _ => {
                let b = self.buffer.as_ref();
                let old_word = u16::from_be_bytes([b[field::VER_IHL], b[field::DSCP_ECN]]);
                let new_word = old_word | 0b11;
                let c = checksum::update16(self.checksum(), old_word, new_word);
                self.set_dscp_ecn(self.dscp_ecn() | 0b11);
                self.set_checksum(c);
                true
            }
        }
    }

    /// A router's forwarding step (RFC 1812 §5.3.1): TTL − 1, with the checksum
    /// patched by RFC 1624 eqn. 3 instead of recomputed over the header. Returns the
    /// new TTL, or `None` (and changes nothing) when the TTL is already 0. A router
    /// that gets `Some(0)` must drop the packet and send Time Exceeded.
    pub fn decrement_ttl(&mut self) -> Option<u8> {
        let ttl = self.ttl();
        let new_ttl = ttl.checked_sub(1)?;
        let b = self.buffer.as_ref();
        let old_word = be16(b, field::TTL_PROTOCOL);
        let new_word = (u16::from(new_ttl) << 8) | u16::from(b[field::PROTOCOL]);
        let c = checksum::update16(self.checksum(), old_word, new_word);
        self.set_ttl(new_ttl);
        self.set_checksum(c);
        Some(new_ttl)
    }
}

/// An IPv4 header as plain values. Options are not represented: `parse` accepts and
/// skips them, `emit` writes none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Address,
    /// Destination address.
    pub dst_addr: Ipv4Address,
    /// Protocol of the payload.
    pub protocol: IpProtocol,
    /// Payload length in bytes.
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
    /// DSCP (upper 6 bits) and ECN (lower 2).
    pub dscp_ecn: u8,
    /// Identification.
    pub ident: u16,
    /// Don't fragment.
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// Parse a checked view: the checksum must verify, and fragments are not
    /// represented (weft does not reassemble), so a fragment is `Unsupported`.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Ipv4Repr> {
        packet.check_len()?;
        packet.check_checksum()?;
        if packet.more_frags() || packet.frag_offset() != 0 {
            return Err(Error::Unsupported {
                header: Header::Ipv4,
                field: Field::Fragment,
                value: u32::from(be16(packet.buffer.as_ref(), field::FLG_OFF) & 0x3fff),
            });
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: packet.payload().len(),
            ttl: packet.ttl(),
            dscp_ecn: packet.dscp_ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
        })
    }

    /// 20: `emit` writes no options.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Write the header (checksum filled). The payload is the caller's; the buffer
    /// must be at least `header_len()` long, and the total length must fit 16 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) -> Result<()> {
        let total = u16::try_from(self.buffer_len()).map_err(|_| Error::Length {
            header: Header::Ipv4,
            field: Field::TotalLength,
            value: self.buffer_len(),
        })?;
        check_len(Header::Ipv4, packet.buffer.as_ref().len(), HEADER_LEN)?;
        packet.set_version_header_len(HEADER_LEN);
        packet.set_dscp_ecn(self.dscp_ecn);
        packet.set_total_len(total);
        packet.set_ident(self.ident);
        packet.set_frag(self.dont_frag, false, 0);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // A UDP datagram header, 0x73 bytes total, DF, TTL 64, 192.168.0.1 -> 192.168.0.199,
    // checksum 0xb861 (the worked example used across the literature).
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    fn packet() -> Vec<u8> {
        let mut v = HDR.to_vec();
        v.extend((0..0x73 - 20).map(|i| i as u8));
        v
    }

    #[test]
    fn decode_hand_checked_bytes() {
        let b = packet();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!((p.dscp(), p.ecn()), (0, 0));
        assert_eq!(p.total_len(), 0x73);
        assert_eq!(p.ident(), 0);
        assert!(p.dont_frag() && !p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), IpProtocol::UDP);
        assert_eq!(p.checksum(), 0xb861);
        assert_eq!(p.src_addr(), Ipv4Address::new(192, 168, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Address::new(192, 168, 0, 199));
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 0x73 - 20);
        assert!(p.options().is_empty());
    }

    #[test]
    fn emit_reproduces_bytes() {
        let b = packet();
        let repr = Ipv4Repr::parse(&Ipv4Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(repr.payload_len, 0x73 - 20);
        let mut out = b.clone();
        out[..20].fill(0);
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]))
            .unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn ethernet_padding_is_ignored() {
        // A 28-byte datagram in a minimum-size frame: 18 bytes of padding follow it.
        let mut b = HDR.to_vec();
        b[2..4].copy_from_slice(&28u16.to_be_bytes());
        b.extend_from_slice(&[0xaa; 8]);
        b.extend_from_slice(&[0; 18]);
        let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
        p.fill_checksum();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.payload(), &[0xaa; 8]);
        assert_eq!(Ipv4Repr::parse(&p).unwrap().payload_len, 8);
    }

    #[test]
    fn options_are_skipped() {
        // IHL 6: one 4-byte option (NOP NOP NOP EOL), total 24 + 4 payload bytes.
        let mut b = HDR.to_vec();
        b[0] = 0x46;
        b[2..4].copy_from_slice(&28u16.to_be_bytes());
        b.extend_from_slice(&[1, 1, 1, 0, 9, 8, 7, 6]);
        Ipv4Packet::new_unchecked(&mut b[..]).fill_checksum();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[9, 8, 7, 6]);
        assert!(p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p).unwrap().payload_len, 4);
    }

    #[test]
    fn inconsistent_input_is_rejected() {
        let b = packet();
        assert_eq!(
            Ipv4Packet::new_checked(&b[..19]).unwrap_err(),
            Error::Truncated {
                header: Header::Ipv4,
                need: 20,
                have: 19
            }
        );
        assert_eq!(
            Ipv4Packet::new_checked(&b[..0x72]).unwrap_err(),
            Error::Length {
                header: Header::Ipv4,
                field: Field::TotalLength,
                value: 0x73
            }
        );
        let mut x = b.clone();
        x[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&x[..]).unwrap_err(),
            Error::Field {
                header: Header::Ipv4,
                field: Field::Version,
                value: 6
            }
        );
        let mut x = b.clone();
        x[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&x[..]).unwrap_err(),
            Error::Field {
                header: Header::Ipv4,
                field: Field::Ihl,
                value: 4
            }
        );
        let mut x = b.clone();
        x[0] = 0x4f; // 60-byte header in a 0x73 total: fine; in a 40-byte total: not.
        assert!(Ipv4Packet::new_checked(&x[..]).is_ok());
        x[2..4].copy_from_slice(&40u16.to_be_bytes());
        assert_eq!(
            Ipv4Packet::new_checked(&x[..]).unwrap_err(),
            Error::Length {
                header: Header::Ipv4,
                field: Field::TotalLength,
                value: 40
            }
        );
        assert_eq!(
            Ipv4Packet::new_checked(&x[..50]).unwrap_err(),
            Error::Truncated {
                header: Header::Ipv4,
                need: 60,
                have: 50
            }
        );
        let mut x = b.clone();
        x[15] ^= 1;
        let p = Ipv4Packet::new_checked(&x[..]).unwrap();
        assert!(!p.verify_checksum());
        assert_eq!(
            Ipv4Repr::parse(&p),
            Err(Error::Checksum {
                header: Header::Ipv4
            })
        );
        let mut x = b.clone();
        Ipv4Packet::new_unchecked(&mut x[..]).set_frag(false, true, 0);
        Ipv4Packet::new_unchecked(&mut x[..]).fill_checksum();
        assert!(matches!(
            Ipv4Repr::parse(&Ipv4Packet::new_checked(&x[..]).unwrap()),
            Err(Error::Unsupported {
                header: Header::Ipv4,
                field: Field::Fragment,
                value: 0x2000
            })
        ));
    }

    #[test]
    fn emit_rejects_oversize_and_short_buffers() {
        let b = packet();
        let mut repr = Ipv4Repr::parse(&Ipv4Packet::new_checked(&b[..]).unwrap()).unwrap();
        let mut out = [0u8; 19];
        assert_eq!(
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..])),
            Err(Error::Truncated {
                header: Header::Ipv4,
                need: 20,
                have: 19
            })
        );
        repr.payload_len = 65516;
        let mut out = [0u8; 20];
        assert_eq!(
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..])),
            Err(Error::Length {
                header: Header::Ipv4,
                field: Field::TotalLength,
                value: 65536
            })
        );
    }

    #[test]
    fn decrement_ttl_equals_recompute_for_every_ttl() {
        for proto in [0u8, 1, 6, 17, 0xff] {
            for ttl in 0..=255u8 {
                let mut b = HDR;
                b[9] = proto;
                b[8] = ttl;
                Ipv4Packet::new_unchecked(&mut b[..]).fill_checksum();
                let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
                let r = p.decrement_ttl();
                assert_eq!(r, ttl.checked_sub(1));
                let inc = p.checksum();
                p.fill_checksum();
                assert_eq!(inc, p.checksum(), "ttl {ttl} proto {proto}");
                assert_eq!(p.ttl(), ttl.saturating_sub(1));
            }
        }
    }

    #[test]
    fn mark_ce_patches_checksum() {
        for ecn in 0..4u8 {
            let mut b = HDR;
            b[1] = 0xb8 | ecn;
            Ipv4Packet::new_unchecked(&mut b[..]).fill_checksum();
            let mut p = Ipv4Packet::new_unchecked(&mut b[..]);
            assert_eq!(p.mark_ce(), ecn != 0);
            assert_eq!(p.ecn(), if ecn == 0 { 0 } else { 3 });
            assert_eq!(p.dscp(), 0xb8 >> 2);
            assert!(p.verify_checksum());
        }
    }

    proptest! {
        #[test]
        fn decrement_ttl_equals_recompute_random_headers(mut h in any::<[u8; 20]>(), hops in 1u8..=255) {
            h[0] = 0x45;
            h[2..4].copy_from_slice(&20u16.to_be_bytes());
            Ipv4Packet::new_unchecked(&mut h[..]).fill_checksum();
            let mut p = Ipv4Packet::new_checked(&mut h[..]).unwrap();
            for _ in 0..hops {
                if p.decrement_ttl().is_none() { break; }
                prop_assert!(p.verify_checksum());
                let inc = p.checksum();
                p.fill_checksum();
                prop_assert_eq!(inc, p.checksum());
            }
        }

        #[test]
        fn round_trip(src in any::<[u8; 4]>(), dst in any::<[u8; 4]>(), proto in any::<u8>(),
                      ttl in any::<u8>(), dscp_ecn in any::<u8>(), ident in any::<u16>(),
                      dont_frag in any::<bool>(), payload in proptest::collection::vec(any::<u8>(), 0..64),
                      pad in 0usize..20) {
            let repr = Ipv4Repr {
                src_addr: src.into(), dst_addr: dst.into(), protocol: IpProtocol(proto),
                payload_len: payload.len(), ttl, dscp_ecn, ident, dont_frag,
            };
            let mut buf = vec![0u8; repr.buffer_len() + pad];
            let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
            repr.emit(&mut p).unwrap();
            p.payload_mut().copy_from_slice(&payload);
            let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(Ipv4Repr::parse(&p).unwrap(), repr);
            prop_assert_eq!(p.payload(), &payload[..]);
        }

        #[test]
        fn any_bytes_never_panic(mut b in proptest::collection::vec(any::<u8>(), 0..80)) {
            if let Some(x) = b.first_mut() { *x = 0x40 | (*x & 0x0f); }
            if let Ok(p) = Ipv4Packet::new_checked(&b[..]) {
                let _ = (p.options(), p.payload(), p.verify_checksum(), p.frag_offset());
                let _ = Ipv4Repr::parse(&p);
            }
        }
    }
}
