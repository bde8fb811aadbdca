//! The IP layer whatever its version (smoltcp's `wire::ip`): an address that is either
//! family, and [`IpRepr`], an IPv4 or IPv6 header as plain values behind one set of
//! accessors, so that code which does the same thing for both families (a router's
//! forwarding policy, an ICMP error) is written once.

use crate::ipv4::{self, IpProtocol, Ipv4Packet, Ipv4Repr};
use crate::ipv6::{self, Ipv6Packet, Ipv6Repr};
use crate::{check_len, Error, Field, Header, Result};

/// An address of either family: the standard library's.
pub use std::net::IpAddr as IpAddress;

/// The IP version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// IPv4 (RFC 791).
    Ipv4,
    /// IPv6 (RFC 8200).
    Ipv6,
}

impl Version {
    /// The version of `addr`.
    pub const fn of(addr: &IpAddress) -> Version {
        match addr {
            IpAddress::V4(_) => Version::Ipv4,
            IpAddress::V6(_) => Version::Ipv6,
        }
    }

    /// Length of this version's fixed header (20 or 40 bytes).
    pub const fn header_len(self) -> usize {
        match self {
            Version::Ipv4 => ipv4::HEADER_LEN,
            Version::Ipv6 => ipv6::HEADER_LEN,
        }
    }

    /// The ICMP protocol of this version (ICMP or ICMPv6).
    pub const fn icmp(self) -> IpProtocol {
        match self {
            Version::Ipv4 => IpProtocol::ICMP,
            Version::Ipv6 => IpProtocol::IPV6_ICMP,
        }
    }
}

/// An IPv4 or IPv6 header as plain values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpRepr {
    /// IPv4.
    Ipv4(Ipv4Repr),
    /// IPv6 (the fixed header; extension headers are payload).
    Ipv6(Ipv6Repr),
}

impl IpRepr {
    /// A header from `src` to `dst` with default DSCP/ECN, identification, flow label
    /// and DF clear. `src` and `dst` must be the same family: otherwise the `Field`
    /// error names the version of `dst`.
    pub fn new(
        src: IpAddress,
        dst: IpAddress,
        next_header: IpProtocol,
        payload_len: usize,
        hop_limit: u8,
    ) -> Result<IpRepr> {
        match (src, dst) {
            (IpAddress::V4(src_addr), IpAddress::V4(dst_addr)) => Ok(IpRepr::Ipv4(Ipv4Repr {
                src_addr,
                dst_addr,
                protocol: next_header,
                payload_len,
                ttl: hop_limit,
                dscp_ecn: 0,
                ident: 0,
                dont_frag: false,
            })),
            (IpAddress::V6(src_addr), IpAddress::V6(dst_addr)) => Ok(IpRepr::Ipv6(Ipv6Repr {
                src_addr,
                dst_addr,
                next_header,
                payload_len,
                hop_limit,
                traffic_class: 0,
                flow_label: 0,
            })),
            (_, IpAddress::V4(_)) => Err(Error::Field {
                header: Header::Ipv4,
                field: Field::Version,
                value: 6,
            }),
            (_, IpAddress::V6(_)) => Err(Error::Field {
                header: Header::Ipv6,
                field: Field::Version,
                value: 4,
            }),
        }
    }

    /// Parse the packet at the start of `buf` by its version nibble, through the
    /// version's checked view and `Repr::parse` (so an IPv4 fragment is
    /// `Unsupported`, as in [`Ipv4Repr::parse`]).
    pub fn parse(buf: &[u8]) -> Result<IpRepr> {
        check_len(Header::Ipv4, buf.len(), 1)?;
        match buf[0] >> 4 {
            4 => Ipv4Repr::parse(&Ipv4Packet::new_checked(buf)?).map(IpRepr::Ipv4),
            6 => Ipv6Repr::parse(&Ipv6Packet::new_checked(buf)?).map(IpRepr::Ipv6),
            v => Err(Error::Field {
                header: Header::Ipv4,
                field: Field::Version,
                value: u32::from(v),
            }),
        }
    }

    /// The version.
    pub const fn version(&self) -> Version {
        match self {
            IpRepr::Ipv4(_) => Version::Ipv4,
            IpRepr::Ipv6(_) => Version::Ipv6,
        }
    }

    /// Source address.
    pub fn src_addr(&self) -> IpAddress {
        match self {
            IpRepr::Ipv4(r) => IpAddress::V4(r.src_addr),
            IpRepr::Ipv6(r) => IpAddress::V6(r.src_addr),
        }
    }

    /// Destination address.
    pub fn dst_addr(&self) -> IpAddress {
        match self {
            IpRepr::Ipv4(r) => IpAddress::V4(r.dst_addr),
            IpRepr::Ipv6(r) => IpAddress::V6(r.dst_addr),
        }
    }

    /// IPv4 protocol or IPv6 next header.
    pub const fn next_header(&self) -> IpProtocol {
        match self {
            IpRepr::Ipv4(r) => r.protocol,
            IpRepr::Ipv6(r) => r.next_header,
        }
    }

    /// IPv4 TTL or IPv6 hop limit.
    pub const fn hop_limit(&self) -> u8 {
        match self {
            IpRepr::Ipv4(r) => r.ttl,
            IpRepr::Ipv6(r) => r.hop_limit,
        }
    }

    /// Payload length in bytes (for IPv6, extension headers included).
    pub const fn payload_len(&self) -> usize {
        match self {
            IpRepr::Ipv4(r) => r.payload_len,
            IpRepr::Ipv6(r) => r.payload_len,
        }
    }

    /// Set the payload length.
    pub fn set_payload_len(&mut self, len: usize) {
        match self {
            IpRepr::Ipv4(r) => r.payload_len = len,
            IpRepr::Ipv6(r) => r.payload_len = len,
        }
    }

    /// Length of the header `emit` writes (20 or 40).
    pub const fn header_len(&self) -> usize {
        self.version().header_len()
    }

    /// Header plus payload.
    pub const fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len()
    }

    /// Write the header into the start of `buf` (the payload is the caller's, after
    /// `header_len()` bytes). Errors as the version's `emit`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        match self {
            IpRepr::Ipv4(r) => r.emit(&mut Ipv4Packet::new_unchecked(buf)),
            IpRepr::Ipv6(r) => r.emit(&mut Ipv6Packet::new_unchecked(buf)),
        }
    }
}

impl From<Ipv4Repr> for IpRepr {
    fn from(r: Ipv4Repr) -> IpRepr {
        IpRepr::Ipv4(r)
    }
}

impl From<Ipv6Repr> for IpRepr {
    fn from(r: Ipv6Repr) -> IpRepr {
        IpRepr::Ipv6(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> IpAddress {
        s.parse().unwrap()
    }

    #[test]
    fn accessors_agree_for_both_families_and_emit_round_trips() {
        for (src, dst) in [
            (a("198.18.0.1"), a("198.18.1.2")),
            (a("2001:2::1"), a("2001:2:0:1::2")),
        ] {
            let r = IpRepr::new(src, dst, IpProtocol::UDP, 8, 63).unwrap();
            assert_eq!((r.src_addr(), r.dst_addr()), (src, dst));
            assert_eq!(
                (r.next_header(), r.hop_limit(), r.payload_len()),
                (IpProtocol::UDP, 63, 8)
            );
            assert_eq!(r.version(), Version::of(&dst));
            assert_eq!(r.buffer_len(), r.version().header_len() + 8);
            let mut buf = vec![0u8; r.buffer_len()];
            r.emit(&mut buf).unwrap();
            assert_eq!(IpRepr::parse(&buf), Ok(r));
            let mut short = r;
            short.set_payload_len(7);
            assert_eq!(short.payload_len(), 7);
        }
    }

    #[test]
    fn mixed_families_and_bad_versions_are_errors() {
        assert_eq!(
            IpRepr::new(a("::1"), a("198.18.0.1"), IpProtocol::UDP, 0, 1),
            Err(Error::Field {
                header: Header::Ipv4,
                field: Field::Version,
                value: 6
            })
        );
        assert_eq!(
            IpRepr::new(a("198.18.0.1"), a("::1"), IpProtocol::UDP, 0, 1),
            Err(Error::Field {
                header: Header::Ipv6,
                field: Field::Version,
                value: 4
            })
        );
        assert_eq!(
            IpRepr::parse(&[0x50; 40]),
            Err(Error::Field {
                header: Header::Ipv4,
                field: Field::Version,
                value: 5
            })
        );
        assert!(matches!(IpRepr::parse(&[]), Err(Error::Truncated { .. })));
    }
}
