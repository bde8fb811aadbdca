//! The forwarding information base: prefixes to next hops, IPv4 and IPv6.
//!
//! The lookup structure is weft-lpm's (a DXR-style range table that readers keep
//! using while a writer publishes changes). Next hops are interned: a route stores a 32-bit index, so a full BGP table with a
//! handful of next hops costs one small table of [`NextHop`]s.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
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

/// The routing table the data plane reads: weft-lpm's range tables (one per family,
/// readers never blocked by an update) over an interned next-hop table, plus the
/// route list for `show routes`.
#[derive(Debug)]
pub struct Fib {
    v4: weft_lpm::Fib4,
    v6: weft_lpm::Fib6,
    next_hops: Vec<NextHop>,
    nh_index: HashMap<NextHop, u32>,
    routes: BTreeMap<IpPrefix, NextHop>,
}

impl Default for Fib {
    fn default() -> Self {
        Fib::new()
    }
}

fn lpm4(p: IpPrefix) -> Option<weft_lpm::Prefix<u32>> {
    match p.addr {
        IpAddr::V4(a) => weft_lpm::Prefix::new(u32::from(a), p.len).ok(),
        IpAddr::V6(_) => None,
    }
}

fn lpm6(p: IpPrefix) -> Option<weft_lpm::Prefix<u128>> {
    match p.addr {
        IpAddr::V6(a) => weft_lpm::Prefix::new(u128::from(a), p.len).ok(),
        IpAddr::V4(_) => None,
    }
}

impl Fib {
    /// An empty table.
    pub fn new() -> Fib {
        Fib {
            v4: weft_lpm::Fib4::new(&[]),
            v6: weft_lpm::Fib6::new(&[]),
            next_hops: Vec::new(),
            nh_index: HashMap::new(),
            routes: BTreeMap::new(),
        }
    }

    fn intern(&mut self, nh: NextHop) -> Option<weft_lpm::NextHop> {
        let i = match self.nh_index.get(&nh) {
            Some(&i) => i,
            None => {
                let i = self.next_hops.len() as u32;
                self.next_hops.push(nh);
                self.nh_index.insert(nh, i);
                i
            }
        };
        weft_lpm::NextHop::new(i).ok()
    }

    fn resolve(&self, nh: Option<weft_lpm::NextHop>) -> Option<NextHop> {
        self.next_hops.get(nh?.get() as usize).copied()
    }

    /// Add or replace a route; returns the next hop it replaced.
    pub fn insert(&mut self, prefix: IpPrefix, nh: NextHop) -> Option<NextHop> {
        let old = self.routes.get(&prefix).copied();
        self.bulk_insert(std::iter::once((prefix, nh)));
        old
    }

    /// Remove a route; returns its next hop.
    pub fn remove(&mut self, prefix: IpPrefix) -> Option<NextHop> {
        let old = self.routes.remove(&prefix)?;
        match prefix.addr {
            IpAddr::V4(_) => {
                if let Some(p) = lpm4(prefix) {
                    self.v4.remove(p);
                }
            }
            IpAddr::V6(_) => {
                if let Some(p) = lpm6(prefix) {
                    self.v6.remove(p);
                }
            }
        }
        Some(old)
    }

    /// Add or replace many routes, publishing each family's table once.
    pub fn bulk_insert(&mut self, routes: impl IntoIterator<Item = (IpPrefix, NextHop)>) -> usize {
        let mut u4 = Vec::new();
        let mut u6 = Vec::new();
        let mut n = 0;
        for (p, nh) in routes {
            let Some(i) = self.intern(nh) else { continue };
            match p.addr {
                IpAddr::V4(_) => u4.extend(lpm4(p).map(|q| weft_lpm::Update::Insert(q, i))),
                IpAddr::V6(_) => u6.extend(lpm6(p).map(|q| weft_lpm::Update::Insert(q, i))),
            }
            self.routes.insert(p, nh);
            n += 1;
        }
        if !u4.is_empty() {
            self.v4.apply(&u4);
        }
        if !u6.is_empty() {
            self.v6.apply(&u6);
        }
        n
    }

    /// Longest-prefix match for an IPv4 destination.
    #[inline]
    pub fn lookup_v4(&self, dst: Ipv4Addr) -> Option<NextHop> {
        self.resolve(self.v4.load().lookup(u32::from(dst)))
    }

    /// Longest-prefix match for an IPv6 destination.
    #[inline]
    pub fn lookup_v6(&self, dst: Ipv6Addr) -> Option<NextHop> {
        self.resolve(self.v6.load().lookup(u128::from(dst)))
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
        (self.v4.routes(), self.v6.routes())
    }

    /// True when no route is held.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The first `limit` routes in order (for `show routes`).
    pub fn routes(&self, limit: usize) -> Vec<(IpPrefix, NextHop)> {
        self.routes
            .iter()
            .take(limit)
            .map(|(p, n)| (*p, *n))
            .collect()
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
        assert_eq!(f.routes(10).len(), 3);
    }

    #[test]
    fn agrees_with_a_linear_scan_on_random_tables() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        let mut f = Fib::new();
        let mut all = Vec::new();
        let mut batch = Vec::new();
        for i in 0..2000 {
            let len = rng.gen_range(0..=32u8);
            let pre =
                IpPrefix::new(IpAddr::V4(Ipv4Addr::from(rng.gen::<u32>())), len).expect("len");
            batch.push((pre, nh(i % 7)));
            all.retain(|(q, _)| *q != pre);
            all.push((pre, nh(i % 7)));
        }
        // Half one at a time (the update path), half in one batch (route files).
        let (one, rest) = batch.split_at(100);
        for &(p, n) in one {
            f.insert(p, n);
        }
        f.bulk_insert(rest.iter().copied());
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
