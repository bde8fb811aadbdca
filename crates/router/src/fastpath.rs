//! Keeps the XDP forwarding fast path's maps ([`weft_link::xdp_fwd`]) in step with
//! the router: its routes and the resolved neighbours their next hops need.
//!
//! The FIB and the neighbour table stay the router's; the maps are a copy that
//! [`FastPathSync::sync`] rewrites where they differ. The daemon looks every 50 ms
//! and syncs when the FIB or the neighbour table changed since the last sync
//! ([`Router::route_generation`], [`Router::neighbor_generation`]), and once a second
//! regardless (so a `ctl route add`/`del`, a neighbour learned or expired, reaches the
//! fast path within 50 ms; until then packets of a new route take the slow path, or
//! a removed route's packets follow it at most that long; a full-table FIB is not
//! copied twenty times a second). What the copy holds:
//!
//! - every route via a neighbour on a port with a kernel interface: its slot in
//!   the next-hop map, filled with the neighbour's MAC once resolved (reachable or
//!   stale), zero (the slow path) until then;
//! - a /32 (IPv6: /128) for every resolved neighbour on a connected network of a port with a
//!   kernel interface (unless a configured /32 route exists for it), with its own
//!   slot: so traffic to directly attached hosts is forwarded too once weft has
//!   resolved them; until then, and when the entry expires, their connected route
//!   sends it to the pipeline, which resolves them again;
//! - slot 0 (the slow path) for connected routes, routes to ports without a kernel
//!   interface (shm, another cluster node's), the router's own addresses and each
//!   connected network's directed broadcast, 0/8, 127/8, 224/4 and 255.255.255.255.
//!
//! Neighbours behind fast-path next hops are refreshed by the neighbour table's
//! timer once they expire ([`crate::neighbor::NeighborTable::keep_fresh`]): their
//! packets never reach the pipeline's lookup, which is what refreshes the others.
//!
//! IPv6 the same way, in its own trie: routes via a neighbour, /128 host entries
//! for resolved neighbours on connected prefixes, slot 0 for the router's own
//! addresses, ::, ::1, fe80::/10 and ff00::/8.

use crate::fib::{IpPrefix, NextHop, PortId};
use crate::pipeline::Router;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;
use weft_link::xdp_fwd::{FastPath, Hop, COUNTER_NAMES};

/// Routes the fast path's trie holds at most.
pub const MAX_ROUTES: u32 = 1 << 20;
/// Next-hop slots (slot 0 is the slow path).
pub const MAX_HOPS: u32 = 4096;

/// The maps and what was last written into them.
#[derive(Debug)]
pub struct FastPathSync {
    fast: FastPath,
    /// Per port: the interface index when the port is a kernel interface here.
    ifindex: Vec<Option<u32>>,
    /// Slot of each (port, neighbour) next hop, kept while some route uses it.
    slots: HashMap<(PortId, IpAddr), u32>,
    free: Vec<u32>,
    routes: HashMap<(IpAddr, u8), u32>,
    hops: HashMap<u32, Option<Hop>>,
}

impl FastPathSync {
    /// Maps for a router whose port `i` is the kernel interface `ifindex[i]` (None:
    /// no kernel interface, never an egress of the fast path).
    pub fn new(ifindex: Vec<Option<u32>>) -> io::Result<FastPathSync> {
        let fast = FastPath::new(MAX_ROUTES, MAX_HOPS)?;
        let free = (1..fast.max_hops()).rev().collect();
        Ok(FastPathSync {
            fast,
            ifindex,
            slots: HashMap::new(),
            free,
            routes: HashMap::new(),
            hops: HashMap::new(),
        })
    }

    /// The maps, for the ports' programs.
    pub fn fast_path(&self) -> &FastPath {
        &self.fast
    }

    /// Rewrite the maps where they differ from the router's routes and neighbours.
    /// Returns how many map entries changed.
    pub fn sync(&mut self, router: &Router, now: Instant) -> io::Result<usize> {
        let ports: Vec<_> = router.ports().cloned().collect();
        let neighbors = router.neighbors(now);
        // One map of the resolved neighbours, so a full table's routes cost a
        // lookup each rather than a walk of the neighbour table each.
        let macs: HashMap<(PortId, IpAddr), _> = neighbors
            .iter()
            .filter(|n| n.state != "incomplete")
            .filter_map(|n| Some(((n.port, n.ip), n.mac?)))
            .collect();
        let resolved = |port: PortId, ip: IpAddr| macs.get(&(port, ip)).copied();
        // What the maps should hold.
        let mut want_routes: HashMap<(IpAddr, u8), u32> = HashMap::new();
        let mut want_slots: HashMap<(PortId, IpAddr), Option<Hop>> = HashMap::new();
        let mut neighbor_routes: Vec<(IpAddr, PortId)> = Vec::new();
        let routed: Vec<(IpPrefix, NextHop)> = router.routes(usize::MAX);
        for (prefix, nh) in &routed {
            let key = (prefix.addr(), prefix.len());
            let egress = self.ifindex.get(nh.port).copied().flatten();
            let port = ports.get(nh.port);
            match (nh.via, egress, port) {
                (Some(gw), Some(ifindex), Some(spec)) if !router.is_remote(nh.port) => {
                    let hop = resolved(nh.port, gw).map(|mac| Hop {
                        ifindex,
                        mtu: spec.max_frame.saturating_sub(14) as u32,
                        dst_mac: mac.0,
                        src_mac: spec.mac.0,
                    });
                    want_slots.insert((nh.port, gw), hop);
                    want_routes.insert(key, u32::MAX); // the slot, filled below
                }
                _ => {
                    want_routes.insert(key, 0);
                }
            }
        }
        // Hosts on connected networks: a /32 per resolved neighbour (its own slot),
        // unless a configured /32 route says otherwise.
        for n in &neighbors {
            let (ip, Some(mac)) = (n.ip, n.mac) else {
                continue;
            };
            let host = if ip.is_ipv4() { 32 } else { 128 };
            let (Some(ifindex), Some(spec)) = (
                self.ifindex.get(n.port).copied().flatten(),
                ports.get(n.port),
            ) else {
                continue;
            };
            let on_link = spec
                .v4
                .iter()
                .map(|&(a, l)| (IpAddr::V4(a), l))
                .chain(spec.v6.iter().map(|&(a, l)| (IpAddr::V6(a), l)))
                .any(|(a, l)| IpPrefix::new(a, l).is_some_and(|p| p.contains(ip)));
            if n.state == "incomplete"
                || !on_link
                || router.is_remote(n.port)
                || want_routes.contains_key(&(ip, host))
            {
                continue;
            }
            want_slots.insert(
                (n.port, ip),
                Some(Hop {
                    ifindex,
                    mtu: spec.max_frame.saturating_sub(14) as u32,
                    dst_mac: mac.0,
                    src_mac: spec.mac.0,
                }),
            );
            want_routes.insert((ip, host), u32::MAX);
            neighbor_routes.push((ip, n.port));
        }
        // weft's pipeline refreshes a neighbour when a lookup finds it expired; the
        // fast path's packets never look, so the table refreshes these itself.
        router.keep_neighbors_fresh(want_slots.keys().copied().collect());
        // Slots: keep the ones still used, free the rest, give new ones.
        let mut changed = 0;
        let gone: Vec<_> = self
            .slots
            .keys()
            .filter(|k| !want_slots.contains_key(k))
            .copied()
            .collect();
        let mut freed = Vec::new();
        for k in gone {
            if let Some(s) = self.slots.remove(&k) {
                freed.push(s);
            }
        }
        for (k, hop) in &want_slots {
            let slot = match self.slots.get(k) {
                Some(&s) => s,
                None => {
                    let Some(s) = self.free.pop() else {
                        continue; // full: its routes stay on the slow path
                    };
                    self.slots.insert(*k, s);
                    s
                }
            };
            if self.hops.get(&slot) != Some(hop) {
                self.fast.set_hop(slot, *hop)?;
                self.hops.insert(slot, *hop);
                changed += 1;
            }
        }
        for (prefix, nh) in &routed {
            if let (Some(gw), Some(v)) =
                (nh.via, want_routes.get_mut(&(prefix.addr(), prefix.len())))
            {
                if *v == u32::MAX {
                    *v = self.slots.get(&(nh.port, gw)).copied().unwrap_or(0);
                }
            }
        }
        for (ip, port) in &neighbor_routes {
            let host = if ip.is_ipv4() { 32 } else { 128 };
            if let Some(v) = want_routes.get_mut(&(*ip, host)) {
                if *v == u32::MAX {
                    *v = self.slots.get(&(*port, *ip)).copied().unwrap_or(0);
                }
            }
        }
        for v in want_routes.values_mut() {
            if *v == u32::MAX {
                *v = 0; // no slot was free: the slow path
            }
        }
        // The router's own and the special destinations, after the routes (a /32
        // route cannot take the router's own address onto the fast path).
        let special = [
            (IpAddr::V4(Ipv4Addr::new(0, 0, 0, 0)), 8),
            (IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)), 8),
            (IpAddr::V4(Ipv4Addr::new(224, 0, 0, 0)), 4),
            (IpAddr::V4(Ipv4Addr::BROADCAST), 32),
            (IpAddr::V6(Ipv6Addr::UNSPECIFIED), 128),
            (IpAddr::V6(Ipv6Addr::LOCALHOST), 128),
            (IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0)), 10),
            (IpAddr::V6(Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0)), 8),
        ];
        for k in special {
            want_routes.insert(k, 0);
        }
        for spec in &ports {
            for &(a, l) in &spec.v4 {
                want_routes.insert((IpAddr::V4(a), 32), 0);
                if l < 31 {
                    let bcast = Ipv4Addr::from(u32::from(a) | (u32::MAX >> l));
                    want_routes.insert((IpAddr::V4(bcast), 32), 0);
                }
            }
            for &(a, _) in &spec.v6 {
                want_routes.insert((IpAddr::V6(a), 128), 0);
            }
        }
        // Removed routes first, then new and changed ones.
        let stale: Vec<_> = self
            .routes
            .keys()
            .filter(|k| !want_routes.contains_key(k))
            .copied()
            .collect();
        for (a, l) in stale {
            self.fast.delete_route(a, l)?;
            self.routes.remove(&(a, l));
            changed += 1;
        }
        for (&(a, l), &v) in &want_routes {
            if self.routes.get(&(a, l)) != Some(&v) {
                self.fast.set_route(a, l, v)?;
                self.routes.insert((a, l), v);
                changed += 1;
            }
        }
        // Slots no route uses any more: unresolved, then free for reuse.
        for s in freed {
            if self.hops.get(&s) != Some(&None) {
                self.fast.set_hop(s, None)?;
                self.hops.insert(s, None);
                changed += 1;
            }
            self.free.push(s);
        }
        Ok(changed)
    }

    /// The fast path's counters by name ([`COUNTER_NAMES`]).
    pub fn counters(&self) -> io::Result<Vec<(&'static str, u64)>> {
        let c = self.fast.counters()?;
        Ok(COUNTER_NAMES.iter().copied().zip(c).collect())
    }
}
