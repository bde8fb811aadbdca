//! The RoCEv2 invariant CRC (IBTA Vol 1 Annex A17.3.3).
//!
//! CRC-32 (IEEE 802.3, the zlib polynomial) over, in order: 8 bytes of `0xFF` standing
//! for the masked LRH; the IP header with the fields routers may change masked to ones
//! (IPv4: TOS, TTL, header checksum; IPv6: traffic class, flow label, hop limit); the UDP
//! header with its checksum masked; the BTH with byte 4 (FECN, BECN, reserved) masked;
//! and the rest of the packet up to, not including, the ICRC. The result is stored
//! little-endian in the packet's last four bytes.
//!
//! Two entry points: [`icrc`] over the real IP and UDP header bytes of a frame, and
//! [`IcrcPath`] for links where the kernel writes IP and UDP. Linux writes IPv4
//! identification 0 only when DF is set *and* the socket forbids fragmentation
//! (`IP_MTU_DISCOVER` = `IP_PMTUDISC_DO` or `_PROBE`) and is not `connect()`ed; the
//! default `IP_PMTUDISC_WANT` sets DF but a non-zero identification, which the ICRC
//! covers. weft's udp link must set `IP_PMTUDISC_DO`; then every covered field is known
//! to both ends in advance.

use super::opcode::len;
use crate::{check_len, Error, Field, Header, Result};
use core::net::{Ipv4Addr, Ipv6Addr};

/// Largest IP header the ICRC covers: IPv4 with 40 bytes of options.
const MAX_IP_HEADER: usize = 60;
/// 8 masked LRH bytes + IP + UDP + BTH.
const MAX_PREFIX: usize = 8 + MAX_IP_HEADER + 8 + len::BTH;

/// The masked prefix (LRH, IP, UDP, BTH) laid out in a stack buffer.
struct Prefix {
    buf: [u8; MAX_PREFIX],
    len: usize,
}

impl Prefix {
    fn new() -> Prefix {
        let mut p = Prefix {
            buf: [0; MAX_PREFIX],
            len: 8,
        };
        p.buf[..8].fill(0xff);
        p
    }

    fn push(&mut self, bytes: &[u8]) -> &mut [u8] {
        let start = self.len;
        self.buf[start..start + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
        &mut self.buf[start..self.len]
    }

    fn push_ip(&mut self, ip: &[u8]) -> Result<()> {
        check_len(Header::Icrc, ip.len(), 1)?;
        match ip[0] >> 4 {
            4 => {
                let ihl = usize::from(ip[0] & 0x0f) * 4;
                if ihl < 20 || ip.len() != ihl {
                    return Err(Error::Length {
                        header: Header::Ipv4,
                        field: Field::Ihl,
                        value: ip.len(),
                    });
                }
                let h = self.push(ip);
                h[1] = 0xff; // TOS (DSCP + ECN)
                h[8] = 0xff; // TTL
                h[10] = 0xff; // header checksum
                h[11] = 0xff;
            }
            6 => {
                if ip.len() != 40 {
                    return Err(Error::Length {
                        header: Header::Ipv6,
                        field: Field::Length,
                        value: ip.len(),
                    });
                }
                let h = self.push(ip);
                h[0] |= 0x0f; // traffic class, high nibble
                h[1] = 0xff; // traffic class low nibble + flow label
                h[2] = 0xff;
                h[3] = 0xff;
                h[7] = 0xff; // hop limit
            }
            v => {
                return Err(Error::Field {
                    header: Header::Icrc,
                    field: Field::Version,
                    value: u32::from(v),
                })
            }
        }
        Ok(())
    }

    fn push_udp_bth(&mut self, udp: &[u8], ib: &[u8]) -> Result<()> {
        if udp.len() != 8 {
            return Err(Error::Length {
                header: Header::Udp,
                field: Field::Length,
                value: udp.len(),
            });
        }
        check_len(Header::Bth, ib.len(), len::BTH)?;
        let u = self.push(udp);
        u[6] = 0xff; // UDP checksum
        u[7] = 0xff;
        let b = self.push(&ib[..len::BTH]);
        b[4] = 0xff; // FECN, BECN, reserved
        Ok(())
    }

    fn finish(&self, rest: &[u8]) -> u32 {
        let mut h = crc32fast::Hasher::new();
        h.update(&self.buf[..self.len]);
        h.update(rest);
        h.finalize()
    }
}

/// The ICRC of a packet given its IP header (`ip`: the whole IPv4 header with options,
/// or the 40-byte IPv6 header), its UDP header (8 bytes) and the IB packet from the BTH
/// up to, not including, the ICRC.
pub fn icrc(ip: &[u8], udp: &[u8], ib_without_icrc: &[u8]) -> Result<u32> {
    let mut p = Prefix::new();
    p.push_ip(ip)?;
    p.push_udp_bth(udp, ib_without_icrc)?;
    Ok(p.finish(&ib_without_icrc[len::BTH..]))
}

/// The addresses of a path, IPv4 or IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpPair {
    /// IPv4 source and destination.
    V4 {
        /// Source.
        src: Ipv4Addr,
        /// Destination.
        dst: Ipv4Addr,
    },
    /// IPv6 source and destination.
    V6 {
        /// Source.
        src: Ipv6Addr,
        /// Destination.
        dst: Ipv6Addr,
    },
}

/// The IP and UDP headers a packet travels in, for links where the kernel writes them.
/// Covered fields the path does not name take the values weft's links produce: IPv4
/// without options, identification 0, DF set (what Linux writes for an unconnected
/// socket with `IP_PMTUDISC_DO`); UDP destination port 4791.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IcrcPath {
    /// Addresses.
    pub ips: IpPair,
    /// UDP source port (RoCEv2 uses it for ECMP entropy).
    pub src_port: u16,
    /// UDP destination port, normally [`super::UDP_PORT`].
    pub dst_port: u16,
}

impl IcrcPath {
    /// An IPv4 path to port 4791.
    pub const fn v4(src: Ipv4Addr, dst: Ipv4Addr, src_port: u16) -> IcrcPath {
        IcrcPath {
            ips: IpPair::V4 { src, dst },
            src_port,
            dst_port: super::UDP_PORT,
        }
    }

    /// An IPv6 path to port 4791.
    pub const fn v6(src: Ipv6Addr, dst: Ipv6Addr, src_port: u16) -> IcrcPath {
        IcrcPath {
            ips: IpPair::V6 { src, dst },
            src_port,
            dst_port: super::UDP_PORT,
        }
    }

    /// The ICRC of `ib` (BTH up to, not including, the ICRC) on this path.
    pub fn icrc(&self, ib_without_icrc: &[u8]) -> Result<u32> {
        let udp_len = 8 + ib_without_icrc.len() + len::ICRC;
        let udp_len16 = u16::try_from(udp_len).map_err(|_| Error::Length {
            header: Header::Udp,
            field: Field::Length,
            value: udp_len,
        })?;
        let mut p = Prefix::new();
        match self.ips {
            IpPair::V4 { src, dst } => {
                let total = u16::try_from(20 + udp_len).map_err(|_| Error::Length {
                    header: Header::Ipv4,
                    field: Field::TotalLength,
                    value: 20 + udp_len,
                })?;
                let mut h = [0u8; 20];
                h[0] = 0x45;
                h[2..4].copy_from_slice(&total.to_be_bytes());
                h[6] = 0x40; // DF, identification 0
                h[9] = 17;
                h[12..16].copy_from_slice(&src.octets());
                h[16..20].copy_from_slice(&dst.octets());
                p.push_ip(&h)?;
            }
            IpPair::V6 { src, dst } => {
                let mut h = [0u8; 40];
                h[0] = 0x60;
                h[4..6].copy_from_slice(&udp_len16.to_be_bytes());
                h[6] = 17;
                h[8..24].copy_from_slice(&src.octets());
                h[24..40].copy_from_slice(&dst.octets());
                p.push_ip(&h)?;
            }
        }
        let mut udp = [0u8; 8];
        udp[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        udp[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len16.to_be_bytes());
        p.push_udp_bth(&udp, ib_without_icrc)?;
        Ok(p.finish(&ib_without_icrc[len::BTH..]))
    }

    /// Compute and store the ICRC in the last four bytes of `ib_packet`.
    pub fn fill(&self, ib_packet: &mut [u8]) -> Result<()> {
        check_len(Header::Bth, ib_packet.len(), len::BTH + len::ICRC)?;
        let n = ib_packet.len() - len::ICRC;
        let c = self.icrc(&ib_packet[..n])?;
        ib_packet[n..].copy_from_slice(&c.to_le_bytes());
        Ok(())
    }

    /// True when the last four bytes of `ib_packet` hold its ICRC on this path.
    pub fn check(&self, ib_packet: &[u8]) -> bool {
        if ib_packet.len() < len::BTH + len::ICRC {
            return false;
        }
        let n = ib_packet.len() - len::ICRC;
        let t = &ib_packet[n..];
        self.icrc(&ib_packet[..n]).ok() == Some(u32::from_le_bytes([t[0], t[1], t[2], t[3]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // IPv4 header, ID 0, DF, 10.0.0.1 -> 10.0.0.2, for a 20+8+12+4 byte packet.
    fn v4_header(tos: u8, ttl: u8) -> [u8; 20] {
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[1] = tos;
        h[2..4].copy_from_slice(&44u16.to_be_bytes());
        h[6] = 0x40;
        h[8] = ttl;
        h[9] = 17;
        h[10] = 0x12;
        h[12..16].copy_from_slice(&[10, 0, 0, 1]);
        h[16..20].copy_from_slice(&[10, 0, 0, 2]);
        h
    }

    fn udp_header() -> [u8; 8] {
        let mut u = [0u8; 8];
        u[0..2].copy_from_slice(&49152u16.to_be_bytes());
        u[2..4].copy_from_slice(&4791u16.to_be_bytes());
        u[4..6].copy_from_slice(&24u16.to_be_bytes());
        u
    }

    const BTH: [u8; 12] = [0x11, 0x00, 0xff, 0xff, 0x00, 0, 0, 0x11, 0x80, 0, 0, 1];

    #[test]
    fn masked_fields_do_not_change_the_crc() {
        let a = icrc(&v4_header(0, 64), &udp_header(), &BTH).unwrap();
        let mut bth = BTH;
        bth[4] = 0xc0; // FECN + BECN
        let mut udp = udp_header();
        udp[6] = 0xab;
        let b = icrc(&v4_header(0x03, 1), &udp, &bth).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn covered_fields_change_the_crc() {
        let a = icrc(&v4_header(0, 64), &udp_header(), &BTH).unwrap();
        let mut bth = BTH;
        bth[11] ^= 1; // PSN
        assert_ne!(a, icrc(&v4_header(0, 64), &udp_header(), &bth).unwrap());
        let mut ip = v4_header(0, 64);
        ip[19] ^= 1; // destination address
        assert_ne!(a, icrc(&ip, &udp_header(), &BTH).unwrap());
    }

    #[test]
    fn matches_a_plain_crc32_over_the_masked_bytes() {
        // Spelled out: the 8 + 20 + 8 + 12 masked bytes, then one CRC-32.
        let mut all = vec![0xffu8; 8];
        let mut ip = v4_header(0, 64);
        ip[1] = 0xff;
        ip[8] = 0xff;
        ip[10] = 0xff;
        ip[11] = 0xff;
        all.extend_from_slice(&ip);
        let mut udp = udp_header();
        udp[6] = 0xff;
        udp[7] = 0xff;
        all.extend_from_slice(&udp);
        let mut bth = BTH;
        bth[4] = 0xff;
        all.extend_from_slice(&bth);
        assert_eq!(
            icrc(&v4_header(7, 9), &udp_header(), &BTH).unwrap(),
            crc32fast::hash(&all)
        );
    }

    #[test]
    fn path_agrees_with_explicit_headers() {
        let path = IcrcPath::v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            49152,
        );
        assert_eq!(
            path.icrc(&BTH).unwrap(),
            icrc(&v4_header(0, 64), &udp_header(), &BTH).unwrap()
        );
        let mut pkt = [0u8; 16];
        pkt[..12].copy_from_slice(&BTH);
        path.fill(&mut pkt).unwrap();
        assert!(path.check(&pkt));
        pkt[13] ^= 0x40;
        assert!(!path.check(&pkt));
        assert!(!path.check(&pkt[..10]));
    }

    #[test]
    fn bad_headers_are_errors() {
        assert_eq!(
            icrc(&[0x45; 19], &udp_header(), &BTH),
            Err(Error::Length {
                header: Header::Ipv4,
                field: Field::Ihl,
                value: 19
            })
        );
        assert_eq!(
            icrc(&[0x60; 39], &udp_header(), &BTH),
            Err(Error::Length {
                header: Header::Ipv6,
                field: Field::Length,
                value: 39
            })
        );
        assert_eq!(
            icrc(&[0x55; 20], &udp_header(), &BTH),
            Err(Error::Field {
                header: Header::Icrc,
                field: Field::Version,
                value: 5
            })
        );
        assert_eq!(
            icrc(&v4_header(0, 1), &udp_header()[..7], &BTH),
            Err(Error::Length {
                header: Header::Udp,
                field: Field::Length,
                value: 7
            })
        );
        assert!(icrc(&v4_header(0, 1), &udp_header(), &BTH[..11]).is_err());
        assert!(icrc(&[], &udp_header(), &BTH).is_err());
    }
}
