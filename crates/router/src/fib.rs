//! The forwarding information base: prefixes to next hops, IPv4 and IPv6.
//!
//! weft-lpm's updatable FIB: the data plane loads one immutable [`Fib`] snapshot
//! per burst (both families' range tables and the next-hop table their leaves
//! index, so a route never points at a missing next hop) without a lock; the
//! router's control path is the single [`FibWriter`], which publishes every
//! change before the `ctl` command that made it returns. Next hops are interned
//! with a count of the routes using each, and freed when none does.
//!
//! The prefix type is weft-lpm's [`IpPrefix`], the one the route files, `ctl` and
//! the configuration parse.

use std::net::IpAddr;

pub use weft_lpm::IpPrefix;

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

/// What the data plane reads: one immutable snapshot of both families' tables and
/// their next hops (`lookup_v4`, `lookup_v6`, `lookup`, `len`).
pub type Fib = weft_lpm::Snapshot<NextHop>;

/// A loaded [`Fib`] snapshot, held for one burst.
pub type FibGuard = weft_lpm::SnapshotGuard<NextHop>;

/// The single writer of the router's FIB.
pub type FibWriter = weft_lpm::FibWriter<NextHop>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

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
        let mut f = FibWriter::new();
        f.set_max_delay(std::time::Duration::ZERO);
        let r = f.reader();
        f.insert(p("0.0.0.0/0"), nh(0)).expect("insert");
        f.insert(p("198.18.0.0/15"), nh(1)).expect("insert");
        f.insert(p("198.18.2.0/24"), nh(2)).expect("insert");
        f.insert(p("2001:2::/48"), nh(3)).expect("insert");
        let a = |s: &str| s.parse::<IpAddr>().expect("addr");
        assert_eq!(r.load().lookup(a("198.18.2.9")), Some(nh(2)));
        assert_eq!(r.load().lookup(a("198.18.3.9")), Some(nh(1)));
        assert_eq!(r.load().lookup(a("8.8.8.8")), Some(nh(0)));
        assert_eq!(r.load().lookup(a("2001:2:0:5::1")), Some(nh(3)));
        assert_eq!(r.load().lookup(a("2001:3::1")), None);
        assert_eq!(f.remove(p("198.18.2.0/24")), Some(nh(2)));
        assert_eq!(r.load().lookup(a("198.18.2.9")), Some(nh(1)));
        assert_eq!(f.insert(p("198.18.0.0/15"), nh(4)), Ok(Some(nh(1))));
        assert_eq!(r.load().lookup(a("198.18.2.9")), Some(nh(4)));
        assert_eq!(r.load().len(), (2, 1));
        assert_eq!(f.routes().take(10).count(), 3);
    }

    #[test]
    fn agrees_with_a_linear_scan_on_random_tables() {
        use rand::{Rng, SeedableRng};
        use weft_lpm::Update;
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        let mut f = FibWriter::new();
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
            f.insert(p, n).expect("insert");
        }
        let rest: Vec<_> = rest.iter().map(|&(p, n)| Update::Insert(p, n)).collect();
        f.apply(&rest).expect("apply");
        let s = f.reader().load();
        for _ in 0..20_000 {
            let d = Ipv4Addr::from(rng.gen::<u32>());
            let want = all
                .iter()
                .filter(|(q, _)| q.contains(IpAddr::V4(d)))
                .max_by_key(|(q, _)| q.len())
                .map(|(_, n)| *n);
            assert_eq!(s.lookup_v4(d), want, "{d}");
        }
    }
}
