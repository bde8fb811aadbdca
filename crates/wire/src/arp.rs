//! ARP (RFC 826). The view reads any hardware/protocol sizes; the `Repr` handles the
//! one combination weft speaks, Ethernet + IPv4.
//!
//! ```text
//!  0       2       4      5      6      8     8+hlen  8+hlen+plen  8+2hlen+plen  8+2(hlen+plen)
//!  htype | ptype | hlen | plen | oper | sha  | spa    | tha        | tpa         |
//! ```

use crate::ethernet::{EtherType, EthernetAddress};
use crate::ipv4::Ipv4Address;
use crate::{check_len, Error, Field, Header, Result};
use core::fmt;

mod field {
    use crate::Bytes as Field;
    pub const HTYPE: Field = 0..2;
    pub const PTYPE: Field = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Field = 6..8;
    pub const ADDRS: usize = 8;
}

/// Length of the fixed part before the addresses.
pub const FIXED_LEN: usize = 8;
/// Length of an Ethernet/IPv4 ARP packet.
pub const ETHERNET_IPV4_LEN: usize = 28;
/// Hardware type Ethernet (IANA ARP parameters).
pub const HTYPE_ETHERNET: u16 = 1;

/// An ARP operation; open, so unknown values survive a view read.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpOperation(pub u16);

impl ArpOperation {
    /// Request.
    pub const REQUEST: ArpOperation = ArpOperation(1);
    /// Reply.
    pub const REPLY: ArpOperation = ArpOperation(2);
}

impl fmt::Debug for ArpOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ArpOperation::REQUEST => f.write_str("Request"),
            ArpOperation::REPLY => f.write_str("Reply"),
            ArpOperation(v) => write!(f, "0x{v:04x}"),
        }
    }
}

#[inline]
fn be16(b: &[u8], f: crate::Bytes) -> u16 {
    let s = &b[f];
    u16::from_be_bytes([s[0], s[1]])
}

/// A zero-copy view of an ARP packet.
#[derive(Debug, Clone, Copy)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
    /// Wrap without checking; accessors may panic on a short buffer.
    pub const fn new_unchecked(buffer: T) -> ArpPacket<T> {
        ArpPacket { buffer }
    }

    /// Wrap after [`ArpPacket::check_len`].
    pub fn new_checked(buffer: T) -> Result<ArpPacket<T>> {
        let p = ArpPacket::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Check that the four addresses the size fields announce fit; trailing bytes
    /// (Ethernet padding) are ignored.
    pub fn check_len(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        check_len(Header::Arp, b.len(), FIXED_LEN)?;
        check_len(Header::Arp, b.len(), self.packet_len())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Hardware type.
    pub fn hardware_type(&self) -> u16 {
        be16(self.buffer.as_ref(), field::HTYPE)
    }
    /// Protocol type.
    pub fn protocol_type(&self) -> EtherType {
        EtherType(be16(self.buffer.as_ref(), field::PTYPE))
    }
    /// Hardware address length.
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }
    /// Protocol address length.
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }
    /// Operation.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation(be16(self.buffer.as_ref(), field::OPER))
    }
    /// 8 + 2 × (hlen + plen).
    pub fn packet_len(&self) -> usize {
        FIXED_LEN + 2 * (usize::from(self.hardware_len()) + usize::from(self.protocol_len()))
    }
    fn hl(&self) -> usize {
        usize::from(self.hardware_len())
    }
    fn pl(&self) -> usize {
        usize::from(self.protocol_len())
    }
    /// Sender hardware address, raw.
    pub fn source_hardware_addr(&self) -> &[u8] {
        let s = field::ADDRS;
        &self.buffer.as_ref()[s..s + self.hl()]
    }
    /// Sender protocol address, raw.
    pub fn source_protocol_addr(&self) -> &[u8] {
        let s = field::ADDRS + self.hl();
        &self.buffer.as_ref()[s..s + self.pl()]
    }
    /// Target hardware address, raw.
    pub fn target_hardware_addr(&self) -> &[u8] {
        let s = field::ADDRS + self.hl() + self.pl();
        &self.buffer.as_ref()[s..s + self.hl()]
    }
    /// Target protocol address, raw.
    pub fn target_protocol_addr(&self) -> &[u8] {
        let s = field::ADDRS + 2 * self.hl() + self.pl();
        &self.buffer.as_ref()[s..s + self.pl()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    /// Write the fixed part: types, sizes and operation.
    pub fn set_fixed(
        &mut self,
        htype: u16,
        ptype: EtherType,
        hlen: u8,
        plen: u8,
        op: ArpOperation,
    ) {
        let b = self.buffer.as_mut();
        b[field::HTYPE].copy_from_slice(&htype.to_be_bytes());
        b[field::PTYPE].copy_from_slice(&ptype.0.to_be_bytes());
        b[field::HLEN] = hlen;
        b[field::PLEN] = plen;
        b[field::OPER].copy_from_slice(&op.0.to_be_bytes());
    }
    /// Write the four addresses; each must have the length the size fields say.
    pub fn set_addrs(&mut self, sha: &[u8], spa: &[u8], tha: &[u8], tpa: &[u8]) {
        let (hl, pl) = (self.hl(), self.pl());
        let b = &mut self.buffer.as_mut()[field::ADDRS..];
        b[..hl].copy_from_slice(sha);
        b[hl..hl + pl].copy_from_slice(spa);
        b[hl + pl..2 * hl + pl].copy_from_slice(tha);
        b[2 * hl + pl..2 * (hl + pl)].copy_from_slice(tpa);
    }
}

/// An Ethernet/IPv4 ARP request or reply as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// Request or reply.
    pub operation: ArpOperation,
    /// Sender MAC.
    pub source_hardware_addr: EthernetAddress,
    /// Sender IPv4 address.
    pub source_protocol_addr: Ipv4Address,
    /// Target MAC (zero in a request).
    pub target_hardware_addr: EthernetAddress,
    /// Target IPv4 address.
    pub target_protocol_addr: Ipv4Address,
}

impl ArpRepr {
    /// Parse a checked view: Ethernet/IPv4 sizes and a request or reply only.
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> Result<ArpRepr> {
        packet.check_len()?;
        if packet.hardware_type() != HTYPE_ETHERNET
            || packet.protocol_type() != EtherType::IPV4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(Error::Unsupported {
                header: Header::Arp,
                field: Field::AddressFormat,
                value: u32::from(packet.hardware_type()) << 16
                    | u32::from(packet.protocol_type().0),
            });
        }
        let op = packet.operation();
        if op != ArpOperation::REQUEST && op != ArpOperation::REPLY {
            return Err(Error::Unsupported {
                header: Header::Arp,
                field: Field::Operation,
                value: u32::from(op.0),
            });
        }
        let ip = |b: &[u8]| Ipv4Address::new(b[0], b[1], b[2], b[3]);
        let mac = |b: &[u8]| EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]]);
        Ok(ArpRepr {
            operation: op,
            source_hardware_addr: mac(packet.source_hardware_addr()),
            source_protocol_addr: ip(packet.source_protocol_addr()),
            target_hardware_addr: mac(packet.target_hardware_addr()),
            target_protocol_addr: ip(packet.target_protocol_addr()),
        })
    }

    /// 28.
    pub const fn buffer_len(&self) -> usize {
        ETHERNET_IPV4_LEN
    }

    /// Write the packet; a buffer shorter than 28 bytes is an error.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) -> Result<()> {
        check_len(Header::Arp, packet.buffer.as_ref().len(), ETHERNET_IPV4_LEN)?;
        packet.set_fixed(HTYPE_ETHERNET, EtherType::IPV4, 6, 4, self.operation);
        packet.set_addrs(
            &self.source_hardware_addr.0,
            &self.source_protocol_addr.octets(),
            &self.target_hardware_addr.0,
            &self.target_protocol_addr.octets(),
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    // From a capture: who-has 192.168.1.1 tell 192.168.1.100 (00:1b:21:3a:4f:5e).
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x1b, 0x21, 0x3a, 0x4f, 0x5e, 192,
        168, 1, 100, 0, 0, 0, 0, 0, 0, 192, 168, 1, 1,
    ];

    #[test]
    fn decode_hand_checked_bytes() {
        let p = ArpPacket::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(p.hardware_type(), 1);
        assert_eq!(p.protocol_type(), EtherType::IPV4);
        assert_eq!((p.hardware_len(), p.protocol_len()), (6, 4));
        assert_eq!(p.operation(), ArpOperation::REQUEST);
        let r = ArpRepr::parse(&p).unwrap();
        assert_eq!(r.source_hardware_addr.to_string(), "00:1b:21:3a:4f:5e");
        assert_eq!(r.source_protocol_addr, Ipv4Address::new(192, 168, 1, 100));
        assert_eq!(r.target_hardware_addr, EthernetAddress([0; 6]));
        assert_eq!(r.target_protocol_addr, Ipv4Address::new(192, 168, 1, 1));
    }

    #[test]
    fn emit_reproduces_bytes() {
        let r = ArpRepr::parse(&ArpPacket::new_checked(&REQUEST[..]).unwrap()).unwrap();
        let mut out = [0xaau8; 28];
        r.emit(&mut ArpPacket::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, REQUEST);
        assert_eq!(
            r.emit(&mut ArpPacket::new_unchecked(&mut out[..27])),
            Err(Error::Truncated {
                header: Header::Arp,
                need: 28,
                have: 27
            })
        );
    }

    #[test]
    fn rejects_short_and_unsupported() {
        assert_eq!(
            ArpPacket::new_checked(&REQUEST[..27]).unwrap_err(),
            Error::Truncated {
                header: Header::Arp,
                need: 28,
                have: 27
            }
        );
        assert_eq!(
            ArpPacket::new_checked(&REQUEST[..7]).unwrap_err(),
            Error::Truncated {
                header: Header::Arp,
                need: 8,
                have: 7
            }
        );
        // hlen 255 announces far more than the buffer holds.
        let mut b = REQUEST;
        b[4] = 255;
        assert_eq!(
            ArpPacket::new_checked(&b[..]).unwrap_err(),
            Error::Truncated {
                header: Header::Arp,
                need: 8 + 2 * 259,
                have: 28
            }
        );
        // A smaller hlen still fits, and the view reads it, but the Repr refuses it.
        let mut b = REQUEST;
        b[4] = 4;
        let p = ArpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.target_protocol_addr().len(), 4);
        assert!(matches!(
            ArpRepr::parse(&p),
            Err(Error::Unsupported {
                header: Header::Arp,
                field: Field::AddressFormat,
                ..
            })
        ));
        let mut b = REQUEST;
        b[7] = 3; // RARP request
        assert!(matches!(
            ArpRepr::parse(&ArpPacket::new_checked(&b[..]).unwrap()),
            Err(Error::Unsupported {
                header: Header::Arp,
                field: Field::Operation,
                value: 3
            })
        ));
    }

    proptest! {
        #[test]
        fn round_trip(reply in any::<bool>(), sha in any::<[u8; 6]>(), spa in any::<[u8; 4]>(),
                      tha in any::<[u8; 6]>(), tpa in any::<[u8; 4]>()) {
            let r = ArpRepr {
                operation: if reply { ArpOperation::REPLY } else { ArpOperation::REQUEST },
                source_hardware_addr: EthernetAddress(sha), source_protocol_addr: spa.into(),
                target_hardware_addr: EthernetAddress(tha), target_protocol_addr: tpa.into(),
            };
            let mut b = [0u8; 46]; // padded to the Ethernet minimum
            r.emit(&mut ArpPacket::new_unchecked(&mut b[..])).unwrap();
            prop_assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&b[..]).unwrap()).unwrap(), r);
        }

        #[test]
        fn any_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(p) = ArpPacket::new_checked(&b[..]) {
                let _ = (p.source_hardware_addr(), p.source_protocol_addr(),
                         p.target_hardware_addr(), p.target_protocol_addr());
                let _ = ArpRepr::parse(&p);
            }
        }
    }
}
