//! Whole RoCEv2 frames: Ethernet (optionally 802.1Q-tagged) / IPv4 or IPv6 / UDP to
//! port 4791 / IB transport packet with its ICRC.
//!
//! [`parse`] finds the IB packet inside a frame and keeps the IP and UDP header bytes
//! the ICRC covers; [`FrameBuilder`] writes every byte of a frame, ICRC included, as a
//! frame link (AF_PACKET, AF_XDP) or a capture needs. Both go through the header
//! modules of this crate; nothing here parses a header of its own.

use crate::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr, VlanTag};
use crate::ipv4::{IpProtocol, Ipv4Packet, Ipv4Repr};
use crate::ipv6::{Ipv6Packet, Ipv6Repr};
use crate::roce::icrc::{icrc, IpPair};
use crate::roce::opcode::len;
use crate::roce::{IbPacketRepr, UDP_PORT};
use crate::udp::{UdpPacket, UdpRepr};
use crate::{check_len, Error, Field, Header, Result};
use core::net::{Ipv4Addr, Ipv6Addr};

/// The IP header of a RoCEv2 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpHeader {
    /// IPv4.
    V4(Ipv4Repr),
    /// IPv6.
    V6(Ipv6Repr),
}

/// A RoCEv2 frame, parsed down to the start of the IB packet.
#[derive(Debug, Clone)]
pub struct RoceFrame<'a> {
    /// Ethernet header.
    pub eth: EthernetRepr,
    /// IP header.
    pub ip: IpHeader,
    /// UDP header.
    pub udp: UdpRepr,
    /// The IP header bytes (IPv4 options included), as the ICRC covers them.
    pub ip_header: &'a [u8],
    /// The 8 UDP header bytes.
    pub udp_header: &'a [u8],
    /// The IB packet: BTH up to and including the ICRC (the UDP payload).
    pub ib: &'a [u8],
}

impl RoceFrame<'_> {
    /// Source and destination addresses.
    pub fn ip_pair(&self) -> IpPair {
        match self.ip {
            IpHeader::V4(r) => IpPair::V4 {
                src: r.src_addr,
                dst: r.dst_addr,
            },
            IpHeader::V6(r) => IpPair::V6 {
                src: r.src_addr,
                dst: r.dst_addr,
            },
        }
    }

    /// The ICRC computed over this frame's bytes (`None` when the IB packet is too short
    /// to hold a BTH and an ICRC).
    pub fn computed_icrc(&self) -> Option<u32> {
        if self.ib.len() < len::BTH + len::ICRC {
            return None;
        }
        icrc(
            self.ip_header,
            self.udp_header,
            &self.ib[..self.ib.len() - len::ICRC],
        )
        .ok()
    }

    /// The ICRC stored in the frame (little-endian trailer).
    pub fn stored_icrc(&self) -> Option<u32> {
        let t = self.ib.get(self.ib.len().checked_sub(len::ICRC)?..)?;
        Some(u32::from_le_bytes([t[0], t[1], t[2], t[3]]))
    }

    /// True when the stored ICRC matches the computed one.
    pub fn icrc_ok(&self) -> bool {
        matches!((self.computed_icrc(), self.stored_icrc()), (Some(a), Some(b)) if a == b)
    }

    /// Segment `k` of a UDP GSO send captured whole, cut at `size` bytes (the last
    /// segment may be shorter): its IB packet, or `None` past the end.
    pub fn segment(&self, k: usize, size: usize) -> Option<&[u8]> {
        let start = k.checked_mul(size)?;
        (size > 0 && start < self.ib.len())
            .then(|| &self.ib[start..self.ib.len().min(start + size)])
    }

    /// Whether segment `k` (see [`RoceFrame::segment`]) carries the ICRC of the headers
    /// it gets when the send is cut: IP and UDP lengths of the segment, and for IPv4 the
    /// identification of this frame plus `k`, as Linux's segmentation writes them.
    pub fn segment_icrc_ok(&self, k: usize, size: usize) -> bool {
        let Some(seg) = self.segment(k, size) else {
            return false;
        };
        if seg.len() < len::BTH + len::ICRC || self.udp_header.len() != 8 {
            return false;
        }
        let mut ip = [0u8; 60];
        let Some(ip) = ip.get_mut(..self.ip_header.len()) else {
            return false;
        };
        ip.copy_from_slice(self.ip_header);
        let udp_len = 8 + seg.len();
        match self.ip {
            IpHeader::V4(_) => {
                let Ok(total) = u16::try_from(ip.len() + udp_len) else {
                    return false;
                };
                ip[2..4].copy_from_slice(&total.to_be_bytes());
                let id = u16::from_be_bytes([ip[4], ip[5]]).wrapping_add(k as u16);
                ip[4..6].copy_from_slice(&id.to_be_bytes());
            }
            IpHeader::V6(_) => {
                let Ok(payload) = u16::try_from(udp_len) else {
                    return false;
                };
                ip[4..6].copy_from_slice(&payload.to_be_bytes());
            }
        }
        let mut udp = [0u8; 8];
        udp.copy_from_slice(self.udp_header);
        udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        let n = seg.len() - len::ICRC;
        let t = &seg[n..];
        icrc(ip, &udp, &seg[..n]).ok() == Some(u32::from_le_bytes([t[0], t[1], t[2], t[3]]))
    }

    /// When this frame is a UDP GSO send captured before it was cut into datagrams
    /// (a capture on `lo`, or before a NIC segments it), the segment size; `None` for
    /// an ordinary frame. Only a frame whose own ICRC fails is tried, and the size is
    /// the one whose first segment's ICRC verifies: `hint` first (the size found in
    /// the previous frame), then the sizes a path MTU of 256–4096 gives the first
    /// packet's opcode, then every size up to [`MAX_IB_PACKET`] (a few milliseconds
    /// for a corrupted frame; a wrong size passes with probability about 2^-20).
    pub fn gso_segment_size(&self, hint: Option<usize>) -> Option<usize> {
        let smallest = len::BTH + len::ICRC;
        if self.ib.len() < 2 * smallest || self.icrc_ok() {
            return None;
        }
        let headers = crate::roce::Bth::new_checked(self.ib)
            .ok()
            .and_then(|b| b.opcode().info())
            .map_or(0, |i| i.headers.len());
        let mtu_sizes = [256, 512, 1024, 2048, 4096].map(|m| len::BTH + headers + m + len::ICRC);
        let longest = MAX_IB_PACKET.min(self.ib.len() - 1);
        let all = smallest..=longest;
        hint.into_iter()
            .chain(mtu_sizes)
            .filter(|&size| size <= longest)
            .chain(all)
            .find(|&size| self.segment_icrc_ok(0, size))
    }
}

/// The largest IB packet (BTH up to and including the ICRC) one RoCEv2 datagram
/// carries: BTH, the longest extension headers (AtomicETH, 28 bytes), a 4096-byte
/// MTU's payload, and the ICRC.
pub const MAX_IB_PACKET: usize = len::BTH + 28 + 4096 + len::ICRC;

/// True when `l4` starts with a UDP destination port of `port` (length unchecked).
fn udp_dst_is_roce(l4: &[u8], port: u16) -> bool {
    l4.get(2..4) == Some(&port.to_be_bytes()[..])
}

/// Find the IB packet in an Ethernet frame. `Ok(None)`: a frame that is not RoCEv2
/// (another ethertype or protocol, or a UDP destination port other than 4791). `Err`:
/// a frame broken at the Ethernet or IP layer before the UDP port can be read, or a
/// frame addressed to UDP 4791 that is broken at the IP or UDP layer (IPv4 header
/// checksum, fragments, lengths), or RoCEv2 in IPv6 with extension headers, which the
/// ICRC rules do not cover.
pub fn parse(frame: &[u8]) -> Result<Option<RoceFrame<'_>>> {
    parse_on_port(frame, UDP_PORT)
}

/// As [`parse`], with RoCEv2 on UDP destination port `port` instead of 4791 (captures
/// of stacks or tests that use another port).
pub fn parse_on_port(frame: &[u8], port: u16) -> Result<Option<RoceFrame<'_>>> {
    let eth_view = EthernetFrame::new_checked(frame)?;
    let eth = EthernetRepr::parse(&eth_view)?;
    let l3 = &frame[eth.header_len()..];
    let (ip, ip_header, l4) = match eth.ethertype {
        EtherType::IPV4 => {
            let v = Ipv4Packet::new_checked(l3)?;
            // Decide "not RoCEv2" before the stricter checks, so other broken traffic
            // is not reported as broken RoCEv2.
            if v.protocol() != IpProtocol::UDP || !udp_dst_is_roce(v.payload(), port) {
                return Ok(None);
            }
            let r = Ipv4Repr::parse(&v)?;
            let hl = v.header_len();
            let total = usize::from(v.total_len());
            (IpHeader::V4(r), &l3[..hl], &l3[hl..total])
        }
        EtherType::IPV6 => {
            let v = Ipv6Packet::new_checked(l3)?;
            let r = Ipv6Repr::parse(&v)?;
            let (proto, offset) = v.upper_layer()?;
            if proto != IpProtocol::UDP || !udp_dst_is_roce(&l3[offset..v.total_len()], port) {
                return Ok(None);
            }
            if offset != IPV6_HEADER {
                return Err(Error::Unsupported {
                    header: Header::Ipv6,
                    field: Field::NextHeader,
                    value: u32::from(v.next_header().0),
                });
            }
            (
                IpHeader::V6(r),
                &l3[..IPV6_HEADER],
                &l3[IPV6_HEADER..v.total_len()],
            )
        }
        _ => return Ok(None),
    };
    let u = UdpPacket::new_checked(l4)?;
    let udp = UdpRepr::parse(&u)?;
    let udp_len = usize::from(u.len());
    Ok(Some(RoceFrame {
        eth,
        ip,
        udp,
        ip_header,
        udp_header: &l4[..UDP_HEADER],
        ib: &l4[UDP_HEADER..udp_len],
    }))
}

use crate::ipv4::HEADER_LEN as IPV4_HEADER;
use crate::ipv6::HEADER_LEN as IPV6_HEADER;
use crate::udp::HEADER_LEN as UDP_HEADER;

/// Writes RoCEv2 frames for one path: every byte of Ethernet, IP, UDP, the IB packet
/// and its ICRC. IPv4 headers carry no options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameBuilder {
    /// Source MAC.
    pub src_mac: EthernetAddress,
    /// Destination MAC.
    pub dst_mac: EthernetAddress,
    /// Optional 802.1Q tag.
    pub vlan: Option<VlanTag>,
    /// IP addresses.
    pub ips: IpPair,
    /// UDP source port (ECMP entropy).
    pub src_port: u16,
    /// UDP destination port, 4791 unless testing.
    pub dst_port: u16,
    /// IPv4 TOS or IPv6 traffic class (DSCP + ECN).
    pub dscp_ecn: u8,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// IPv6 flow label (20 bits).
    pub flow_label: u32,
    /// IPv4 identification (0 with DF, as Linux sends from unconnected sockets).
    pub ident: u16,
    /// Fill the UDP checksum (RoCEv2 receivers ignore it; capture tools check it).
    pub udp_checksum: bool,
}

impl FrameBuilder {
    fn new(ips: IpPair, src_port: u16) -> FrameBuilder {
        FrameBuilder {
            src_mac: EthernetAddress([0x02, 0, 0, 0, 0, 0x01]),
            dst_mac: EthernetAddress([0x02, 0, 0, 0, 0, 0x02]),
            vlan: None,
            ips,
            src_port,
            dst_port: UDP_PORT,
            dscp_ecn: 0,
            ttl: 64,
            flow_label: 0,
            ident: 0,
            udp_checksum: true,
        }
    }

    /// IPv4 from `src` to `dst`.
    pub fn v4(src: Ipv4Addr, dst: Ipv4Addr, src_port: u16) -> FrameBuilder {
        FrameBuilder::new(IpPair::V4 { src, dst }, src_port)
    }

    /// IPv6 from `src` to `dst`.
    pub fn v6(src: Ipv6Addr, dst: Ipv6Addr, src_port: u16) -> FrameBuilder {
        FrameBuilder::new(IpPair::V6 { src, dst }, src_port)
    }

    fn eth_repr(&self) -> EthernetRepr {
        let ethertype = match self.ips {
            IpPair::V4 { .. } => EtherType::IPV4,
            IpPair::V6 { .. } => EtherType::IPV6,
        };
        EthernetRepr {
            src_addr: self.src_mac,
            dst_addr: self.dst_mac,
            vlan: self.vlan,
            ethertype,
        }
    }

    /// Bytes before the IB packet: Ethernet, IP and UDP headers.
    pub fn header_len(&self) -> usize {
        let ip = match self.ips {
            IpPair::V4 { .. } => IPV4_HEADER,
            IpPair::V6 { .. } => IPV6_HEADER,
        };
        self.eth_repr().header_len() + ip + UDP_HEADER
    }

    /// Frame length for an IB packet of `ib_len` bytes (ICRC included); saturates, and
    /// [`FrameBuilder::wrap`] refuses packets too long for a UDP datagram.
    pub fn frame_len(&self, ib_len: usize) -> usize {
        self.header_len().saturating_add(ib_len)
    }

    /// Write a whole frame for `ib` and `payload` into `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8], ib: &IbPacketRepr, payload: &[u8]) -> Result<usize> {
        let h = self.header_len();
        check_len(Header::Ethernet, buf.len(), h)?;
        let ib_len = ib.emit(&mut buf[h..], payload)?;
        self.wrap(buf, ib_len)
    }

    /// Write the Ethernet, IP and UDP headers and the ICRC around an IB packet of
    /// `ib_len` bytes (ICRC space included) already at `buf[self.header_len()..]`.
    /// Returns the frame length.
    pub fn wrap(&self, buf: &mut [u8], ib_len: usize) -> Result<usize> {
        // Every check before the first byte is written: an error leaves `buf` as it was.
        if ib_len < len::BTH + len::ICRC
            || ib_len > usize::from(u16::MAX) - UDP_HEADER - IPV6_HEADER
        {
            return Err(Error::Length {
                header: Header::Udp,
                field: Field::Payload,
                value: ib_len,
            });
        }
        if self.flow_label > 0x000f_ffff {
            return Err(Error::Field {
                header: Header::Ipv6,
                field: Field::FlowLabel,
                value: self.flow_label,
            });
        }
        let total = self.frame_len(ib_len);
        check_len(Header::Ethernet, buf.len(), total)?;
        let buf = &mut buf[..total];
        let eth = self.eth_repr();
        eth.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]))?;
        let l3_at = eth.header_len();
        let udp_len = UDP_HEADER + ib_len;
        let ip_len = match self.ips {
            IpPair::V4 { src, dst } => {
                let r = Ipv4Repr {
                    src_addr: src,
                    dst_addr: dst,
                    protocol: IpProtocol::UDP,
                    payload_len: udp_len,
                    ttl: self.ttl,
                    dscp_ecn: self.dscp_ecn,
                    ident: self.ident,
                    dont_frag: true,
                };
                r.emit(&mut Ipv4Packet::new_unchecked(&mut buf[l3_at..]))?;
                IPV4_HEADER
            }
            IpPair::V6 { src, dst } => {
                let r = Ipv6Repr {
                    src_addr: src,
                    dst_addr: dst,
                    next_header: IpProtocol::UDP,
                    payload_len: udp_len,
                    hop_limit: self.ttl,
                    traffic_class: self.dscp_ecn,
                    flow_label: self.flow_label,
                };
                r.emit(&mut Ipv6Packet::new_unchecked(&mut buf[l3_at..]))?;
                IPV6_HEADER
            }
        };
        let l4_at = l3_at + ip_len;
        let udp = UdpRepr {
            src_port: self.src_port,
            dst_port: self.dst_port,
            payload_len: ib_len,
        };
        udp.emit(&mut UdpPacket::new_unchecked(&mut buf[l4_at..]))?;
        // The ICRC masks the UDP checksum, so it is computed first and the UDP checksum,
        // which covers the ICRC bytes, last.
        let (head, ib) = buf.split_at_mut(l4_at + UDP_HEADER);
        let n = ib.len() - len::ICRC;
        let c = icrc(&head[l3_at..l4_at], &head[l4_at..], &ib[..n])?;
        ib[n..].copy_from_slice(&c.to_le_bytes());
        if self.udp_checksum {
            let mut u = UdpPacket::new_unchecked(&mut buf[l4_at..]);
            match self.ips {
                IpPair::V4 { src, dst } => u.fill_checksum_v4(src, dst),
                IpPair::V6 { src, dst } => u.fill_checksum_v6(src, dst),
            }
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roce::{BthRepr, IbPacket, IcrcPath, Opcode, Psn, RethRepr};

    fn write_only() -> IbPacketRepr {
        let mut r = IbPacketRepr::new(BthRepr::new(
            Opcode::RC_WRITE_ONLY,
            0x11,
            Psn::new(0xfffffe),
        ));
        r.reth = Some(RethRepr {
            va: 0x1000,
            rkey: 0x77,
            dma_len: 5,
        });
        r
    }

    fn builders() -> [FrameBuilder; 3] {
        let v4 = FrameBuilder::v4([198, 18, 0, 1].into(), [198, 18, 0, 2].into(), 49152);
        let mut tagged = v4;
        tagged.vlan = Some(VlanTag::from_tci(0xa064));
        let v6 = FrameBuilder::v6(
            "2001:2::1".parse().unwrap(),
            "2001:2::2".parse().unwrap(),
            50000,
        );
        [v4, tagged, v6]
    }

    #[test]
    fn emit_then_parse_round_trips_with_a_good_icrc() {
        for b in builders() {
            let mut buf = [0u8; 256];
            let n = b.emit(&mut buf, &write_only(), b"hello").unwrap();
            let f = parse(&buf[..n]).unwrap().expect("a RoCEv2 frame");
            assert!(f.icrc_ok());
            assert_eq!(f.ip_pair(), b.ips);
            assert_eq!(f.udp.src_port, b.src_port);
            let p = IbPacket::new_checked(f.ib).unwrap();
            assert_eq!(p.payload(), b"hello");
            let mut back = IbPacketRepr::parse(&p).unwrap();
            back.bth.pad_count = 0;
            assert_eq!(back, write_only());
            // The kernel-written-path ICRC agrees for plain IPv4/IPv6 with ID 0 and DF.
            let path = IcrcPath {
                ips: b.ips,
                src_port: b.src_port,
                dst_port: UDP_PORT,
            };
            assert!(path.check(f.ib));
        }
    }

    #[test]
    fn udp_checksum_verifies() {
        for b in builders() {
            let mut buf = [0u8; 256];
            let n = b.emit(&mut buf, &write_only(), b"hello").unwrap();
            let f = parse(&buf[..n]).unwrap().unwrap();
            let l4_at = n - f.ib.len() - UDP_HEADER;
            let u = UdpPacket::new_checked(&buf[l4_at..n]).unwrap();
            let ok = match b.ips {
                IpPair::V4 { src, dst } => u.verify_checksum_v4(src, dst),
                IpPair::V6 { src, dst } => u.verify_checksum_v6(src, dst),
            };
            assert!(ok);
        }
    }

    #[test]
    fn any_flipped_covered_bit_breaks_the_icrc_and_masked_ones_do_not() {
        for b in [builders()[0], builders()[2]] {
            let mut buf = [0u8; 256];
            let n = b.emit(&mut buf, &write_only(), b"hello").unwrap();
            let f = parse(&buf[..n]).unwrap().unwrap();
            let (ip, udp, ib) = (f.ip_header.to_vec(), f.udp_header.to_vec(), f.ib.to_vec());
            let stored = f.stored_icrc().unwrap();
            let ib_end = ib.len() - 4;
            // Byte positions in the ICRC's view: IP header, then UDP, then the IB packet.
            let masked_ip: &[usize] = if f.ip_header.len() == 20 {
                &[1, 8, 10, 11] // TOS, TTL, header checksum
            } else {
                &[0, 1, 2, 3, 7] // traffic class + flow label (low nibble of byte 0), hop limit
            };
            for at in 0..ip.len() {
                for bit in 0..8 {
                    let mut x = ip.clone();
                    x[at] ^= 1 << bit;
                    // The version nibble of IPv6 byte 0 is covered; its low nibble is not.
                    let masked =
                        masked_ip.contains(&at) && !(ip.len() == 40 && at == 0 && bit >= 4);
                    let same = icrc(&x, &udp, &ib[..ib_end]).ok() == Some(stored);
                    assert_eq!(same, masked, "ip byte {at} bit {bit}");
                }
            }
            for at in 0..udp.len() {
                let mut x = udp.clone();
                x[at] ^= 0x01;
                let same = icrc(&ip, &x, &ib[..ib_end]).unwrap() == stored;
                assert_eq!(same, at >= 6, "udp byte {at}");
            }
            for at in 0..ib_end {
                let mut x = ib.clone();
                x[at] ^= 0x01;
                let same = icrc(&ip, &udp, &x[..ib_end]).unwrap() == stored;
                assert_eq!(same, at == 4, "ib byte {at}");
            }
        }
    }

    #[test]
    fn other_traffic_is_not_roce_and_broken_frames_are_errors() {
        let b = builders()[0];
        let mut buf = [0u8; 256];
        let n = b.emit(&mut buf, &write_only(), b"x").unwrap();
        let mut other_port = buf;
        other_port[36..38].copy_from_slice(&53u16.to_be_bytes());
        assert!(parse(&other_port[..n]).unwrap().is_none());
        let mut arp = buf;
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert!(parse(&arp[..n]).unwrap().is_none());
        for cut in 0..n {
            // Never a panic; a cut inside the headers is an error.
            let r = parse(&buf[..cut]);
            if cut < 42 {
                assert!(r.is_err(), "cut {cut}");
            }
        }
        assert!(b.wrap(&mut buf, 3).is_err());
        let before = buf;
        let too_long = |value| {
            Err(Error::Length {
                header: Header::Udp,
                field: Field::Payload,
                value,
            })
        };
        assert_eq!(b.wrap(&mut buf, usize::MAX), too_long(usize::MAX));
        assert_eq!(b.wrap(&mut buf, 70_000), too_long(70_000));
        assert_eq!(buf, before, "a refused wrap writes nothing");
        assert!(b.emit(&mut buf[..40], &write_only(), b"x").is_err());
    }

    #[test]
    fn random_frames_never_panic() {
        let b = builders()[2];
        let mut buf = [0u8; 256];
        let n = b.emit(&mut buf, &write_only(), b"hello").unwrap();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..50_000 {
            let mut f = buf[..n].to_vec();
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x as usize) % f.len();
                f[at] = (x >> 40) as u8;
            }
            f.truncate(((x >> 20) as usize) % (n + 1));
            if let Ok(Some(p)) = parse(&f) {
                let _ = (p.icrc_ok(), p.ip_pair());
            }
        }
    }
}
