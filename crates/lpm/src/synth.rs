//! Seeded synthetic route tables with the prefix-length mix of a real full table,
//! so that tests and benchmarks run without the real file.
//!
//! Lengths are drawn from the histogram of the `bgpas.lpm` table shipped with the
//! `iptrie` crate (1 072 529 IPv4 and 176 388 IPv6 routes). Addresses imitate the
//! structure that makes real tables compressible or not: about a third of the
//! routes are more-specifics of earlier routes (half of them with the parent's
//! next hop), a quarter are the adjacent sibling of the previous route of the same
//! length with the same next hop (de-aggregated /24s), and the rest are fresh
//! allocations in unicast space (1.0.0.0–223.255.255.255, 2000::/4). Next hops
//! are skewed like origin ASes: one distinct next hop per ~14 routes, a few very
//! common.

use std::collections::HashSet;

use crate::{Address, NextHop, Prefix};

/// IPv4 `(length, routes)` in the real table.
pub const V4_LENGTHS: &[(u8, u32)] = &[
    (8, 19),
    (9, 14),
    (10, 38),
    (11, 103),
    (12, 302),
    (13, 578),
    (14, 1194),
    (15, 2053),
    (16, 13414),
    (17, 8141),
    (18, 13694),
    (19, 24715),
    (20, 42430),
    (21, 53632),
    (22, 111840),
    (23, 103473),
    (24, 564494),
    (25, 9848),
    (26, 180),
    (27, 17223),
    (28, 3066),
    (29, 1574),
    (30, 80482),
    (31, 12490),
    (32, 7529),
];

/// IPv6 `(length, routes)` in the real table.
pub const V6_LENGTHS: &[(u8, u32)] = &[
    (16, 1),
    (19, 1),
    (20, 13),
    (21, 3),
    (22, 7),
    (23, 7),
    (24, 30),
    (25, 8),
    (26, 15),
    (27, 20),
    (28, 198),
    (29, 4288),
    (30, 597),
    (31, 301),
    (32, 22669),
    (33, 3089),
    (34, 2612),
    (35, 1002),
    (36, 6200),
    (37, 913),
    (38, 1666),
    (39, 1476),
    (40, 13963),
    (41, 938),
    (42, 4917),
    (43, 1075),
    (44, 15460),
    (45, 1901),
    (46, 3428),
    (47, 3853),
    (48, 82899),
    (52, 8),
    (59, 8),
    (60, 3),
    (64, 183),
    (80, 6),
    (96, 1),
    (126, 8),
    (127, 215),
    (128, 2400),
];

/// SplitMix64: small, seeded, good enough to spread addresses.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Next 128 random bits.
    pub fn next_u128(&mut self) -> u128 {
        (u128::from(self.next_u64()) << 64) | u128::from(self.next_u64())
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn generate<A: Address>(
    n: usize,
    seed: u64,
    lengths: &[(u8, u32)],
    fresh: impl Fn(&mut Rng) -> u128,
) -> Vec<(Prefix<A>, NextHop)> {
    let mut rng = Rng::new(seed);
    let total: u64 = lengths.iter().map(|&(_, c)| u64::from(c)).sum();
    let pick_len = |rng: &mut Rng| {
        let mut r = rng.below(total);
        for &(l, c) in lengths {
            if r < u64::from(c) {
                return l;
            }
            r -= u64::from(c);
        }
        lengths[lengths.len() - 1].0
    };
    let hops = (n / 14).max(16) as f64;
    let pick_nh = |rng: &mut Rng| NextHop((hops * rng.unit().powi(3)) as u32);
    let mut seen: HashSet<(u128, u8)> = HashSet::with_capacity(n);
    let mut out: Vec<(Prefix<A>, NextHop)> = Vec::with_capacity(n);
    let mut last_of_len: Vec<Option<usize>> = vec![None; A::BITS as usize + 1];
    let mut guard = 0usize;
    while out.len() < n && guard < n * 20 + 1000 {
        guard += 1;
        let len = pick_len(&mut rng);
        let roll = rng.unit();
        let (addr, nh) = if roll < 0.33 && !out.is_empty() {
            // More-specific of an earlier, shorter route.
            let parent = out[rng.below(out.len() as u64) as usize];
            if parent.0.len() >= len {
                continue;
            }
            let host = crate::table::host_mask(A::BITS, parent.0.len());
            let addr = parent.0.addr().widen() | (rng.next_u128() & host);
            let nh = if rng.unit() < 0.5 {
                parent.1
            } else {
                pick_nh(&mut rng)
            };
            (addr, nh)
        } else if roll < 0.58 && last_of_len[usize::from(len)].is_some() {
            // Adjacent sibling of the previous route of this length, same next hop.
            let (p, nh) = out[last_of_len[usize::from(len)].unwrap_or(0)];
            let size = crate::table::host_mask(A::BITS, len).wrapping_add(1);
            (p.addr().widen().wrapping_add(size) & A::MAX, nh)
        } else {
            (fresh(&mut rng), pick_nh(&mut rng))
        };
        let Ok(p) = Prefix::new(A::narrow(addr), len) else {
            continue;
        };
        if seen.insert((p.addr().widen(), len)) {
            last_of_len[usize::from(len)] = Some(out.len());
            out.push((p, nh));
        }
    }
    out
}

/// `n` distinct IPv4 routes from `seed`.
pub fn v4(n: usize, seed: u64) -> Vec<(Prefix<u32>, NextHop)> {
    generate(n, seed, V4_LENGTHS, |r| {
        // 1.0.0.0 .. 223.255.255.255
        u128::from(0x0100_0000 + r.below(0xe000_0000 - 0x0100_0000))
    })
}

/// `n` distinct IPv6 routes from `seed`.
pub fn v6(n: usize, seed: u64) -> Vec<(Prefix<u128>, NextHop)> {
    generate(n, seed, V6_LENGTHS, |r| {
        (0x2u128 << 124) | (r.next_u128() >> 4)
    })
}

/// `n` addresses for lookups: a mix of uniformly random addresses and addresses
/// inside the given routes (first, last, and random inside), so that both the
/// empty and the dense parts of the table are exercised.
pub fn addresses<A: Address>(routes: &[(Prefix<A>, NextHop)], n: usize, seed: u64) -> Vec<A> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let k = rng.below(4);
            if k == 0 || routes.is_empty() {
                return A::narrow(rng.next_u128() & A::MAX);
            }
            let p = routes[rng.below(routes.len() as u64) as usize].0;
            match k {
                1 => p.first(),
                2 => p.last(),
                _ => A::narrow(
                    p.first().widen()
                        | (rng.next_u128() & crate::table::host_mask(A::BITS, p.len())),
                ),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_distinct_and_counted() {
        let a = v4(20_000, 7);
        let b = v4(20_000, 7);
        assert_eq!(a, b);
        assert_eq!(a.len(), 20_000);
        let set: HashSet<_> = a.iter().map(|r| r.0).collect();
        assert_eq!(set.len(), a.len());
        let c = v4(20_000, 8);
        assert_ne!(a, c);
        let s = v6(5_000, 1);
        assert_eq!(s.len(), 5_000);
        assert!(s.iter().all(|r| r.0.addr() >> 124 == 2));
    }

    #[test]
    fn length_mix_follows_the_real_table() {
        let a = v4(50_000, 3);
        let share24 = a.iter().filter(|r| r.0.len() == 24).count() as f64 / a.len() as f64;
        // 564 494 / 1 072 529 = 0.526 in the real table.
        assert!((0.45..0.60).contains(&share24), "{share24}");
    }
}
