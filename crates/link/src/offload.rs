//! What a NIC finishes for the sending stack, done here because a veth pair has no
//! NIC: the transport checksum the sender left to "hardware" (`CHECKSUM_PARTIAL`: the
//! field holds only the pseudo-header sum) and the segmentation of a TCP or UDP
//! super-frame the sender built for "hardware" segmentation (GSO/TSO, up to 64 KiB).
//!
//! A frame that crosses a real wire has both done by the sender's NIC. A frame that
//! crosses a veth into an `AF_PACKET` or `AF_XDP` socket arrives as the sender's stack
//! left it, because the kernel expects whoever consumes the skb to finish the job
//! (its own forwarding path does, in `validate_xmit_skb`). A router that forwards the
//! bytes unchanged delivers TCP segments with wrong checksums (the far host counts
//! `TcpInCsumErrors`) and frames longer than any MTU; so the frame links finish the
//! job on receive, as the NIC the frame never met would have, and count it
//! ([`crate::LinkStats::rx_csum_completed`], [`crate::LinkStats::rx_gso_segmented`]).
//!
//! This is the one place weft-link looks inside a frame: far enough (Ethernet, IPv4
//! or IPv6 with extension headers, TCP or UDP) to find the transport header, as the
//! NIC does.

use crate::{BufferPool, PacketBuf};
use weft_wire::checksum;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETH_HLEN: usize = 14;
const TCP: u8 = 6;
const UDP: u8 = 17;
/// Offset of the checksum field in a TCP and in a UDP header.
const TCP_CHECKSUM: usize = 16;
const UDP_CHECKSUM: usize = 6;
/// TCP flags that belong on one segment of a split super-frame only: CWR on the first
/// (RFC 3168 §6.1.2: once per window), FIN and PSH on the last.
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;
/// IPv6 extension headers we walk through to the transport header (RFC 8200 §4).
const HOP_BY_HOP: u8 = 0;
const ROUTING: u8 = 43;
const DEST_OPTS: u8 = 60;
/// Longest extension-header chain we follow.
const MAX_EXT_HEADERS: usize = 8;

/// Why a frame's offload work could not be finished (the frame is then dropped and
/// counted in [`crate::LinkStats::rx_dropped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadError {
    /// Not Ethernet + IPv4/IPv6 + TCP/UDP (an 802.1Q tag, another EtherType or
    /// protocol, a fragment), so the transport header cannot be found.
    NotTcpOrUdp,
    /// A header runs past the frame, or a length field disagrees with it.
    Truncated,
    /// The checksum start or field offset given by the kernel is outside the frame.
    ChecksumOffset {
        /// Where the checksummed region starts (from the frame's first byte).
        start: usize,
        /// The field's offset from `start`.
        offset: usize,
    },
    /// A segment size of 0, or a super-frame of a kind we do not split.
    Gso {
        /// The kernel's `virtio_net_hdr.gso_type`.
        gso_type: u8,
        /// The kernel's `virtio_net_hdr.gso_size`.
        gso_size: u16,
    },
    /// The pool had no buffer for a segment.
    NoBuffer,
}

impl std::fmt::Display for OffloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OffloadError::NotTcpOrUdp => f.write_str("not an IPv4/IPv6 TCP or UDP frame"),
            OffloadError::Truncated => f.write_str("a header runs past the frame"),
            OffloadError::ChecksumOffset { start, offset } => write!(
                f,
                "checksum start {start} + field offset {offset} is outside the frame"
            ),
            OffloadError::Gso { gso_type, gso_size } => write!(
                f,
                "cannot segment GSO type {gso_type:#x} with segment size {gso_size}"
            ),
            OffloadError::NoBuffer => f.write_str("no free buffer for a segment"),
        }
    }
}

impl std::error::Error for OffloadError {}

/// Where a frame's transport header is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Transport {
    /// Offset of the IP header.
    ip: usize,
    v6: bool,
    /// Offset of the TCP or UDP header.
    l4: usize,
    /// End of the IP packet; bytes after it are link padding.
    end: usize,
    /// TCP or UDP.
    protocol: u8,
}

impl Transport {
    fn checksum_field(&self) -> usize {
        self.l4
            + if self.protocol == TCP {
                TCP_CHECKSUM
            } else {
                UDP_CHECKSUM
            }
    }

    /// The pseudo-header sum for a transport segment of `len` bytes.
    fn pseudo(&self, frame: &[u8], len: usize) -> u16 {
        let ip = &frame[self.ip..];
        if self.v6 {
            let a = |at: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&ip[at..at + 16]);
                std::net::Ipv6Addr::from(b)
            };
            checksum::pseudo_header_v6(a(8), a(24), self.protocol, len as u32)
        } else {
            let a = |at: usize| std::net::Ipv4Addr::new(ip[at], ip[at + 1], ip[at + 2], ip[at + 3]);
            checksum::pseudo_header_v4(a(12), a(16), self.protocol, len as u16)
        }
    }

    /// The length of the TCP or UDP header.
    fn header_len(&self, frame: &[u8]) -> Result<usize, OffloadError> {
        let n = if self.protocol == TCP {
            let off = *frame.get(self.l4 + 12).ok_or(OffloadError::Truncated)?;
            usize::from(off >> 4) * 4
        } else {
            8
        };
        if n < 8 || self.l4 + n > self.end {
            return Err(OffloadError::Truncated);
        }
        Ok(n)
    }
}

fn be16(b: &[u8], at: usize) -> Result<u16, OffloadError> {
    b.get(at..at + 2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]))
        .ok_or(OffloadError::Truncated)
}

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Find the TCP or UDP header of an Ethernet frame.
fn locate(frame: &[u8]) -> Result<Transport, OffloadError> {
    let ip = ETH_HLEN;
    match be16(frame, 12)? {
        ETHERTYPE_IPV4 => {
            let vihl = *frame.get(ip).ok_or(OffloadError::Truncated)?;
            let ihl = usize::from(vihl & 0x0f) * 4;
            if vihl >> 4 != 4 || ihl < 20 || frame.len() < ip + ihl {
                return Err(OffloadError::Truncated);
            }
            let end = ip + usize::from(be16(frame, ip + 2)?);
            if end > frame.len() || end < ip + ihl {
                return Err(OffloadError::Truncated);
            }
            // More-fragments or an offset: the transport header is not whole here.
            if be16(frame, ip + 6)? & 0x3fff != 0 {
                return Err(OffloadError::NotTcpOrUdp);
            }
            let protocol = frame[ip + 9];
            if protocol != TCP && protocol != UDP {
                return Err(OffloadError::NotTcpOrUdp);
            }
            Ok(Transport {
                ip,
                v6: false,
                l4: ip + ihl,
                end,
                protocol,
            })
        }
        ETHERTYPE_IPV6 => {
            if frame.len() < ip + 40 || frame[ip] >> 4 != 6 {
                return Err(OffloadError::Truncated);
            }
            let end = ip + 40 + usize::from(be16(frame, ip + 4)?);
            if end > frame.len() {
                return Err(OffloadError::Truncated);
            }
            let mut next = frame[ip + 6];
            let mut at = ip + 40;
            for _ in 0..MAX_EXT_HEADERS {
                match next {
                    TCP | UDP => {
                        return Ok(Transport {
                            ip,
                            v6: true,
                            l4: at,
                            end,
                            protocol: next,
                        })
                    }
                    HOP_BY_HOP | ROUTING | DEST_OPTS => {
                        let h = frame.get(at..at + 2).ok_or(OffloadError::Truncated)?;
                        next = h[0];
                        at += (usize::from(h[1]) + 1) * 8;
                        if at > end {
                            return Err(OffloadError::Truncated);
                        }
                    }
                    _ => return Err(OffloadError::NotTcpOrUdp),
                }
            }
            Err(OffloadError::NotTcpOrUdp)
        }
        _ => Err(OffloadError::NotTcpOrUdp),
    }
}

/// Finish a checksum the sender left partial: the field at `start + offset` holds the
/// pseudo-header sum, and the checksum covers `start..end` (what a NIC does for
/// `CHECKSUM_PARTIAL`, and Linux's `skb_checksum_help`). A result of 0 is sent as
/// 0xffff, its other ones'-complement form, since 0 means "no checksum" to UDP.
fn complete_range(
    frame: &mut [u8],
    start: usize,
    offset: usize,
    end: usize,
) -> Result<(), OffloadError> {
    let bad = OffloadError::ChecksumOffset { start, offset };
    let field = start.checked_add(offset).ok_or(bad)?;
    if end > frame.len() || field + 2 > end {
        return Err(bad);
    }
    let sum = checksum::data(&frame[start..end]);
    let v = !sum;
    put16(frame, field, if v == 0 { 0xffff } else { v });
    Ok(())
}

/// Finish the partial transport checksum of `frame`, whose checksummed region starts
/// `start` bytes into the frame with the field `offset` bytes into it (the kernel's
/// `csum_start` and `csum_offset`). The region ends where the IP packet ends (link
/// padding excluded) when the frame parses as IP, else at the end of the frame.
pub fn complete_checksum_at(
    frame: &mut [u8],
    start: usize,
    offset: usize,
) -> Result<(), OffloadError> {
    let end = locate(frame).map_or(frame.len(), |t| t.end);
    complete_range(frame, start, offset, end)
}

/// Finish the partial checksum of a TCP or UDP frame the link knows to be partial
/// but without offsets (`AF_PACKET`'s `TP_STATUS_CSUMNOTREADY`).
pub fn complete_checksum(frame: &mut [u8]) -> Result<(), OffloadError> {
    let t = locate(frame)?;
    t.header_len(frame)?;
    complete_range(frame, t.l4, t.checksum_field() - t.l4, t.end)
}

/// For a link that cannot say whether the sender left a checksum partial (`AF_XDP`
/// reports no skb metadata): finish it when the field holds exactly the pseudo-header
/// sum, as Linux leaves it, and the checksum does not verify. A complete checksum is
/// never touched (it verifies); a corrupted frame is completed only in the 1 in 65536
/// case where its field happens to equal the pseudo-header sum. Cost: the sum over
/// the segment only for frames that pass the cheap test. True when it completed one.
pub fn complete_if_partial(frame: &mut [u8]) -> bool {
    let Ok(t) = locate(frame) else {
        return false;
    };
    if t.header_len(frame).is_err() {
        return false;
    }
    let field = t.checksum_field();
    let len = t.end - t.l4;
    let pseudo = t.pseudo(frame, len);
    if be16(frame, field) != Ok(pseudo) {
        return false;
    }
    let verifies = checksum::combine(&[pseudo, checksum::data(&frame[t.l4..t.end])]) == 0xffff;
    !verifies && complete_range(frame, t.l4, field - t.l4, t.end).is_ok()
}

/// `virtio_net_hdr.gso_type` values (include/uapi/linux/virtio_net.h).
pub mod gso {
    /// Not a super-frame.
    pub const NONE: u8 = 0;
    /// TCP over IPv4.
    pub const TCPV4: u8 = 1;
    /// TCP over IPv6.
    pub const TCPV6: u8 = 4;
    /// UDP segmentation (`UDP_SEGMENT`), either family.
    pub const UDP_L4: u8 = 5;
    /// Flag: the sender set ECN's CWR on the first segment only.
    pub const ECN: u8 = 0x80;
}

/// Split the TCP or UDP super-frame `frame` into frames of at most `gso_size` payload
/// bytes each, with every header fixed as a NIC's segmentation offload does (IPv4
/// total length, identification and header checksum; IPv6 payload length; TCP
/// sequence number and the flags of RFC 3168/793; UDP length; full transport
/// checksums). Segments are allocated from `pool` and appended to `out`; returns how
/// many.
pub fn segment(
    frame: &[u8],
    gso_type: u8,
    gso_size: u16,
    pool: &BufferPool,
    out: &mut Vec<PacketBuf>,
) -> Result<usize, OffloadError> {
    let gso_err = OffloadError::Gso { gso_type, gso_size };
    let t = locate(frame)?;
    let kind_ok = match gso_type & !gso::ECN {
        gso::TCPV4 => t.protocol == TCP && !t.v6,
        gso::TCPV6 => t.protocol == TCP && t.v6,
        gso::UDP_L4 => t.protocol == UDP,
        _ => false,
    };
    if !kind_ok || gso_size == 0 {
        return Err(gso_err);
    }
    let hdr_len = t.l4 + t.header_len(frame)?;
    let payload = &frame[hdr_len..t.end];
    let mss = usize::from(gso_size);
    let n = payload.len().div_ceil(mss).max(1);
    let first = out.len();
    let ident = be16(frame, t.ip + 4)?;
    let seq = frame
        .get(t.l4 + 4..t.l4 + 8)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or(OffloadError::Truncated)?;
    for i in 0..n {
        let chunk = payload
            .get(i * mss..((i + 1) * mss).min(payload.len()))
            .unwrap_or(&[]);
        let Some(mut b) = pool.alloc() else {
            out.truncate(first);
            return Err(OffloadError::NoBuffer);
        };
        let len = hdr_len + chunk.len();
        let Some(s) = b.spare_mut().get_mut(..len) else {
            out.truncate(first);
            return Err(gso_err);
        };
        s[..hdr_len].copy_from_slice(&frame[..hdr_len]);
        s[hdr_len..].copy_from_slice(chunk);
        if t.v6 {
            put16(s, t.ip + 4, (len - t.ip - 40) as u16);
        } else {
            put16(s, t.ip + 2, (len - t.ip) as u16);
            // Each segment is a datagram of its own (Linux's inet_gso_segment).
            put16(s, t.ip + 4, ident.wrapping_add(i as u16));
            put16(s, t.ip + 10, 0);
            let c = checksum::checksum(&s[t.ip..t.l4]);
            put16(s, t.ip + 10, c);
        }
        if t.protocol == TCP {
            let sq = seq.wrapping_add((i * mss) as u32);
            s[t.l4 + 4..t.l4 + 8].copy_from_slice(&sq.to_be_bytes());
            let flags = &mut s[t.l4 + 13];
            if i + 1 < n {
                *flags &= !(TCP_FIN | TCP_PSH);
            }
            if i > 0 {
                *flags &= !TCP_CWR;
            }
        } else {
            put16(s, t.l4 + 4, (len - t.l4) as u16);
        }
        let field = t.checksum_field();
        put16(s, field, t.pseudo(s, len - t.l4));
        complete_range(s, t.l4, field - t.l4, len)?;
        if !b.set_len(len) {
            out.truncate(first);
            return Err(gso_err);
        }
        out.push(b);
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4_frame(protocol: u8, payload: &[u8]) -> Vec<u8> {
        let l4_len = if protocol == TCP { 20 } else { 8 } + payload.len();
        let mut f = vec![0u8; 14 + 20 + l4_len];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + l4_len) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        ip[6] = 0x40; // DF
        ip[8] = 64;
        ip[9] = protocol;
        ip[12..16].copy_from_slice(&[198, 18, 1, 2]);
        ip[16..20].copy_from_slice(&[198, 18, 2, 2]);
        let c = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        fill_l4(&mut f, 34, protocol, payload);
        f
    }

    fn v6_frame(protocol: u8, payload: &[u8]) -> Vec<u8> {
        let l4_len = if protocol == TCP { 20 } else { 8 } + payload.len();
        let mut f = vec![0u8; 14 + 40 + l4_len];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        let ip = &mut f[14..54];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        ip[6] = protocol;
        ip[7] = 64;
        let src: std::net::Ipv6Addr = "2001:2:0:1::2".parse().unwrap();
        let dst: std::net::Ipv6Addr = "2001:2:0:2::2".parse().unwrap();
        ip[8..24].copy_from_slice(&src.octets());
        ip[24..40].copy_from_slice(&dst.octets());
        fill_l4(&mut f, 54, protocol, payload);
        f
    }

    fn fill_l4(f: &mut [u8], l4: usize, protocol: u8, payload: &[u8]) {
        f[l4..l4 + 2].copy_from_slice(&40000u16.to_be_bytes());
        f[l4 + 2..l4 + 4].copy_from_slice(&5201u16.to_be_bytes());
        if protocol == TCP {
            f[l4 + 4..l4 + 8].copy_from_slice(&0xfffff000u32.to_be_bytes());
            f[l4 + 12] = 5 << 4;
            f[l4 + 13] = TCP_CWR | TCP_PSH | TCP_FIN | 0x10;
            f[l4 + 14..l4 + 16].copy_from_slice(&64240u16.to_be_bytes());
            f[l4 + 20..].copy_from_slice(payload);
        } else {
            let len = (8 + payload.len()) as u16;
            f[l4 + 4..l4 + 6].copy_from_slice(&len.to_be_bytes());
            f[l4 + 8..].copy_from_slice(payload);
        }
    }

    /// The checksum as Linux leaves it for the NIC: the pseudo-header sum only.
    fn make_partial(f: &mut [u8]) -> Transport {
        let t = locate(f).expect("tcp or udp");
        let p = t.pseudo(f, t.end - t.l4);
        put16(f, t.checksum_field(), p);
        t
    }

    /// A full transport checksum computed independently: pseudo-header + segment
    /// with the field zeroed.
    fn reference_checksum(f: &[u8]) -> u16 {
        let t = locate(f).expect("tcp or udp");
        let mut seg = f[t.l4..t.end].to_vec();
        let at = t.checksum_field() - t.l4;
        seg[at..at + 2].copy_from_slice(&[0, 0]);
        let c = !checksum::combine(&[t.pseudo(f, seg.len()), checksum::data(&seg)]);
        if c == 0 {
            0xffff
        } else {
            c
        }
    }

    fn verifies(f: &[u8]) -> bool {
        let t = locate(f).expect("tcp or udp");
        let p = t.pseudo(f, t.end - t.l4);
        checksum::combine(&[p, checksum::data(&f[t.l4..t.end])]) == 0xffff
    }

    fn all_four() -> Vec<(&'static str, Vec<u8>)> {
        let payload: Vec<u8> = (0..301u32).map(|i| (i * 7 + 3) as u8).collect();
        vec![
            ("tcp/ipv4", v4_frame(TCP, &payload)),
            ("udp/ipv4", v4_frame(UDP, &payload)),
            ("tcp/ipv6", v6_frame(TCP, &payload)),
            ("udp/ipv6", v6_frame(UDP, &payload)),
        ]
    }

    #[test]
    fn a_partial_checksum_is_completed_for_tcp_and_udp_over_ipv4_and_ipv6() {
        for (name, mut f) in all_four() {
            let t = make_partial(&mut f);
            assert!(!verifies(&f), "{name}: a partial checksum does not verify");
            let want = reference_checksum(&f);
            let mut known = f.clone();
            complete_checksum(&mut known).expect(name);
            assert_eq!(be16(&known, t.checksum_field()), Ok(want), "{name}");
            assert!(verifies(&known), "{name}");
            // With the kernel's offsets (virtio_net_hdr csum_start/csum_offset).
            let mut at = f.clone();
            complete_checksum_at(&mut at, t.l4, t.checksum_field() - t.l4).expect(name);
            assert_eq!(at, known, "{name}: same result from the kernel's offsets");
            // Detected without metadata (AF_XDP).
            let mut guessed = f.clone();
            assert!(complete_if_partial(&mut guessed), "{name}: detected");
            assert_eq!(guessed, known, "{name}");
            // Link padding after the IP packet is not summed.
            let mut padded = f.clone();
            padded.extend_from_slice(&[0xab; 7]);
            complete_checksum(&mut padded).expect(name);
            assert_eq!(&padded[..f.len()], &known[..], "{name}: padding ignored");
        }
    }

    #[test]
    fn complete_or_corrupt_checksums_are_left_alone() {
        for (name, mut f) in all_four() {
            let t = make_partial(&mut f);
            let c = reference_checksum(&f);
            put16(&mut f, t.checksum_field(), c);
            assert!(verifies(&f), "{name}");
            let before = f.clone();
            assert!(
                !complete_if_partial(&mut f),
                "{name}: complete one untouched"
            );
            assert_eq!(f, before);
            put16(&mut f, t.checksum_field(), c ^ 0x0101);
            let before = f.clone();
            assert!(
                !complete_if_partial(&mut f),
                "{name}: corrupt one untouched"
            );
            assert_eq!(f, before);
        }
        // Not TCP/UDP, truncated, or offsets outside the frame: errors, no panic.
        let mut icmp = v4_frame(TCP, b"x");
        icmp[14 + 9] = 1;
        assert_eq!(complete_checksum(&mut icmp), Err(OffloadError::NotTcpOrUdp));
        let mut short = v4_frame(TCP, b"xyz");
        short.truncate(40);
        assert_eq!(complete_checksum(&mut short), Err(OffloadError::Truncated));
        let mut f = v4_frame(UDP, b"abc");
        let n = f.len();
        assert_eq!(
            complete_checksum_at(&mut f, n - 1, 6),
            Err(OffloadError::ChecksumOffset {
                start: n - 1,
                offset: 6
            })
        );
        assert!(complete_checksum_at(&mut f, usize::MAX, 6).is_err());
    }

    #[test]
    fn a_tcp_super_frame_is_split_into_segments_that_verify() {
        let pool = BufferPool::new(64, 2048);
        let payload: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
        for (v6, mut f) in [
            (false, v4_frame(TCP, &payload)),
            (true, v6_frame(TCP, &payload)),
        ] {
            make_partial(&mut f);
            let kind = if v6 { gso::TCPV6 } else { gso::TCPV4 };
            let mut out = Vec::new();
            let n = segment(&f, kind | gso::ECN, 1448, &pool, &mut out).expect("segment");
            assert_eq!(n, 3, "4000 bytes in 1448-byte segments");
            let mut joined = Vec::new();
            for (i, s) in out.iter().enumerate() {
                let t = locate(s).expect("segment parses");
                assert!(verifies(s), "segment {i} checksum");
                let seq = u32::from_be_bytes([s[t.l4 + 4], s[t.l4 + 5], s[t.l4 + 6], s[t.l4 + 7]]);
                assert_eq!(
                    seq,
                    0xfffff000u32.wrapping_add(i as u32 * 1448),
                    "seq wraps"
                );
                let flags = s[t.l4 + 13];
                assert_eq!(flags & TCP_CWR != 0, i == 0, "CWR on the first only");
                assert_eq!(
                    flags & (TCP_FIN | TCP_PSH) != 0,
                    i == 2,
                    "FIN/PSH on the last"
                );
                assert_eq!(flags & 0x10, 0x10, "ACK on all");
                if !v6 {
                    assert_eq!(checksum::data(&s[14..34]), 0xffff, "IPv4 header checksum");
                    assert_eq!(be16(s, 18), Ok(0x1234 + i as u16), "IPv4 id per segment");
                }
                assert!(t.end - t.l4 - 20 <= 1448, "no segment beyond gso_size");
                joined.extend_from_slice(&s[t.l4 + 20..t.end]);
            }
            assert_eq!(joined, payload, "payload intact and in order");
        }
    }

    #[test]
    fn a_udp_super_frame_is_split_with_its_own_lengths() {
        let pool = BufferPool::new(64, 2048);
        let payload: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        let mut f = v6_frame(UDP, &payload);
        make_partial(&mut f);
        let mut out = Vec::new();
        assert_eq!(segment(&f, gso::UDP_L4, 1200, &pool, &mut out), Ok(3));
        for s in &out {
            let t = locate(s).expect("parses");
            assert!(verifies(s));
            assert_eq!(usize::from(be16(s, t.l4 + 4).unwrap()), t.end - t.l4);
        }
        assert_eq!(out[2].len(), 14 + 40 + 8 + 100);
        // Kinds that do not match the frame, or segment size 0: refused.
        let mut out = Vec::new();
        assert!(segment(&f, gso::TCPV6, 1200, &pool, &mut out).is_err());
        assert!(segment(&f, gso::UDP_L4, 0, &pool, &mut out).is_err());
        assert!(out.is_empty());
        // A segment that does not fit a pool buffer: refused, nothing appended.
        let small = BufferPool::new(8, 256);
        assert!(segment(&f, gso::UDP_L4, 1200, &small, &mut out).is_err());
        assert!(out.is_empty());
    }
}
