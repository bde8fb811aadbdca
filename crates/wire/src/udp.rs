//! UDP datagrams (RFC 768) and their checksum over the IPv4 and IPv6 pseudo-headers.
//!
//! ```text
//!  0          2          4        6          8
//!  src port | dst port | length | checksum | payload
//! ```

use crate::checksum;
use crate::ipv4::{IpProtocol, Ipv4Address};
use crate::ipv6::Ipv6Address;
use crate::{check_len, Error, Field, Header, Result};

mod field {
    use crate::Bytes as Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

#[inline]
fn be16(b: &[u8], f: crate::Bytes) -> u16 {
    let s = &b[f];
    u16::from_be_bytes([s[0], s[1]])
}

/// A zero-copy view of a UDP datagram.
#[derive(Debug, Clone, Copy)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wrap without checking; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> UdpPacket<T> {
        UdpPacket { buffer }
    }

    /// Wrap after [`UdpPacket::check_len`].
    pub fn new_checked(buffer: T) -> Result<UdpPacket<T>> {
        let p = UdpPacket::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Check `8 <= length field <= buffer length`; bytes past the length are ignored.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        check_len(Header::Udp, b.len(), HEADER_LEN)?;
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(Error::Length {
                header: Header::Udp,
                field: Field::Length,
                value: len,
            });
        }
        check_len(Header::Udp, b.len(), len)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }
    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }
    /// The length field: header plus payload.
    #[allow(clippy::len_without_is_empty)] // a datagram is never empty: length >= 8
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }
    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// The payload, to the length field.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }
    /// Header and payload, to the length field.
    fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..usize::from(self.len())]
    }

    /// True when the checksum verifies over the IPv4 pseudo-header, or is 0: in IPv4
    /// a zero checksum means the sender computed none (RFC 768).
    pub fn verify_checksum_v4(&self, src: Ipv4Address, dst: Ipv4Address) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let ph = checksum::pseudo_header_v4(src, dst, IpProtocol::UDP.0, self.len());
        checksum::combine(&[ph, checksum::data(self.datagram())]) == 0xffff
    }

    /// True when the checksum verifies over the IPv6 pseudo-header. A zero checksum
    /// is invalid in IPv6 (RFC 8200 §8.1).
    pub fn verify_checksum_v6(&self, src: Ipv6Address, dst: Ipv6Address) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::UDP.0, u32::from(self.len()));
        checksum::combine(&[ph, checksum::data(self.datagram())]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Set the source port.
    pub fn set_src_port(&mut self, v: u16) {
        self.buffer.as_mut()[field::SRC_PORT].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the destination port.
    pub fn set_dst_port(&mut self, v: u16) {
        self.buffer.as_mut()[field::DST_PORT].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the length field.
    pub fn set_len(&mut self, v: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }
    /// Set the checksum field.
    pub fn set_checksum(&mut self, v: u16) {
        self.buffer.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }
    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..l]
    }

    fn fill(&mut self, pseudo: u16) {
        self.set_checksum(0);
        let c = !checksum::combine(&[pseudo, checksum::data(self.datagram())]);
        // RFC 768: a computed 0 is sent as all ones, since 0 means "no checksum".
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }

    /// Compute and write the checksum over the IPv4 pseudo-header.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Address, dst: Ipv4Address) {
        let ph = checksum::pseudo_header_v4(src, dst, IpProtocol::UDP.0, self.len());
        self.fill(ph);
    }

    /// Compute and write the checksum over the IPv6 pseudo-header.
    pub fn fill_checksum_v6(&mut self, src: Ipv6Address, dst: Ipv6Address) {
        let ph = checksum::pseudo_header_v6(src, dst, IpProtocol::UDP.0, u32::from(self.len()));
        self.fill(ph);
    }
}

/// A UDP header as plain values. The checksum depends on the IP addresses, so it is
/// verified and filled through the view (`verify_checksum_v4`, `fill_checksum_v6`, …)
/// rather than here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes.
    pub payload_len: usize,
}

impl UdpRepr {
    /// Parse a checked view. Destination port 0 is reserved (RFC 768) and rejected.
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>) -> Result<UdpRepr> {
        packet.check_len()?;
        if packet.dst_port() == 0 {
            return Err(Error::Field {
                header: Header::Udp,
                field: Field::DstPort,
                value: 0,
            });
        }
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: packet.payload().len(),
        })
    }

    /// 8.
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Header plus payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Write the header with a zero checksum; write the payload, then call
    /// `fill_checksum_v4`/`_v6` on the view (IPv6 requires it).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut UdpPacket<T>) -> Result<()> {
        let len = u16::try_from(self.buffer_len()).map_err(|_| Error::Length {
            header: Header::Udp,
            field: Field::Length,
            value: self.buffer_len(),
        })?;
        check_len(Header::Udp, packet.buffer.as_ref().len(), HEADER_LEN)?;
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        packet.set_checksum(0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // 192.168.0.1:49152 -> 192.168.0.199:4791, payload "weft"; checksum computed by an
    // independent script over the RFC 768 pseudo-header: 0xcd2b (IPv4), and 0xf3cf
    // for the same datagram between 2001:db8::1 and 2001:db8::2.
    const V4: [u8; 12] = [
        0xc0, 0x00, 0x12, 0xb7, 0x00, 0x0c, 0xcd, 0x2b, b'w', b'e', b'f', b't',
    ];
    const S4: Ipv4Address = Ipv4Address::new(192, 168, 0, 1);
    const D4: Ipv4Address = Ipv4Address::new(192, 168, 0, 199);

    fn v6_addrs() -> (Ipv6Address, Ipv6Address) {
        (
            "2001:db8::1".parse().unwrap(),
            "2001:db8::2".parse().unwrap(),
        )
    }

    #[test]
    fn decode_hand_checked_bytes() {
        let p = UdpPacket::new_checked(&V4[..]).unwrap();
        assert_eq!(p.src_port(), 49152);
        assert_eq!(p.dst_port(), 4791);
        assert_eq!(p.len(), 12);
        assert_eq!(p.checksum(), 0xcd2b);
        assert_eq!(p.payload(), b"weft");
        assert!(p.verify_checksum_v4(S4, D4));
        assert!(!p.verify_checksum_v4(S4, Ipv4Address::new(192, 168, 0, 198)));
    }

    #[test]
    fn emit_and_fill_reproduce_bytes() {
        let repr = UdpRepr::parse(&UdpPacket::new_checked(&V4[..]).unwrap()).unwrap();
        assert_eq!(
            repr,
            UdpRepr {
                src_port: 49152,
                dst_port: 4791,
                payload_len: 4
            }
        );
        let mut out = [0u8; 12];
        let mut p = UdpPacket::new_unchecked(&mut out[..]);
        repr.emit(&mut p).unwrap();
        p.payload_mut().copy_from_slice(b"weft");
        p.fill_checksum_v4(S4, D4);
        assert_eq!(out, V4);

        let (s6, d6) = v6_addrs();
        let mut p = UdpPacket::new_unchecked(&mut out[..]);
        p.fill_checksum_v6(s6, d6);
        assert_eq!(p.checksum(), 0xf3cf);
        assert!(p.verify_checksum_v6(s6, d6));
        assert!(!p.verify_checksum_v6(d6, d6));
    }

    #[test]
    fn zero_checksum_rules() {
        let mut b = V4;
        b[6] = 0;
        b[7] = 0;
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum_v4(S4, D4), "0 means none in IPv4");
        let (s6, d6) = v6_addrs();
        assert!(!p.verify_checksum_v6(s6, d6), "0 is invalid in IPv6");
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Choose the source port so the sum over everything else is 0xffff: then the
        // computed checksum is 0 and must go out as 0xffff, which still verifies.
        let mut b = [0u8; 8];
        let mut p = UdpPacket::new_unchecked(&mut b[..]);
        p.set_dst_port(4791);
        p.set_len(8);
        let ph = checksum::pseudo_header_v4(S4, D4, 17, 8);
        let rest = checksum::combine(&[ph, checksum::data(&p.buffer[..])]);
        p.set_src_port(!rest);
        p.fill_checksum_v4(S4, D4);
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum_v4(S4, D4));
    }

    #[test]
    fn bad_lengths() {
        assert_eq!(
            UdpPacket::new_checked(&V4[..7]).unwrap_err(),
            Error::Truncated {
                header: Header::Udp,
                need: 8,
                have: 7
            }
        );
        assert_eq!(
            UdpPacket::new_checked(&V4[..11]).unwrap_err(),
            Error::Truncated {
                header: Header::Udp,
                need: 12,
                have: 11
            }
        );
        let mut b = V4;
        b[5] = 7;
        assert_eq!(
            UdpPacket::new_checked(&b[..]).unwrap_err(),
            Error::Length {
                header: Header::Udp,
                field: Field::Length,
                value: 7
            }
        );
        b[5] = 8; // shorter than the buffer: the rest is padding
        assert_eq!(UdpPacket::new_checked(&b[..]).unwrap().payload(), b"");
        let mut b = V4;
        b[2] = 0;
        b[3] = 0;
        assert_eq!(
            UdpRepr::parse(&UdpPacket::new_checked(&b[..]).unwrap()),
            Err(Error::Field {
                header: Header::Udp,
                field: Field::DstPort,
                value: 0
            })
        );
        let repr = UdpRepr {
            src_port: 1,
            dst_port: 2,
            payload_len: 65528,
        };
        let mut out = [0u8; 8];
        assert_eq!(
            repr.emit(&mut UdpPacket::new_unchecked(&mut out[..])),
            Err(Error::Length {
                header: Header::Udp,
                field: Field::Length,
                value: 65536
            })
        );
    }

    proptest! {
        #[test]
        fn round_trip_and_checksums(src_port in any::<u16>(), dst_port in 1u16.., pad in 0usize..8,
                                    payload in proptest::collection::vec(any::<u8>(), 0..64),
                                    a in any::<[u8; 4]>(), b in any::<[u8; 4]>(),
                                    a6 in any::<[u8; 16]>(), b6 in any::<[u8; 16]>()) {
            let repr = UdpRepr { src_port, dst_port, payload_len: payload.len() };
            let mut buf = vec![0u8; repr.buffer_len() + pad];
            let mut p = UdpPacket::new_unchecked(&mut buf[..]);
            repr.emit(&mut p).unwrap();
            p.payload_mut().copy_from_slice(&payload);
            p.fill_checksum_v4(a.into(), b.into());
            prop_assert!(p.verify_checksum_v4(a.into(), b.into()));
            prop_assert_ne!(p.checksum(), 0);
            p.fill_checksum_v6(a6.into(), b6.into());
            prop_assert!(p.verify_checksum_v6(a6.into(), b6.into()));
            let p = UdpPacket::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(UdpRepr::parse(&p).unwrap(), repr);
            prop_assert_eq!(p.payload(), &payload[..]);
        }

        #[test]
        fn any_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(p) = UdpPacket::new_checked(&b[..]) {
                let _ = (p.payload(), p.verify_checksum_v4(S4, D4));
                let _ = UdpRepr::parse(&p);
            }
        }
    }
}
