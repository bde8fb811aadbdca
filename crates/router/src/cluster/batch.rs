//! The interconnect's message format: a batch is packets back to back, each behind a
//! 12-byte header that says how long it is and where it came from; the receiver
//! splits a message by walking the headers. The sender puts each header in its
//! packet buffer's headroom ([`prepend_header`]) and gathers header and frame with
//! one SGE, so a batch of `n` packets is one SEND with `n` SGEs.
//!
//! ```text
//!  0      1      2      3      4      5      6      7      8 ... 11
//! +------+------+------+------+------+------+------+------+-----------+
//! | 0xC1 | hops | frame length| ingress port| origin| 0   | bucket|seq|
//! +------+------+------+------+------+------+------+------+-----------+
//! ```
//!
//! - `hops`: interconnect crossings so far (a VLB packet crosses twice);
//! - `ingress port`: the cluster-wide id of the port the packet entered on (ICMP
//!   errors the egress node sends come from that port's address);
//! - `origin`: the ingress node; `bucket` (of the flow's 5-tuple hash, below 4096) and `seq` (per
//!   origin and bucket) let the egress node count reordering.
//!
//! Every message is hostile: a header with another first byte, a length past the
//! end of the message or below an Ethernet header ends the split, and the caller
//! counts what was left as one malformed drop.
#![forbid(unsafe_code)]

use weft_link::PacketBuf;

/// First byte of every per-packet header (format version 1).
pub const MAGIC: u8 = 0xC1;
/// Bytes of the per-packet header.
pub const HEADER_LEN: usize = 12;
/// Smallest frame carried: an Ethernet header.
pub const MIN_FRAME: usize = 14;

/// The per-packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketHeader {
    /// Interconnect crossings before this one.
    pub hops: u8,
    /// Frame length (bytes following the header).
    pub len: u16,
    /// Cluster-wide ingress port id.
    pub ingress_port: u16,
    /// Ingress node id.
    pub origin: u8,
    /// Flow bucket.
    pub bucket: u16,
    /// Sequence number of the packet in (origin, bucket).
    pub seq: u16,
}

impl PacketHeader {
    /// The 12 bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0] = MAGIC;
        h[1] = self.hops;
        h[2..4].copy_from_slice(&self.len.to_be_bytes());
        h[4..6].copy_from_slice(&self.ingress_port.to_be_bytes());
        h[6] = self.origin;
        h[8..10].copy_from_slice(&self.bucket.to_be_bytes());
        h[10..12].copy_from_slice(&self.seq.to_be_bytes());
        h
    }

    /// Parse a header from the first 12 bytes of `b`.
    pub fn decode(b: &[u8]) -> Result<PacketHeader, SplitError> {
        let h = b.get(..HEADER_LEN).ok_or(SplitError::Truncated)?;
        if h[0] != MAGIC || h[7] != 0 {
            return Err(SplitError::BadHeader);
        }
        let u16_at = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
        Ok(PacketHeader {
            hops: h[1],
            len: u16_at(2),
            ingress_port: u16_at(4),
            origin: h[6],
            bucket: u16_at(8),
            seq: u16_at(10),
        })
    }
}

/// Why a message could not be split further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitError {
    /// Fewer bytes left than a header, or than the header's length says.
    Truncated,
    /// A header's first byte is not [`MAGIC`] (or its reserved byte is not 0).
    BadHeader,
    /// A frame shorter than an Ethernet header.
    Runt,
}

/// The packets of one received message, in order; after the first error it yields
/// that error once and stops.
pub fn split(msg: &[u8]) -> Split<'_> {
    Split {
        rest: msg,
        failed: false,
    }
}

/// Iterator of [`split`].
#[derive(Debug)]
pub struct Split<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for Split<'a> {
    type Item = Result<(PacketHeader, &'a [u8]), SplitError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let r = (|| {
            let h = PacketHeader::decode(self.rest)?;
            let len = usize::from(h.len);
            if len < MIN_FRAME {
                return Err(SplitError::Runt);
            }
            let frame = self
                .rest
                .get(HEADER_LEN..HEADER_LEN + len)
                .ok_or(SplitError::Truncated)?;
            self.rest = &self.rest[HEADER_LEN + len..];
            Ok((h, frame))
        })();
        if r.is_err() {
            self.failed = true;
        }
        Some(r)
    }
}

/// Put `h` in front of the frame in `buf`, in its headroom: header and frame become
/// one run of bytes, one SGE. The header's length must be the frame's. False
/// (nothing changed) when the headroom is shorter than [`HEADER_LEN`].
#[must_use]
pub fn prepend_header(buf: &mut PacketBuf, h: &PacketHeader) -> bool {
    if !buf.prepend(HEADER_LEN) {
        return false;
    }
    buf[..HEADER_LEN].copy_from_slice(&h.encode());
    true
}

/// Build a message by copying into one contiguous buffer (the `memcpy` mode of the
/// benchmark, and tests): header and frame per packet.
pub fn encode_contiguous<'a>(
    packets: impl IntoIterator<Item = (PacketHeader, &'a [u8])>,
    out: &mut Vec<u8>,
) {
    for (h, f) in packets {
        out.extend_from_slice(&h.encode());
        out.extend_from_slice(f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(len: usize, seq: u16) -> PacketHeader {
        PacketHeader {
            hops: 0,
            len: len as u16,
            ingress_port: 3,
            origin: 2,
            bucket: 77,
            seq,
        }
    }

    #[test]
    fn a_prepended_header_and_its_frame_split_back() {
        let pool = weft_link::BufferPool::with_headroom(2, 256, 16);
        let mut b = pool.alloc().expect("pool");
        assert!(b.copy_from(&[9u8; 60]));
        assert!(prepend_header(&mut b, &hdr(60, 5)));
        assert_eq!(b.len(), HEADER_LEN + 60);
        let got: Vec<_> = split(&b).collect();
        assert_eq!(got, vec![Ok((hdr(60, 5), &[9u8; 60][..]))]);
        // Without 12 bytes of headroom nothing changes.
        let tight = weft_link::BufferPool::with_headroom(1, 256, 8);
        let mut t = tight.alloc().expect("pool");
        assert!(t.copy_from(&[1u8; 20]));
        assert!(!prepend_header(&mut t, &hdr(20, 1)));
        assert_eq!((t.len(), t.headroom()), (20, 8));
    }

    #[test]
    fn header_round_trips() {
        let h = PacketHeader {
            hops: 1,
            len: 1514,
            ingress_port: 65535,
            origin: 255,
            bucket: 4095,
            seq: 0xBEEF,
        };
        assert_eq!(PacketHeader::decode(&h.encode()), Ok(h));
    }

    #[test]
    fn a_batch_splits_into_its_packets_in_order() {
        let frames: Vec<Vec<u8>> = (0..32u8)
            .map(|i| vec![i; 14 + usize::from(i) * 40])
            .collect();
        let mut msg = Vec::new();
        encode_contiguous(
            frames
                .iter()
                .enumerate()
                .map(|(i, f)| (hdr(f.len(), i as u16), &f[..])),
            &mut msg,
        );
        let got: Vec<_> = split(&msg).collect::<Result<_, _>>().expect("split");
        assert_eq!(got.len(), 32);
        for (i, (h, f)) in got.iter().enumerate() {
            assert_eq!(h.seq, i as u16);
            assert_eq!(*f, &frames[i][..]);
        }
        assert_eq!(split(&[]).count(), 0);
    }

    #[test]
    fn hostile_messages_end_in_one_error_never_a_panic() {
        let f = [7u8; 60];
        let mut good = Vec::new();
        encode_contiguous([(hdr(60, 1), &f[..]), (hdr(60, 2), &f[..])], &mut good);
        // Cut anywhere: the packets before the cut, then Truncated.
        for cut in 1..good.len() {
            let v: Vec<_> = split(&good[..cut]).collect();
            let oks = v.iter().filter(|r| r.is_ok()).count();
            assert_eq!(oks, cut / (HEADER_LEN + 60), "cut {cut}");
            if cut % (HEADER_LEN + 60) != 0 {
                assert_eq!(v.last(), Some(&Err(SplitError::Truncated)), "cut {cut}");
            }
        }
        // A wrong magic, a reserved byte set, a runt, a length past the end.
        let mut bad = good.clone();
        bad[HEADER_LEN + 60] = 0x00;
        let v: Vec<_> = split(&bad).collect();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1], Err(SplitError::BadHeader));
        let mut bad = good.clone();
        bad[7] = 1;
        assert_eq!(
            split(&bad).collect::<Vec<_>>(),
            vec![Err(SplitError::BadHeader)]
        );
        let mut bad = good.clone();
        bad[2..4].copy_from_slice(&13u16.to_be_bytes());
        assert_eq!(split(&bad).collect::<Vec<_>>(), vec![Err(SplitError::Runt)]);
        let mut bad = good.clone();
        bad[2..4].copy_from_slice(&u16::MAX.to_be_bytes());
        assert_eq!(
            split(&bad).collect::<Vec<_>>(),
            vec![Err(SplitError::Truncated)]
        );
        // Random bytes: never a panic, and every packet found lies inside the message.
        let mut x: u64 = 0x1234_5678;
        for _ in 0..2000 {
            let n = (x % 300) as usize;
            let mut m = Vec::with_capacity(n);
            for _ in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                m.push(x as u8);
            }
            if n > 0 && x % 2 == 0 {
                m[0] = MAGIC;
            }
            let total: usize = split(&m)
                .filter_map(Result::ok)
                .map(|(_, f)| f.len() + HEADER_LEN)
                .sum();
            assert!(total <= m.len());
        }
    }
}
