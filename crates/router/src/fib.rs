//! The forwarding information base: prefixes to next hops, IPv4 and IPv6.
//!
//! The table behind [`Fib`] is a reference longest-prefix match — one hash map per
//! prefix length, probed from the longest length present down — simple enough to be
//! obviously right, and the oracle the fast weft-lpm tables are checked against.
//! Next hops are interned: a route stores a 32-bit index, so a full BGP table with a
//! handful of next hops costs one small table of [`NextHop`]s.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Index of a router port.
pub type PortId = usize;

/// Where a route sends a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NextHop {
    /// Egress port.
    pub port: PortId,
    /// The neighbour to hand the packet to; `None` for a connected route, where the
    /// neighbour is the packet's destination itself.
    pub via: Option<IpAddr>,
}

/// An IP prefix with its host bits cleared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpPrefix {
    addr: IpAddr,
    len: u8,
}

/// Why a prefix did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixError(pub String);

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad prefix: {}", self.0)
    }
}

impl std::error::Error for PrefixError {}

impl IpPrefix {
    /// `addr/len` with host bits cleared; `None` when `len` is too long.
    pub fn new(addr: IpAddr, len: u8) -> Option<IpPrefix> {
        match addr {
            IpAddr::V4(a) if len <= 32 => Some(IpPrefix {
                addr: IpAddr::V4(Ipv4Addr::from(u32::from(a) & mask32(len))),
                len,
            }),
            IpAddr::V6(a) if len <= 128 => Some(IpPrefix {
                addr: IpAddr::V6(Ipv6Addr::from(u128::from(a) & mask128(len))),
                len,
            }),
            _ => None,
        }
    }
    /// The network address.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }
    /// The prefix length.
    pub fn len(&self) -> u8 {
        self.len
    }
    /// True for a default route (length 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// True when `a` is inside the prefix.
    pub fn contains(&self, a: IpAddr) -> bool {
        IpPrefix::new(a, self.len).is_some_and(|p| p.addr == self.addr)
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for IpPrefix {
    type Err = PrefixError;
    /// `a.b.c.d/n`, `x:y::/n`; a bare address is a host prefix.
    fn from_str(s: &str) -> Result<IpPrefix, PrefixError> {
        let err = || PrefixError(s.to_string());
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.trim().parse().map_err(|_| err())?;
        let len = match l {
            Some(l) => l.trim().parse().map_err(|_| err())?,
            None if addr.is_ipv4() => 32,
            None => 128,
        };
        IpPrefix::new(addr, len).ok_or_else(err)
    }
}

const fn mask32(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len as u32)
    }
}

const fn mask128(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - len as u32)
    }
}

/// A multiplicative hasher for integer keys (keys are prefixes, not attacker-chosen
/// flow keys: the table is written by the operator).
#[derive(Debug, Default, Clone, Copy)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (u64::from(v) ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_u128(&mut self, v: u128) {
        let x = (v as u64) ^ ((v >> 64) as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
        self.0 = (x ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;

/// One address family: a map per prefix length.
#[derive(Debug, Clone)]
struct Table<K> {
    by_len: Vec<IntMap<K, u32>>,
    /// Lengths with at least one prefix, longest first.
    present: Vec<u8>,
}

impl<K: Copy + Eq + std::hash::Hash> Table<K> {
    fn new(bits: usize) -> Table<K> {
        Table {
            by_len: (0..=bits).map(|_| IntMap::default()).collect(),
            present: Vec::new(),
        }
    }
    fn refresh_present(&mut self) {
        self.present = (0..self.by_len.len())
            .rev()
            .filter(|&l| !self.by_len[l].is_empty())
            .map(|l| l as u8)
            .collect();
    }
    fn insert(&mut self, key: K, len: u8, nh: u32) -> Option<u32> {
        let m = &mut self.by_len[usize::from(len)];
        let was_empty = m.is_empty();
        let old = m.insert(key, nh);
        if was_empty {
            self.refresh_present();
        }
        old
    }
    fn remove(&mut self, key: K, len: u8) -> Option<u32> {
        let m = &mut self.by_len[usize::from(len)];
        let old = m.remove(&key);
        if m.is_empty() && old.is_some() {
            self.refresh_present();
        }
        old
    }
    fn len(&self) -> usize {
        self.by_len.iter().map(HashMap::len).sum()
    }
}

/// The routing table the data plane reads.
#[derive(Debug, Clone)]
pub struct Fib {
    v4: Table<u32>,
    v6: Table<u128>,
    next_hops: Vec<NextHop>,
    nh_index: HashMap<NextHop, u32>,
}

impl Default for Fib {
    fn default() -> Self {
        Fib::new()
    }
}

impl Fib {
    /// An empty table.
    pub fn new() -> Fib {
        Fib {
            v4: Table::new(32),
            v6: Table::new(128),
            next_hops: Vec::new(),
            nh_index: HashMap::new(),
        }
    }

    fn intern(&mut self, nh: NextHop) -> u32 {
        if let Some(&i) = self.nh_index.get(&nh) {
            return i;
        }
        let i = self.next_hops.len() as u32;
        self.next_hops.push(nh);
        self.nh_index.insert(nh, i);
        i
    }

    /// Add or replace a route; returns the next hop it replaced.
    pub fn insert(&mut self, prefix: IpPrefix, nh: NextHop) -> Option<NextHop> {
        let i = self.intern(nh);
        let old = match prefix.addr {
            IpAddr::V4(a) => self.v4.insert(u32::from(a), prefix.len, i),
            IpAddr::V6(a) => self.v6.insert(u128::from(a), prefix.len, i),
        };
        old.map(|o| self.next_hops[o as usize])
    }

    /// Remove a route; returns its next hop.
    pub fn remove(&mut self, prefix: IpPrefix) -> Option<NextHop> {
        let old = match prefix.addr {
            IpAddr::V4(a) => self.v4.remove(u32::from(a), prefix.len),
            IpAddr::V6(a) => self.v6.remove(u128::from(a), prefix.len),
        };
        old.map(|o| self.next_hops[o as usize])
    }

    /// Longest-prefix match for an IPv4 destination.
    #[inline]
    pub fn lookup_v4(&self, dst: Ipv4Addr) -> Option<NextHop> {
        let d = u32::from(dst);
        for &len in &self.v4.present {
            if let Some(&i) = self.v4.by_len[usize::from(len)].get(&(d & mask32(len))) {
                return self.next_hops.get(i as usize).copied();
            }
        }
        None
    }

    /// Longest-prefix match for an IPv6 destination.
    #[inline]
    pub fn lookup_v6(&self, dst: Ipv6Addr) -> Option<NextHop> {
        let d = u128::from(dst);
        for &len in &self.v6.present {
            if let Some(&i) = self.v6.by_len[usize::from(len)].get(&(d & mask128(len))) {
                return self.next_hops.get(i as usize).copied();
            }
        }
        None
    }

    /// Longest-prefix match for either family.
    pub fn lookup(&self, dst: IpAddr) -> Option<NextHop> {
        match dst {
            IpAddr::V4(a) => self.lookup_v4(a),
            IpAddr::V6(a) => self.lookup_v6(a),
        }
    }

    /// Routes held: (IPv4, IPv6).
    pub fn len(&self) -> (usize, usize) {
        (self.v4.len(), self.v6.len())
    }

    /// True when no route is held.
    pub fn is_empty(&self) -> bool {
        self.len() == (0, 0)
    }

    /// Every route, sorted (for `show routes`).
    pub fn routes(&self) -> Vec<(IpPrefix, NextHop)> {
        let mut v = Vec::new();
        for (len, m) in self.v4.by_len.iter().enumerate() {
            for (&k, &i) in m {
                v.push((
                    IpPrefix {
                        addr: IpAddr::V4(Ipv4Addr::from(k)),
                        len: len as u8,
                    },
                    self.next_hops[i as usize],
                ));
            }
        }
        for (len, m) in self.v6.by_len.iter().enumerate() {
            for (&k, &i) in m {
                v.push((
                    IpPrefix {
                        addr: IpAddr::V6(Ipv6Addr::from(k)),
                        len: len as u8,
                    },
                    self.next_hops[i as usize],
                ));
            }
        }
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> IpPrefix {
        s.parse().expect("prefix")
    }
    fn nh(port: PortId) -> NextHop {
        NextHop { port, via: None }
    }

    #[test]
    fn prefixes_parse_and_clear_host_bits() {
        assert_eq!(p("198.18.1.7/24").to_string(), "198.18.1.0/24");
        assert_eq!(p("2001:2:0:1::1/64").to_string(), "2001:2:0:1::/64");
        assert_eq!(p("10.0.0.1").len(), 32);
        assert!("10.0.0.0/33".parse::<IpPrefix>().is_err());
        assert!("nonsense/8".parse::<IpPrefix>().is_err());
        assert!(p("198.18.0.0/15").contains("198.19.255.1".parse().expect("addr")));
        assert!(!p("198.18.0.0/15").contains("198.20.0.1".parse().expect("addr")));
    }

    #[test]
    fn longest_prefix_wins_and_removal_falls_back() {
        let mut f = Fib::new();
        f.insert(p("0.0.0.0/0"), nh(0));
        f.insert(p("198.18.0.0/15"), nh(1));
        f.insert(p("198.18.2.0/24"), nh(2));
        f.insert(p("2001:2::/48"), nh(3));
        let a = |s: &str| s.parse::<IpAddr>().expect("addr");
        assert_eq!(f.lookup(a("198.18.2.9")), Some(nh(2)));
        assert_eq!(f.lookup(a("198.18.3.9")), Some(nh(1)));
        assert_eq!(f.lookup(a("8.8.8.8")), Some(nh(0)));
        assert_eq!(f.lookup(a("2001:2:0:5::1")), Some(nh(3)));
        assert_eq!(f.lookup(a("2001:3::1")), None);
        assert_eq!(f.remove(p("198.18.2.0/24")), Some(nh(2)));
        assert_eq!(f.lookup(a("198.18.2.9")), Some(nh(1)));
        assert_eq!(f.insert(p("198.18.0.0/15"), nh(4)), Some(nh(1)));
        assert_eq!(f.lookup(a("198.18.2.9")), Some(nh(4)));
        assert_eq!(f.len(), (2, 1));
        assert_eq!(f.routes().len(), 3);
    }

    #[test]
    fn agrees_with_a_linear_scan_on_random_tables() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        let mut f = Fib::new();
        let mut all = Vec::new();
        for i in 0..2000 {
            let len = rng.gen_range(0..=32u8);
            let pre =
                IpPrefix::new(IpAddr::V4(Ipv4Addr::from(rng.gen::<u32>())), len).expect("len");
            f.insert(pre, nh(i % 7));
            all.retain(|(q, _)| *q != pre);
            all.push((pre, nh(i % 7)));
        }
        for _ in 0..20_000 {
            let d = Ipv4Addr::from(rng.gen::<u32>());
            let want = all
                .iter()
                .filter(|(q, _)| q.contains(IpAddr::V4(d)))
                .max_by_key(|(q, _)| q.len())
                .map(|(_, n)| *n);
            assert_eq!(f.lookup_v4(d), want, "{d}");
        }
    }
}
