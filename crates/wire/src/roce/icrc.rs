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
        self.check_id(ib_packet, 1, &mut None).is_some()
    }

    /// The IPv4 identification below `ids` for which the last four bytes of
    /// `ib_packet` hold its ICRC on this path, or `None`.
    ///
    /// A UDP GSO send gives its segments consecutive identifications (0, 1, 2, … on
    /// weft's unconnected DF sockets), and a receiver that takes the send whole
    /// (`UDP_GRO`) never sees them; so a receiver accepts any identification below
    /// [`GSO_MAX_SEGMENTS`]. Identification 0 costs one CRC, as [`IcrcPath::check`];
    /// any other costs a few XORs more, with the deltas for this packet length kept
    /// in `cache` between calls. Accepting 64 identifications instead of one makes a
    /// corrupted packet pass with probability 2^-26 instead of 2^-32. IPv6 paths have
    /// no identification: only 0 is returned.
    pub fn check_id(
        &self,
        ib_packet: &[u8],
        ids: u16,
        cache: &mut Option<Ipv4IdDeltas>,
    ) -> Option<u16> {
        match self.icrc_diff(ib_packet)? {
            (_, 0) => Some(0),
            _ if ids <= 1 => None,
            (n, diff) => {
                let d = self.id_deltas(n, cache)?;
                (1..ids).find(|&id| d.delta(id) == diff)
            }
        }
    }

    /// The IPv4 identification, whatever it is, for which the last four bytes of
    /// `ib_packet` hold its ICRC on this path, or `None`; on IPv6, `Some(0)` when the
    /// ICRC is right.
    ///
    /// For peers that number their IPv4 packets, as rdma_rxe does (a counter per
    /// address pair), when the receiver cannot see the IP header (a UDP socket):
    /// every covered byte but the identification is still checked, but a corrupted
    /// packet passes with probability 2^-16 instead of 2^-32. The identification is
    /// solved from the ICRC ([`Ipv4IdDeltas::solve`]), not searched for; `cache` as
    /// in [`IcrcPath::check_id`].
    pub fn check_any_id(&self, ib_packet: &[u8], cache: &mut Option<Ipv4IdDeltas>) -> Option<u16> {
        match self.icrc_diff(ib_packet)? {
            (_, 0) => Some(0),
            (n, diff) => self.id_deltas(n, cache)?.solve(diff),
        }
    }

    /// The length of `ib_packet` before its ICRC, and the XOR of the ICRC computed
    /// for identification 0 with the one it carries (0: right as it is); `None` for
    /// a packet too short to have both.
    fn icrc_diff(&self, ib_packet: &[u8]) -> Option<(usize, u32)> {
        if ib_packet.len() < len::BTH + len::ICRC {
            return None;
        }
        let n = ib_packet.len() - len::ICRC;
        let t = &ib_packet[n..];
        let diff = self.icrc(&ib_packet[..n]).ok()? ^ u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
        Some((n, diff))
    }

    /// The identification deltas for `n`-byte packets, from `cache` when it holds
    /// that length; `None` on IPv6, which has no identification.
    fn id_deltas<'c>(
        &self,
        n: usize,
        cache: &'c mut Option<Ipv4IdDeltas>,
    ) -> Option<&'c Ipv4IdDeltas> {
        if !matches!(self.ips, IpPair::V4 { .. }) {
            return None;
        }
        if cache.as_ref().is_none_or(|d| d.ib_len != n) {
            *cache = Some(Ipv4IdDeltas::new(n));
        }
        cache.as_ref()
    }
}

/// The most segments Linux puts in one UDP GSO send (`UDP_MAX_SEGMENTS`).
pub const GSO_MAX_SEGMENTS: u16 = 64;

/// The reflected CRC-32 polynomial (IEEE 802.3).
const POLY: u32 = 0xedb8_8320;

/// `a · b mod P` for polynomials in CRC-32's reflected form (bit 31 is x^0).
fn mul_mod_p(a: u32, mut b: u32) -> u32 {
    let mut p = 0;
    for i in 0..32 {
        if a & (1 << (31 - i)) != 0 {
            p ^= b;
        }
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    p
}

/// `x^(8n) mod P`: appending `n` zero bytes to a message multiplies its raw CRC
/// (no pre- or post-inversion) by this.
fn x_pow_8n(mut n: usize) -> u32 {
    let mut result = 1 << 31; // 1
    let mut base = 1 << 23; // x^8
    while n > 0 {
        if n & 1 != 0 {
            result = mul_mod_p(result, base);
        }
        base = mul_mod_p(base, base);
        n >>= 1;
    }
    result
}

/// The raw CRC (zero start, no final inversion) of one byte.
fn raw_crc_byte(v: u8) -> u32 {
    let mut c = u32::from(v);
    for _ in 0..8 {
        c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
    }
    c
}

/// How the ICRC of an IPv4 RoCEv2 packet of one length changes with its IPv4
/// identification (the one covered field a GSO send varies).
///
/// CRC-32 is affine: for two messages of equal length, `crc(a) ^ crc(b)` is the raw
/// CRC of `a ^ b`. Changing the identification from 0 to `id` therefore changes the
/// ICRC by a value that depends only on `id` and on how many bytes follow the field,
/// and is the XOR of one value per set bit of `id`. The sixteen per-bit values are
/// computed once per length (a few hundred instructions); [`Ipv4IdDeltas::delta`] is
/// then a handful of XORs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4IdDeltas {
    /// Bytes from the BTH up to, not including, the ICRC.
    ib_len: usize,
    /// The ICRC change for each bit of the identification.
    bits: [u32; 16],
    /// The same columns in echelon form for [`Ipv4IdDeltas::solve`]: `basis[p]` is a
    /// combination of columns (its identification bits in `.1`) whose highest set
    /// bit is `p`. Built once per length, not per packet.
    basis: [(u32, u16); 32],
}

impl Ipv4IdDeltas {
    /// The deltas for packets of `ib_len` bytes from the BTH up to, not including, the
    /// ICRC, on an IPv4 path without options.
    pub fn new(ib_len: usize) -> Ipv4IdDeltas {
        // Covered bytes: 8 (LRH) + 20 (IPv4) + 8 (UDP) + ib_len; the identification
        // is at 12..14, big-endian.
        let after_low = 8 + 20 + 8 + ib_len - 14; // zero bytes after byte 13
        let shift_low = x_pow_8n(after_low);
        let shift_high = mul_mod_p(shift_low, 1 << 23); // one byte more: byte 12
        let mut bits = [0; 16];
        for (b, slot) in bits.iter_mut().enumerate() {
            let (shift, bit) = if b < 8 {
                (shift_low, b)
            } else {
                (shift_high, b - 8)
            };
            *slot = mul_mod_p(shift, raw_crc_byte(1 << bit));
        }
        let mut basis = [(0u32, 0u16); 32];
        for (b, &col) in bits.iter().enumerate() {
            let (mut v, mut t) = (col, 1u16 << b);
            while v != 0 {
                let p = 31 - v.leading_zeros() as usize;
                if basis[p].0 == 0 {
                    basis[p] = (v, t);
                    break;
                }
                v ^= basis[p].0;
                t ^= basis[p].1;
            }
        }
        Ipv4IdDeltas {
            ib_len,
            bits,
            basis,
        }
    }

    /// The length these deltas are for.
    pub fn ib_len(&self) -> usize {
        self.ib_len
    }

    /// The identification `id` whose [`Ipv4IdDeltas::delta`] is `diff`, if one is.
    ///
    /// The delta is linear over GF(2) in the sixteen bits of the identification, so
    /// this solves that system (Gaussian elimination on the sixteen 32-bit columns)
    /// instead of trying 65 536 values. The columns are independent — CRC-32 detects
    /// every error burst of 32 bits or fewer, and the identification is a 16-bit
    /// burst — so the answer, when there is one, is unique. A random `diff` has one
    /// with probability 2^-16.
    pub fn solve(&self, diff: u32) -> Option<u16> {
        let (mut rest, mut id) = (diff, 0u16);
        while rest != 0 {
            let p = 31 - rest.leading_zeros() as usize;
            let (v, t) = self.basis[p];
            if v == 0 {
                return None;
            }
            rest ^= v;
            id ^= t;
        }
        Some(id)
    }

    /// What to XOR into the ICRC computed for identification 0 to get the ICRC for
    /// identification `id`.
    pub fn delta(&self, id: u16) -> u32 {
        let mut d = 0;
        let mut rest = id;
        while rest != 0 {
            d ^= self.bits[rest.trailing_zeros() as usize];
            rest &= rest - 1;
        }
        d
    }

    /// Rewrite the ICRC in the last four bytes of `ib_packet` (computed for
    /// identification 0, `ib_len + 4` bytes long) for identification `id`. False, and
    /// nothing written, when the length does not match.
    pub fn apply(&self, ib_packet: &mut [u8], id: u16) -> bool {
        if ib_packet.len() != self.ib_len + len::ICRC {
            return false;
        }
        let t = &mut ib_packet[self.ib_len..];
        let c = u32::from_le_bytes([t[0], t[1], t[2], t[3]]) ^ self.delta(id);
        t.copy_from_slice(&c.to_le_bytes());
        true
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
    fn id_deltas_give_the_icrc_for_every_identification() {
        let path = IcrcPath::v4(
            Ipv4Addr::new(198, 18, 0, 1),
            Ipv4Addr::new(198, 18, 0, 2),
            49152,
        );
        for ib_len in [12usize, 40, 1037, 4108] {
            let ib: Vec<u8> = (0..ib_len).map(|i| (i * 31 + 7) as u8).collect();
            let zero = path.icrc(&ib).unwrap();
            let d = Ipv4IdDeltas::new(ib_len);
            let udp_len = (8 + ib_len + 4) as u16;
            let mut udp = [0u8; 8];
            udp[0..2].copy_from_slice(&49152u16.to_be_bytes());
            udp[2..4].copy_from_slice(&4791u16.to_be_bytes());
            udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
            for id in [0u16, 1, 2, 3, 63, 64, 255, 256, 0x8001, 0xffff] {
                let mut ip = [0u8; 20];
                ip[0] = 0x45;
                ip[2..4].copy_from_slice(&(20 + udp_len).to_be_bytes());
                ip[4..6].copy_from_slice(&id.to_be_bytes());
                ip[6] = 0x40;
                ip[9] = 17;
                ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
                ip[16..20].copy_from_slice(&[198, 18, 0, 2]);
                let want = icrc(&ip, &udp, &ib).unwrap();
                assert_eq!(zero ^ d.delta(id), want, "len {ib_len} id {id}");
                let mut pkt = ib.clone();
                pkt.extend_from_slice(&zero.to_le_bytes());
                assert!(d.apply(&mut pkt, id));
                assert_eq!(pkt[ib_len..], want.to_le_bytes());
                let mut cache = None;
                let found = path.check_id(&pkt, GSO_MAX_SEGMENTS, &mut cache);
                if id < GSO_MAX_SEGMENTS {
                    assert_eq!(found, Some(id));
                } else {
                    assert_eq!(found, None, "outside the accepted range");
                }
                assert_eq!(
                    path.check(&pkt),
                    id == 0,
                    "check takes identification 0 only"
                );
            }
        }
        assert!(
            !Ipv4IdDeltas::new(12).apply(&mut [0u8; 17], 1),
            "wrong length"
        );
    }

    #[test]
    fn any_identification_is_solved_from_the_icrc_and_corruption_still_fails() {
        let path = IcrcPath::v4(
            Ipv4Addr::new(198, 18, 0, 2),
            Ipv4Addr::new(198, 18, 0, 1),
            53_201,
        );
        for ib_len in [12usize, 28, 1036, 4124] {
            let ib: Vec<u8> = (0..ib_len).map(|i| (i * 13 + 5) as u8).collect();
            let zero = path.icrc(&ib).unwrap();
            let d = Ipv4IdDeltas::new(ib_len);
            let mut cache = None;
            for id in [0u16, 1, 64, 0x1234, 0x8000, 0xbeef, 0xffff] {
                let mut pkt = ib.clone();
                pkt.extend_from_slice(&(zero ^ d.delta(id)).to_le_bytes());
                assert_eq!(
                    path.check_any_id(&pkt, &mut cache),
                    Some(id),
                    "len {ib_len}"
                );
                // Any covered byte flipped: no identification explains the ICRC
                // (2^-16 by chance; these are fixed, checked values).
                for at in [0, 7, ib_len / 2, ib_len - 1] {
                    let mut bad = pkt.clone();
                    bad[at] ^= 0x10;
                    let got = path.check_any_id(&bad, &mut cache);
                    assert!(got.is_none(), "len {ib_len} id {id} byte {at}: {got:?}");
                }
            }
        }
        // IPv6 has no identification: only the exact ICRC passes.
        let v6 = IcrcPath::v6(
            "2001:2::2".parse().unwrap(),
            "2001:2::1".parse().unwrap(),
            1,
        );
        let mut p6 = BTH.to_vec();
        p6.extend_from_slice(&v6.icrc(&BTH).unwrap().to_le_bytes());
        assert_eq!(v6.check_any_id(&p6, &mut None), Some(0));
        p6[12] ^= 1;
        assert_eq!(v6.check_any_id(&p6, &mut None), None);
    }

    #[test]
    fn a_corrupted_segment_matches_no_identification() {
        let path = IcrcPath::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 1);
        let d = Ipv4IdDeltas::new(100);
        let mut cache = Some(d);
        let mut pkt = vec![5u8; 104];
        path.fill(&mut pkt).unwrap();
        d.apply(&mut pkt, 9);
        assert_eq!(path.check_id(&pkt, GSO_MAX_SEGMENTS, &mut cache), Some(9));
        for i in [0, 13, 50, 99, 101] {
            let mut bad = pkt.clone();
            bad[i] ^= 0x10;
            assert_eq!(path.check_id(&bad, GSO_MAX_SEGMENTS, &mut cache), None);
        }
        let v6 = IcrcPath::v6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST, 1);
        let mut p6 = vec![5u8; 104];
        v6.fill(&mut p6).unwrap();
        assert_eq!(v6.check_id(&p6, GSO_MAX_SEGMENTS, &mut None), Some(0));
        d.apply(&mut p6, 1);
        assert_eq!(
            v6.check_id(&p6, GSO_MAX_SEGMENTS, &mut None),
            None,
            "IPv6: 0 only"
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
