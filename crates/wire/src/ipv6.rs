//! IPv6 headers (RFC 8200) and the walk over extension headers a router needs to find
//! the upper-layer protocol.
//!
//! ```text
//!  0                         4             6        7           8     24    40
//!  ver|traffic class|flow  | payload len | next hdr | hop limit | src | dst | ext headers / payload
//! ```

use crate::ipv4::IpProtocol;
use crate::{check_len, Error, Field, Header, Result};

/// IPv6 addresses are the standard library's.
pub use std::net::Ipv6Addr as Ipv6Address;

mod field {
    use crate::Bytes as Field;
    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: Field = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Field = 8..24;
    pub const DST: Field = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

/// The most extension headers [`Ipv6Packet::upper_layer`] walks before it calls the
/// chain malformed. RFC 8200 §4.1 orders at most seven distinct kinds (one
/// Destination Options may appear twice); eight leaves room for that and bounds the
/// work a hostile packet can cause.
pub const MAX_EXT_HEADERS: usize = 8;

/// A zero-copy view of an IPv6 packet.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wrap without checking; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> Ipv6Packet<T> {
        Ipv6Packet { buffer }
    }

    /// Wrap after [`Ipv6Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Ipv6Packet<T>> {
        let p = Ipv6Packet::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Check version 6 and `40 + payload length <= buffer length`; trailing bytes
    /// (Ethernet padding) are ignored. Jumbograms (RFC 2675) are not supported: a
    /// payload length of 0 means an empty payload. A buffer shorter than the fixed
    /// header is `Truncated`; a payload length past the buffer is a `Length` error.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        check_len(Header::Ipv6, b.len(), HEADER_LEN)?;
        if self.version() != 6 {
            return Err(Error::Field {
                header: Header::Ipv6,
                field: Field::Version,
                value: u32::from(self.version()),
            });
        }
        if self.total_len() > b.len() {
            return Err(Error::Length {
                header: Header::Ipv6,
                field: Field::PayloadLength,
                value: usize::from(self.payload_len()),
            });
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn word0(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    /// Version (6 once checked).
    pub fn version(&self) -> u8 {
        (self.word0() >> 28) as u8
    }
    /// Traffic class (DSCP in the upper 6 bits, ECN in the lower 2).
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }
    /// ECN bits of the traffic class.
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x3
    }
    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000f_ffff
    }
    /// Payload length (extension headers included).
    pub fn payload_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }
    /// 40 + payload length.
    pub fn total_len(&self) -> usize {
        HEADER_LEN + usize::from(self.payload_len())
    }
    /// Next header: the first extension header or the upper-layer protocol.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NXT_HDR])
    }
    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    /// Source address.
    pub fn src_addr(&self) -> Ipv6Address {
        addr(&self.buffer.as_ref()[field::SRC])
    }
    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Address {
        addr(&self.buffer.as_ref()[field::DST])
    }
    /// The payload (extension headers included), to the payload length.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.total_len()]
    }

    /// Walk the extension headers (RFC 8200 §4) to the upper-layer protocol. Returns
    /// it and its offset from the start of the IPv6 header. Hop-by-Hop, Routing,
    /// Destination Options, Fragment (8 bytes) and AH (RFC 4302 §2.2: (len + 2) × 4
    /// bytes) are skipped; anything else, ESP and No Next Header included, ends the
    /// walk. Errors: a header whose length byte lies past the payload length
    /// (`Truncated`) or whose length runs past it (`Length` on its `ExtLength`), both
    /// naming the header as [`Header::Ipv6Ext`]; Hop-by-Hop anywhere but first (a
    /// `Field` error on the `NextHeader` that names it, RFC 8200 §4.1); more than
    /// [`MAX_EXT_HEADERS`] headers (a `Field` error on the `ExtCount`).
    ///
    /// Behind a Fragment header with a nonzero offset the bytes at the returned offset
    /// are a continuation, not an upper-layer header; see [`Ipv6Packet::fragment`].
    pub fn upper_layer(&self) -> Result<(IpProtocol, usize)> {
        self.upper_layer_at().map(|(nh, off, _)| (nh, off))
    }

    /// [`Ipv6Packet::upper_layer`], plus the offset of the Next Header field that
    /// names the upper layer: 6 in the fixed header, or the first byte of the last
    /// extension header. RFC 8200 §4: a Parameter Problem about an unrecognized next
    /// header points there.
    pub fn upper_layer_at(&self) -> Result<(IpProtocol, usize, usize)> {
        let b = self.buffer.as_ref();
        let end = self.total_len();
        let mut nh = self.next_header();
        let mut off = HEADER_LEN;
        let mut pointer = field::NXT_HDR;
        let mut count = 0;
        loop {
            let len = match nh {
                IpProtocol::HOP_BY_HOP | IpProtocol::ROUTING | IpProtocol::DEST_OPTS => {
                    if nh == IpProtocol::HOP_BY_HOP && count != 0 {
                        return Err(Error::Field {
                            header: Header::Ipv6Ext(IpProtocol::HOP_BY_HOP),
                            field: Field::NextHeader,
                            value: u32::from(nh.0),
                        });
                    }
                    (usize::from(ext_len_byte(b, nh, off, end)?) + 1) * 8
                }
                IpProtocol::FRAGMENT => 8,
                IpProtocol::AH => (usize::from(ext_len_byte(b, nh, off, end)?) + 2) * 4,
                _ => return Ok((nh, off, pointer)),
            };
            count += 1;
            if count > MAX_EXT_HEADERS {
                return Err(Error::Field {
                    header: Header::Ipv6,
                    field: Field::ExtCount,
                    value: count as u32,
                });
            }
            check_ext_fits(nh, off, len, end)?;
            nh = IpProtocol(b[off]);
            pointer = off;
            off += len;
        }
    }

    /// If the chain holds a Fragment header: (offset in bytes, more fragments,
    /// identification). Errors as [`Ipv6Packet::upper_layer`].
    pub fn fragment(&self) -> Result<Option<(u16, bool, u32)>> {
        let b = self.buffer.as_ref();
        let end = self.total_len();
        let mut nh = self.next_header();
        let mut off = HEADER_LEN;
        for _ in 0..MAX_EXT_HEADERS {
            let len = match nh {
                IpProtocol::HOP_BY_HOP | IpProtocol::ROUTING | IpProtocol::DEST_OPTS => {
                    (usize::from(ext_len_byte(b, nh, off, end)?) + 1) * 8
                }
                IpProtocol::FRAGMENT => {
                    check_ext_fits(nh, off, 8, end)?;
                    let f = &b[off..off + 8];
                    let w = u16::from_be_bytes([f[2], f[3]]);
                    let id = u32::from_be_bytes([f[4], f[5], f[6], f[7]]);
                    return Ok(Some((w & 0xfff8, w & 1 != 0, id)));
                }
                IpProtocol::AH => (usize::from(ext_len_byte(b, nh, off, end)?) + 2) * 4,
                _ => return Ok(None),
            };
            check_ext_fits(nh, off, len, end)?;
            nh = IpProtocol(b[off]);
            off += len;
        }
        Ok(None)
    }
}

/// The length byte of extension header `nh` at `off`, which must lie before `end`
/// (the payload length's end), or the `Truncated` error that names the header.
fn ext_len_byte(b: &[u8], nh: IpProtocol, off: usize, end: usize) -> Result<u8> {
    b.get(off + 1)
        .copied()
        .filter(|_| off + 2 <= end)
        .ok_or(Error::Truncated {
            header: Header::Ipv6Ext(nh),
            need: off + 2,
            have: end,
        })
}

/// Extension header `nh` at `off`, `len` bytes long, must end by `end`.
fn check_ext_fits(nh: IpProtocol, off: usize, len: usize, end: usize) -> Result<()> {
    if off + len > end {
        return Err(Error::Length {
            header: Header::Ipv6Ext(nh),
            field: Field::ExtLength,
            value: len,
        });
    }
    Ok(())
}

fn addr(b: &[u8]) -> Ipv6Address {
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    Ipv6Address::from(a)
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Set version 6, traffic class and flow label (20 bits; higher bits dropped).
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let w = (6u32 << 28) | (u32::from(traffic_class) << 20) | (flow_label & 0x000f_ffff);
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&w.to_be_bytes());
    }
    /// Set the payload length.
    pub fn set_payload_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the next header.
    pub fn set_next_header(&mut self, p: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = p.0;
    }
    /// Set the hop limit.
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }
    /// Set the source address.
    pub fn set_src_addr(&mut self, a: Ipv6Address) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }
    /// Set the destination address.
    pub fn set_dst_addr(&mut self, a: Ipv6Address) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }
    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let t = self.total_len();
        &mut self.buffer.as_mut()[HEADER_LEN..t]
    }
    /// A congested router's mark (RFC 3168 §5): set ECN to CE on an ECN-capable
    /// packet; Not-ECT is left alone. Returns true when the packet now carries CE.
    pub fn mark_ce(&mut self) -> bool {
        match self.ecn() {
            0b00 => false,
            0b11 => true,
            _ => {
                // ECN is the low two bits of the traffic class: bits 21:20 of word 0,
                // i.e. bits 5:4 of byte 1.
                self.buffer.as_mut()[1] |= 0b0011_0000;
                true
            }
        }
    }

    /// A router's forwarding step (RFC 8200 §3): hop limit − 1. Returns the new hop
    /// limit, or `None` (nothing changed) when it is already 0. IPv6 has no header
    /// checksum to patch.
    pub fn decrement_hop_limit(&mut self) -> Option<u8> {
        let h = self.hop_limit().checked_sub(1)?;
        self.set_hop_limit(h);
        Some(h)
    }
}

/// The fixed IPv6 header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Address,
    /// Destination address.
    pub dst_addr: Ipv6Address,
    /// Next header.
    pub next_header: IpProtocol,
    /// Payload length (extension headers included).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Parse a checked view.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Ipv6Repr> {
        packet.check_len()?;
        Ok(Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            traffic_class: packet.traffic_class(),
            flow_label: packet.flow_label(),
        })
    }

    /// 40.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Write the fixed header; the payload is the caller's. The payload length must
    /// fit 16 bits and the flow label 20.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) -> Result<()> {
        let len = u16::try_from(self.payload_len).map_err(|_| Error::Length {
            header: Header::Ipv6,
            field: Field::PayloadLength,
            value: self.payload_len,
        })?;
        if self.flow_label > 0x000f_ffff {
            return Err(Error::Field {
                header: Header::Ipv6,
                field: Field::FlowLabel,
                value: self.flow_label,
            });
        }
        check_len(Header::Ipv6, packet.buffer.as_ref().len(), HEADER_LEN)?;
        packet.set_version_tc_flow(self.traffic_class, self.flow_label);
        packet.set_payload_len(len);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // From a capture: an ICMPv6 echo request fe80::1 -> ff02::1, traffic class 0xb8,
    // flow label 0x12345, hop limit 64, 8-byte payload.
    const HDR: [u8; 40] = [
        0x6b, 0x81, 0x23, 0x45, 0x00, 0x08, 0x3a, 0x40, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0x01, 0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
    ];

    fn packet(payload: &[u8], nh: u8) -> Vec<u8> {
        let mut v = HDR.to_vec();
        v[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
        v[6] = nh;
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn decode_hand_checked_bytes() {
        let b = packet(&[0x80, 0, 0, 0, 0, 1, 0, 1], 58);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 8);
        assert_eq!(p.next_header(), IpProtocol::IPV6_ICMP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), "fe80::1".parse::<Ipv6Address>().unwrap());
        assert_eq!(p.dst_addr(), "ff02::1".parse::<Ipv6Address>().unwrap());
        assert_eq!(p.upper_layer(), Ok((IpProtocol::IPV6_ICMP, 40)));
        assert_eq!(p.fragment(), Ok(None));
    }

    #[test]
    fn emit_reproduces_bytes() {
        let b = packet(&[1, 2, 3, 4, 5, 6, 7, 8], 58);
        let repr = Ipv6Repr::parse(&Ipv6Packet::new_checked(&b[..]).unwrap()).unwrap();
        let mut out = b.clone();
        out[..40].fill(0);
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]))
            .unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn bad_version_and_lengths() {
        let b = packet(&[0; 8], 17);
        assert_eq!(
            Ipv6Packet::new_checked(&b[..39]).unwrap_err(),
            Error::Truncated {
                header: Header::Ipv6,
                need: 40,
                have: 39
            }
        );
        assert_eq!(
            Ipv6Packet::new_checked(&b[..47]).unwrap_err(),
            Error::Length {
                header: Header::Ipv6,
                field: Field::PayloadLength,
                value: 8
            }
        );
        let mut x = b.clone();
        x[0] = 0x4b;
        assert_eq!(
            Ipv6Packet::new_checked(&x[..]).unwrap_err(),
            Error::Field {
                header: Header::Ipv6,
                field: Field::Version,
                value: 4
            }
        );
        let mut padded = b.clone();
        padded.extend_from_slice(&[0xee; 10]);
        assert_eq!(
            Ipv6Packet::new_checked(&padded[..])
                .unwrap()
                .payload()
                .len(),
            8
        );
        let repr = Ipv6Repr {
            payload_len: 70000,
            ..Ipv6Repr::parse(&Ipv6Packet::new_checked(&b[..]).unwrap()).unwrap()
        };
        let mut out = [0u8; 40];
        assert_eq!(
            repr.emit(&mut Ipv6Packet::new_unchecked(&mut out[..])),
            Err(Error::Length {
                header: Header::Ipv6,
                field: Field::PayloadLength,
                value: 70000
            })
        );
    }

    #[test]
    fn walk_extension_headers() {
        // Hop-by-Hop (8: PadN), Destination Options (16), Routing (8), Fragment (offset
        // 0, M, id 0xdeadbeef), AH (len 4 -> 24 bytes), then UDP (8 bytes).
        let mut pl = vec![60, 0, 1, 4, 0, 0, 0, 0];
        pl.extend_from_slice(&[43, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        pl.extend_from_slice(&[44, 0, 0, 0, 0, 0, 0, 0]);
        pl.extend_from_slice(&[51, 0, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef]);
        let mut ah = vec![17, 4, 0, 0];
        ah.extend_from_slice(&[0; 20]);
        pl.extend_from_slice(&ah);
        pl.extend_from_slice(&[0x12, 0xb7, 0x12, 0xb7, 0, 8, 0, 0]);
        let b = packet(&pl, 0);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(
            p.upper_layer(),
            Ok((IpProtocol::UDP, 40 + 8 + 16 + 8 + 8 + 24))
        );
        assert_eq!(p.fragment(), Ok(Some((0, true, 0xdeadbeef))));
        // UDP is named by the AH, the last extension header, at 40 + 8 + 16 + 8 + 8.
        assert_eq!(
            p.upper_layer_at(),
            Ok((
                IpProtocol::UDP,
                40 + 8 + 16 + 8 + 8 + 24,
                40 + 8 + 16 + 8 + 8
            ))
        );
        let b = packet(&[0; 8], 17);
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap().upper_layer_at(),
            Ok((IpProtocol::UDP, 40, 6))
        );

        // Without the UDP header the chain is still whole; one byte less and the AH
        // runs past the payload length.
        let b = packet(&pl[..pl.len() - 8], 0);
        assert!(Ipv6Packet::new_checked(&b[..])
            .unwrap()
            .upper_layer()
            .is_ok());
        let b = packet(&pl[..pl.len() - 9], 0);
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap().upper_layer(),
            Err(Error::Length {
                header: Header::Ipv6Ext(IpProtocol::AH),
                field: Field::ExtLength,
                value: 24
            })
        );
        // An extension header's length byte beyond the payload.
        let b = packet(&[], 43);
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap().upper_layer(),
            Err(Error::Truncated {
                header: Header::Ipv6Ext(IpProtocol::ROUTING),
                need: 42,
                have: 40
            })
        );
    }

    #[test]
    fn hop_by_hop_must_be_first() {
        let b = packet(&[0, 0, 0, 0, 0, 0, 0, 0, 59, 0, 0, 0, 0, 0, 0, 0], 60);
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap().upper_layer(),
            Err(Error::Field {
                header: Header::Ipv6Ext(IpProtocol::HOP_BY_HOP),
                field: Field::NextHeader,
                value: 0
            })
        );
    }

    #[test]
    fn chain_is_capped() {
        // Eight Destination Options headers then No Next Header: accepted.
        let mut pl = Vec::new();
        for i in 0..8 {
            pl.extend_from_slice(&[if i == 7 { 59 } else { 60 }, 0, 1, 4, 0, 0, 0, 0]);
        }
        let b = packet(&pl, 60);
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap().upper_layer(),
            Ok((IpProtocol::NO_NEXT, 40 + 64))
        );
        // Nine: malformed.
        let mut pl = Vec::new();
        for i in 0..9 {
            pl.extend_from_slice(&[if i == 8 { 59 } else { 60 }, 0, 1, 4, 0, 0, 0, 0]);
        }
        let b = packet(&pl, 60);
        assert_eq!(
            Ipv6Packet::new_checked(&b[..]).unwrap().upper_layer(),
            Err(Error::Field {
                header: Header::Ipv6,
                field: Field::ExtCount,
                value: 9
            })
        );
    }

    #[test]
    fn hop_limit() {
        let mut b = packet(&[], 59);
        b[7] = 1;
        let mut p = Ipv6Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(p.decrement_hop_limit(), Some(0));
        assert_eq!(p.decrement_hop_limit(), None);
    }

    #[test]
    fn mark_ce_sets_only_ecn() {
        for ecn in 0..4u8 {
            let mut b = packet(&[], 59);
            let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
            p.set_version_tc_flow(0xb8 | ecn, 0x12345);
            assert_eq!(p.mark_ce(), ecn != 0);
            assert_eq!(p.traffic_class(), 0xb8 | if ecn == 0 { 0 } else { 3 });
            assert_eq!((p.version(), p.flow_label()), (6, 0x12345));
        }
    }

    proptest! {
        #[test]
        fn round_trip(src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(), nh in any::<u8>(),
                      hop_limit in any::<u8>(), traffic_class in any::<u8>(), flow_label in 0u32..1 << 20,
                      payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let repr = Ipv6Repr {
                src_addr: src.into(), dst_addr: dst.into(), next_header: IpProtocol(nh),
                payload_len: payload.len(), hop_limit, traffic_class, flow_label,
            };
            let mut buf = vec![0u8; repr.buffer_len()];
            let mut p = Ipv6Packet::new_unchecked(&mut buf[..]);
            repr.emit(&mut p).unwrap();
            p.payload_mut().copy_from_slice(&payload);
            let p = Ipv6Packet::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(Ipv6Repr::parse(&p).unwrap(), repr);
            prop_assert_eq!(p.payload(), &payload[..]);
        }

        #[test]
        fn any_chain_never_panics(nh in any::<u8>(), payload in proptest::collection::vec(
            prop_oneof![Just(0u8), Just(43), Just(44), Just(51), Just(60), any::<u8>()], 0..120)) {
            let b = packet(&payload, nh);
            let p = Ipv6Packet::new_checked(&b[..]).unwrap();
            if let Ok((_, off)) = p.upper_layer() {
                prop_assert!(off <= p.total_len());
            }
            let _ = p.fragment();
        }
    }
}
