//! The internet checksum (RFC 1071), the IPv4/IPv6 pseudo-header sums, and the
//! incremental update of RFC 1624.
//!
//! Sums here are ones'-complement sums folded to 16 bits and *not* complemented;
//! [`checksum`] and the `fill_checksum` methods of the headers complement them. A
//! header verifies when the folded sum over it, checksum field included, is `0xffff`.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Fold a wide accumulator into 16 bits with end-around carry (RFC 1071 §4.1).
#[inline]
pub const fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The folded ones'-complement sum of `data` as big-endian 16-bit words; an odd last
/// byte is padded with a zero on the right (RFC 1071 §1).
///
/// Fast path: 2^16 ≡ 1 (mod 2^16 − 1), so adding 32-bit big-endian words into a 64-bit
/// accumulator and folding at the end gives the same sum as adding 16-bit words
/// (RFC 1071 §2(B), "deferred carries"). The accumulator cannot overflow for any
/// buffer shorter than 2^34 bytes.
pub fn data(data: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        acc += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    let rest = chunks.remainder();
    let mut pairs = rest.chunks_exact(2);
    for p in &mut pairs {
        acc += u64::from(u16::from_be_bytes([p[0], p[1]]));
    }
    if let [last] = pairs.remainder() {
        acc += u64::from(*last) << 8;
    }
    fold(acc)
}

/// The ones'-complement sum of several partial sums.
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// The checksum field value for `bytes` (checksum field zeroed): `!data(bytes)`.
pub fn checksum(bytes: &[u8]) -> u16 {
    !data(bytes)
}

/// The sum of the IPv4 pseudo-header (RFC 768, RFC 793 §3.1): source, destination,
/// zero, protocol, and the upper-layer length.
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let s = u32::from(src);
    let d = u32::from(dst);
    fold(
        u64::from(s >> 16)
            + u64::from(s & 0xffff)
            + u64::from(d >> 16)
            + u64::from(d & 0xffff)
            + u64::from(protocol)
            + u64::from(length),
    )
}

/// The sum of the IPv6 pseudo-header (RFC 8200 §8.1): source, destination, 32-bit
/// upper-layer length, three zero bytes and the next header.
pub fn pseudo_header_v6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, length: u32) -> u16 {
    let mut acc: u64 = 0;
    for w in src.segments().iter().chain(dst.segments().iter()) {
        acc += u64::from(*w);
    }
    acc += u64::from(length >> 16) + u64::from(length & 0xffff) + u64::from(next_header);
    fold(acc)
}

/// RFC 1624 eqn. 3: the checksum field after one 16-bit word of the covered data
/// changed from `old_word` to `new_word`: `HC' = ~(~HC + ~m + m')`.
///
/// Eqn. 3 (not eqn. 2 of RFC 1141) is the one that never yields `0xffff` where a full
/// recompute yields `0x0000`, as long as `old_csum` was itself a correct checksum of
/// data that is not all zero.
#[inline]
pub const fn update16(old_csum: u16, old_word: u16, new_word: u16) -> u16 {
    !fold(!old_csum as u64 + !old_word as u64 + new_word as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The obvious 16-bit-word reference, to check the 32-bit fast path against.
    fn slow(bytes: &[u8]) -> u16 {
        let mut acc: u32 = 0;
        for c in bytes.chunks(2) {
            let w = if c.len() == 2 {
                u16::from_be_bytes([c[0], c[1]])
            } else {
                u16::from(c[0]) << 8
            };
            acc += u32::from(w);
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(data(&b), 0xddf2);
        assert_eq!(checksum(&b), !0xddf2);
    }

    #[test]
    fn known_ipv4_header() {
        // The classic example header (Wikipedia "IPv4 header checksum"): checksum b861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(data(&h), 0xffff);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(checksum(&h), 0xb861);
    }

    #[test]
    fn odd_length_and_empty() {
        assert_eq!(data(&[]), 0);
        assert_eq!(data(&[0xab]), 0xab00);
        assert_eq!(data(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(data(&[0xff; 7]), slow(&[0xff; 7]));
    }

    #[test]
    fn combine_is_sum_of_parts() {
        let b: Vec<u8> = (0..=255u8).collect();
        assert_eq!(combine(&[data(&b[..100]), data(&b[100..])]), data(&b));
        assert_eq!(combine(&[0xffff, 0x0001]), 0x0001);
        assert_eq!(combine(&[]), 0);
    }

    #[test]
    fn pseudo_headers_match_byte_layout() {
        let s = Ipv4Addr::new(192, 168, 0, 1);
        let d = Ipv4Addr::new(10, 0, 0, 200);
        let mut b = Vec::new();
        b.extend_from_slice(&s.octets());
        b.extend_from_slice(&d.octets());
        b.extend_from_slice(&[0, 17, 0x01, 0x2c]);
        assert_eq!(pseudo_header_v4(s, d, 17, 300), data(&b));

        let s6: Ipv6Addr = "fe80::1".parse().unwrap();
        let d6: Ipv6Addr = "ff02::1:ff00:2".parse().unwrap();
        let mut b = Vec::new();
        b.extend_from_slice(&s6.octets());
        b.extend_from_slice(&d6.octets());
        b.extend_from_slice(&70000u32.to_be_bytes());
        b.extend_from_slice(&[0, 0, 0, 58]);
        assert_eq!(pseudo_header_v6(s6, d6, 58, 70000), data(&b));
    }

    #[test]
    fn rfc1624_example() {
        // RFC 1624 §4: HC = 0xdd2f, m = 0x5555 -> m' = 0x3285 gives HC' = 0x0000.
        assert_eq!(update16(0xdd2f, 0x5555, 0x3285), 0x0000);
    }

    proptest! {
        #[test]
        fn fast_sum_equals_word_sum(b in proptest::collection::vec(any::<u8>(), 0..600)) {
            prop_assert_eq!(data(&b), slow(&b));
        }

        #[test]
        fn split_anywhere_at_even_offset(b in proptest::collection::vec(any::<u8>(), 0..300), at in 0usize..150) {
            let at = (at * 2).min(b.len() & !1);
            prop_assert_eq!(combine(&[data(&b[..at]), data(&b[at..])]), data(&b));
        }

        #[test]
        fn incremental_equals_recompute(
            mut b in proptest::collection::vec(any::<u8>(), 2..64).prop_map(|mut v| { v.truncate(v.len() & !1); v }),
            idx in 0usize..32, new_word in any::<u16>(),
        ) {
            // Word 0 has a nonzero byte so the covered data is never all zero.
            b[0] |= 0x40;
            let idx = idx % (b.len() / 2);
            let before = checksum(&b);
            let old_word = u16::from_be_bytes([b[idx * 2], b[idx * 2 + 1]]);
            let new_word = if idx == 0 { new_word | 0x4000 } else { new_word };
            b[idx * 2..idx * 2 + 2].copy_from_slice(&new_word.to_be_bytes());
            prop_assert_eq!(update16(before, old_word, new_word), checksum(&b));
        }
    }
}
