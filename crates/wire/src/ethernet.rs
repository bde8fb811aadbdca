//! Ethernet II frames (IEEE 802.3 §3.2.6 type interpretation) with at most one
//! IEEE 802.1Q VLAN tag.
//!
//! ```text
//!  0       6       12              14         16 (or 18 when tagged)
//!  dst    | src   | TPID 0x8100   | TCI      | ethertype | payload
//!                 | ethertype     | payload ...
//! ```
//! The frame check sequence is not part of the buffer: the NIC strips it.

use crate::{check_len, Error, Field, Header, Result};
use core::fmt;

mod field {
    use crate::Bytes as Field;
    pub const DST: Field = 0..6;
    pub const SRC: Field = 6..12;
    /// The ethertype of an untagged frame, or the TPID of a tagged one.
    pub const TYPE_OR_TPID: Field = 12..14;
    pub const TCI: Field = 14..16;
    pub const INNER_TYPE: Field = 16..18;
}

/// Length of an untagged Ethernet II header.
pub const HEADER_LEN: usize = 14;
/// Length of a header carrying one 802.1Q tag.
pub const VLAN_HEADER_LEN: usize = 18;

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// The address in the first six bytes of `bytes`, or `None` if there are fewer.
    pub fn from_bytes(bytes: &[u8]) -> Option<EthernetAddress> {
        let b: [u8; 6] = bytes.get(..6)?.try_into().ok()?;
        Some(EthernetAddress(b))
    }
    /// The six bytes.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }
    /// All ones.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }
    /// The I/G bit is set (broadcast is a multicast address too).
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }
    /// The I/G bit is clear.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }
    /// The U/L bit is set: a locally administered address.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
    /// The IPv6 multicast MAC 33:33:xx:xx:xx:xx for a group (RFC 2464 §7).
    pub fn ipv6_multicast(group: std::net::Ipv6Addr) -> EthernetAddress {
        let o = group.octets();
        EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl From<[u8; 6]> for EthernetAddress {
    fn from(b: [u8; 6]) -> Self {
        EthernetAddress(b)
    }
}

/// An EtherType: open, so unknown values survive a parse and print in hex.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4.
    pub const IPV4: EtherType = EtherType(0x0800);
    /// ARP.
    pub const ARP: EtherType = EtherType(0x0806);
    /// An IEEE 802.1Q tag follows (the TPID).
    pub const VLAN: EtherType = EtherType(0x8100);
    /// IPv6.
    pub const IPV6: EtherType = EtherType(0x86DD);

    /// Values below 0x0600 are an IEEE 802.3 length, not a type (802.3 §3.2.6).
    pub const fn is_length(&self) -> bool {
        self.0 < 0x0600
    }
}

impl fmt::Debug for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EtherType::IPV4 => f.write_str("IPv4"),
            EtherType::ARP => f.write_str("ARP"),
            EtherType::VLAN => f.write_str("VLAN"),
            EtherType::IPV6 => f.write_str("IPv6"),
            EtherType(v) => write!(f, "0x{v:04x}"),
        }
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The tag control information of an 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (12 bits).
    pub vid: u16,
}

impl VlanTag {
    /// Split a TCI word.
    pub const fn from_tci(tci: u16) -> VlanTag {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }
    /// Join into a TCI word; bits beyond each field's width are dropped.
    pub const fn tci(&self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }
}

/// A zero-copy view of an Ethernet frame.
#[derive(Debug, Clone, Copy)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

#[inline]
fn be16(b: &[u8], f: crate::Bytes) -> u16 {
    let s = &b[f];
    u16::from_be_bytes([s[0], s[1]])
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wrap without checking; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }

    /// Wrap after checking that the whole header (tag included, if any) fits.
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>> {
        let f = EthernetFrame::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Check that the buffer holds the header, including the tag when the TPID says so.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        check_len(Header::Ethernet, b.len(), HEADER_LEN)?;
        check_len(Header::Ethernet, b.len(), self.header_len())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination address.
    pub fn dst_addr(&self) -> EthernetAddress {
        let b = &self.buffer.as_ref()[field::DST];
        EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]])
    }
    /// Source address.
    pub fn src_addr(&self) -> EthernetAddress {
        let b = &self.buffer.as_ref()[field::SRC];
        EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]])
    }
    /// True when bytes 12..14 hold the 802.1Q TPID.
    pub fn is_tagged(&self) -> bool {
        EtherType(be16(self.buffer.as_ref(), field::TYPE_OR_TPID)) == EtherType::VLAN
    }
    /// The 802.1Q tag, if there is one.
    pub fn vlan(&self) -> Option<VlanTag> {
        if self.is_tagged() {
            Some(VlanTag::from_tci(be16(self.buffer.as_ref(), field::TCI)))
        } else {
            None
        }
    }
    /// The type of the payload (the inner one when tagged).
    pub fn ethertype(&self) -> EtherType {
        let f = if self.is_tagged() {
            field::INNER_TYPE
        } else {
            field::TYPE_OR_TPID
        };
        EtherType(be16(self.buffer.as_ref(), f))
    }
    /// 14, or 18 when tagged.
    pub fn header_len(&self) -> usize {
        if self.is_tagged() {
            VLAN_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }
    /// Everything after the header (may include Ethernet padding).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Set the destination address.
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }
    /// Set the source address.
    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }
    /// Write the tag (if any) and the ethertype; this decides the header length, so
    /// the buffer must hold 14 bytes untagged and 18 tagged.
    pub fn set_tag_and_ethertype(&mut self, vlan: Option<VlanTag>, ethertype: EtherType) {
        let b = self.buffer.as_mut();
        match vlan {
            Some(tag) => {
                b[field::TYPE_OR_TPID].copy_from_slice(&EtherType::VLAN.0.to_be_bytes());
                b[field::TCI].copy_from_slice(&tag.tci().to_be_bytes());
                b[field::INNER_TYPE].copy_from_slice(&ethertype.0.to_be_bytes());
            }
            None => b[field::TYPE_OR_TPID].copy_from_slice(&ethertype.0.to_be_bytes()),
        }
    }
    /// The payload, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let h = self.header_len();
        &mut self.buffer.as_mut()[h..]
    }
}

/// An Ethernet header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source address.
    pub src_addr: EthernetAddress,
    /// Destination address.
    pub dst_addr: EthernetAddress,
    /// The 802.1Q tag, if any.
    pub vlan: Option<VlanTag>,
    /// Type of the payload.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Parse a view. Stacked tags (an inner type of 0x8100) and IEEE 802.3 length
    /// fields in place of a type are not something weft handles.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr> {
        frame.check_len()?;
        let ethertype = frame.ethertype();
        if ethertype == EtherType::VLAN {
            return Err(Error::Unsupported {
                header: Header::Ethernet,
                field: Field::EtherType,
                value: u32::from(ethertype.0),
            });
        }
        if ethertype.is_length() {
            return Err(Error::Unsupported {
                header: Header::Ethernet,
                field: Field::EtherType,
                value: u32::from(ethertype.0),
            });
        }
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            vlan: frame.vlan(),
            ethertype,
        })
    }

    /// Bytes of header [`EthernetRepr::emit`] writes.
    pub const fn header_len(&self) -> usize {
        if self.vlan.is_some() {
            VLAN_HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Same as [`EthernetRepr::header_len`]: the payload is the caller's.
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Write the header; a buffer too short for it is an error, not a panic.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) -> Result<()> {
        check_len(
            Header::Ethernet,
            frame.buffer.as_ref().len(),
            self.header_len(),
        )?;
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_tag_and_ethertype(self.vlan, self.ethertype);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // From a capture: an untagged IPv4 frame, dst 52:54:00:12:34:56, src
    // 02:00:00:00:00:01, first payload byte 0x45.
    const UNTAGGED: [u8; 15] = [
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45,
    ];
    // The same frame tagged with PCP 5, DEI 0, VID 100 (TCI 0xa064), carrying IPv6.
    const TAGGED: [u8; 19] = [
        0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x81, 0x00, 0xa0,
        0x64, 0x86, 0xdd, 0x60,
    ];

    #[test]
    fn decode_untagged() {
        let f = EthernetFrame::new_checked(&UNTAGGED[..]).unwrap();
        assert_eq!(f.dst_addr().to_string(), "52:54:00:12:34:56");
        assert_eq!(f.src_addr(), EthernetAddress([2, 0, 0, 0, 0, 1]));
        assert_eq!(f.vlan(), None);
        assert_eq!(f.ethertype(), EtherType::IPV4);
        assert_eq!(f.header_len(), 14);
        assert_eq!(f.payload(), &[0x45]);
    }

    #[test]
    fn decode_tagged() {
        let f = EthernetFrame::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(
            f.vlan(),
            Some(VlanTag {
                pcp: 5,
                dei: false,
                vid: 100
            })
        );
        assert_eq!(f.ethertype(), EtherType::IPV6);
        assert_eq!(f.header_len(), 18);
        assert_eq!(f.payload(), &[0x60]);
    }

    #[test]
    fn emit_reproduces_bytes() {
        for bytes in [&UNTAGGED[..], &TAGGED[..]] {
            let repr = EthernetRepr::parse(&EthernetFrame::new_checked(bytes).unwrap()).unwrap();
            let mut out = bytes.to_vec();
            out[..repr.header_len()].fill(0);
            repr.emit(&mut EthernetFrame::new_unchecked(&mut out[..]))
                .unwrap();
            assert_eq!(out, bytes);
        }
    }

    #[test]
    fn truncated_headers() {
        assert_eq!(
            EthernetFrame::new_checked(&UNTAGGED[..13]).unwrap_err(),
            Error::Truncated {
                header: Header::Ethernet,
                need: 14,
                have: 13
            }
        );
        assert_eq!(
            EthernetFrame::new_checked(&TAGGED[..17]).unwrap_err(),
            Error::Truncated {
                header: Header::Ethernet,
                need: 18,
                have: 17
            }
        );
        assert!(EthernetFrame::new_checked(&TAGGED[..18]).is_ok());
        let repr = EthernetRepr::parse(&EthernetFrame::new_checked(&TAGGED[..]).unwrap()).unwrap();
        let mut short = [0u8; 17];
        assert_eq!(
            repr.emit(&mut EthernetFrame::new_unchecked(&mut short[..])),
            Err(Error::Truncated {
                header: Header::Ethernet,
                need: 18,
                have: 17
            })
        );
    }

    #[test]
    fn stacked_tags_and_length_fields_are_unsupported() {
        let mut b = TAGGED;
        b[16] = 0x81;
        b[17] = 0x00;
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert!(matches!(
            EthernetRepr::parse(&f),
            Err(Error::Unsupported {
                header: Header::Ethernet,
                field: Field::EtherType,
                value: 0x8100
            })
        ));
        let mut b = UNTAGGED;
        b[12] = 0x00;
        b[13] = 0x2e;
        let f = EthernetFrame::new_checked(&b[..]).unwrap();
        assert!(matches!(
            EthernetRepr::parse(&f),
            Err(Error::Unsupported {
                header: Header::Ethernet,
                field: Field::EtherType,
                value: 0x2e
            })
        ));
    }

    #[test]
    fn address_predicates() {
        assert!(EthernetAddress::BROADCAST.is_broadcast());
        assert!(EthernetAddress::BROADCAST.is_multicast());
        let m = EthernetAddress::ipv6_multicast("ff02::1:ff00:2".parse().unwrap());
        assert_eq!(m, EthernetAddress([0x33, 0x33, 0xff, 0x00, 0x00, 0x02]));
        assert!(m.is_multicast() && !m.is_broadcast() && !m.is_unicast());
        let u = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
        assert!(u.is_unicast() && u.is_local());
        assert_eq!(EthernetAddress::from_bytes(&[1, 2, 3, 4, 5]), None);
        assert_eq!(format!("{:?}", EtherType(0x88cc)), "0x88cc");
        assert_eq!(VlanTag::from_tci(0xffff).tci(), 0xffff);
    }

    proptest! {
        #[test]
        fn round_trip(dst in any::<[u8; 6]>(), src in any::<[u8; 6]>(), ty in 0x0600u16..,
                      tag in proptest::option::of((0u8..8, any::<bool>(), 0u16..4096)),
                      payload in proptest::collection::vec(any::<u8>(), 0..40)) {
            prop_assume!(ty != 0x8100);
            let repr = EthernetRepr {
                dst_addr: EthernetAddress(dst), src_addr: EthernetAddress(src),
                vlan: tag.map(|(pcp, dei, vid)| VlanTag { pcp, dei, vid }),
                ethertype: EtherType(ty),
            };
            let mut buf = vec![0u8; repr.buffer_len() + payload.len()];
            let mut f = EthernetFrame::new_unchecked(&mut buf[..]);
            repr.emit(&mut f).unwrap();
            f.payload_mut().copy_from_slice(&payload);
            let f = EthernetFrame::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(EthernetRepr::parse(&f).unwrap(), repr);
            prop_assert_eq!(f.payload(), &payload[..]);
        }

        #[test]
        fn any_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..30)) {
            if let Ok(f) = EthernetFrame::new_checked(&b[..]) {
                let _ = (f.dst_addr(), f.src_addr(), f.vlan(), f.ethertype(), f.payload());
                let _ = EthernetRepr::parse(&f);
            }
        }
    }
}
