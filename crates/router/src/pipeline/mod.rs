//! The per-packet pipeline: what the router does with one frame, from the Ethernet
//! header to the decision "send on port E to MAC M" — ARP and neighbour discovery,
//! IPv4/IPv6 validation, ICMP for the router's own addresses, LPM, TTL and hop limit,
//! ICMP errors (rate-limited), MAC rewrite, and a counter for every drop.
//!
//! It is split the way the P2PNIC paper splits the work between NICs: [`Worker::classify`]
//! is the ingress half (validate, look up, resolve the next hop), [`Router::finish`]
//! the egress half (TTL/hop limit − 1 with the RFC 1624 checksum patch, MAC rewrite).
//! Push runs both on the ingress worker, pull runs `finish` on the egress worker.
//!
//! The stages, one module each, in the order a frame meets them:
//!
//! - `l2`: the Ethernet header (our MAC, untagged, EtherType) and the egress rewrite;
//! - `forward`: the forwarding policy, written once for IPv4 and IPv6 over
//!   [`weft_wire::IpRepr`]: validation → martians → local delivery or lookup →
//!   TTL/hop limit → errors → fragmentation/too big → next hop; the family-specific
//!   rules (what a martian is, which options, which counter) sit behind it;
//! - `local`: packets for the router's own addresses (echo, ND, unknown protocols);
//! - `icmp`: ICMP and ICMPv6 errors (when not to send, rate limit, the message);
//! - `frag`: IPv4 fragmentation and options;
//! - `arp_nd`: ARP, neighbour discovery and next-hop resolution.
//!
//! Every byte of a frame is hostile: all parsing goes through weft-wire's checked
//! views, every wire error becomes a counter through [`crate::counters::drop_counter`],
//! and every other way a frame can be wrong ends in a [`Counter`], never a panic.
#![forbid(unsafe_code)]

mod arp_nd;
mod forward;
mod frag;
mod icmp;
mod l2;
mod local;

pub use icmp::TokenBucket;

use crate::counters::{drop_counter, Counter, Counters};
use crate::fib::{FibGuard, FibWriter, IpPrefix, NextHop, PortId};
use crate::neighbor::{NeighborConfig, NeighborTable, NeighborView};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use weft_link::{BufferPool, PacketBuf};
use weft_wire::EthernetAddress;

/// Ethernet's minimum frame without FCS; shorter frames we build are zero-padded.
const MIN_FRAME: usize = 60;
/// TTL / hop limit of packets the router originates.
const OWN_TTL: u8 = 64;
/// ND messages must carry hop limit 255 (RFC 4861 §7.1.1).
const ND_HOP_LIMIT: u8 = 255;
/// ff02::1, the all-nodes group (RFC 4291 §2.7.1).
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// One interconnect peer's counters: its name and (counter, value) rows.
pub type PeerRows = (String, Vec<(&'static str, u64)>);

/// A port as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    /// Name (shown in counters and `show neighbours`).
    pub name: String,
    /// The port's MAC.
    pub mac: EthernetAddress,
    /// IPv4 addresses with prefix lengths; the prefixes become connected routes.
    pub v4: Vec<(Ipv4Addr, u8)>,
    /// IPv6 addresses with prefix lengths.
    pub v6: Vec<(Ipv6Addr, u8)>,
    /// Largest frame the port sends (MTU + 14).
    pub max_frame: usize,
}

/// A port as the pipeline uses it.
#[derive(Debug, Clone)]
struct Port {
    spec: PortSpec,
    /// fe80::/64 with the modified EUI-64 of the MAC (RFC 4291 App. A).
    link_local: Ipv6Addr,
}

fn eui64_link_local(mac: EthernetAddress) -> Ipv6Addr {
    let m = mac.0;
    Ipv6Addr::new(
        0xfe80,
        0,
        0,
        0,
        u16::from_be_bytes([m[0] ^ 0x02, m[1]]),
        u16::from_be_bytes([m[2], 0xff]),
        u16::from_be_bytes([0xfe, m[3]]),
        u16::from_be_bytes([m[4], m[5]]),
    )
}

/// ff02::1:ffXX:XXXX for `a` (RFC 4291 §2.7.1).
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | u16::from(o[13]),
        u16::from_be_bytes([o[14], o[15]]),
    )
}

/// Limits of the router's own behaviour.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RouterConfig {
    /// ICMP errors per second per worker (RFC 1812 §4.3.2.8, RFC 4443 §2.4(f)).
    pub icmp_rate: f64,
    /// ICMP errors that may be sent back to back.
    pub icmp_burst: f64,
    /// Neighbour timers.
    pub neighbor: NeighborConfig,
}

impl Default for RouterConfig {
    fn default() -> Self {
        RouterConfig {
            icmp_rate: 100.0,
            icmp_burst: 10.0,
            neighbor: NeighborConfig::default(),
        }
    }
}

/// Why a route could not be added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteError {
    /// The next hop is not inside any port's connected prefix.
    NextHopNotConnected(IpAddr),
    /// The prefix and the next hop are different families.
    FamilyMismatch,
    /// No such port.
    NoSuchPort(String),
    /// The FIB refused the route (its next-hop table is full).
    Fib(weft_lpm::LpmError),
}

impl std::fmt::Display for RouteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RouteError::NextHopNotConnected(a) => {
                write!(f, "next hop {a} is not on a connected network")
            }
            RouteError::FamilyMismatch => f.write_str("prefix and next hop are different families"),
            RouteError::NoSuchPort(p) => write!(f, "no port named {p}"),
            RouteError::Fib(e) => write!(f, "fib: {e}"),
        }
    }
}

impl std::error::Error for RouteError {}

/// State shared by every worker: ports, FIB, neighbours, counters.
#[derive(Debug)]
pub struct Router {
    ports: Vec<Port>,
    /// Where workers load the FIB snapshot, once per burst.
    fib: weft_lpm::FibReader<NextHop>,
    /// The FIB's single writer; only the control path takes this lock.
    fib_writer: Mutex<FibWriter>,
    /// Bumped by every change of the FIB ([`Router::route_generation`]).
    route_gen: AtomicU64,
    neighbors: Mutex<NeighborTable>,
    /// Mirror of the neighbour table's generation, read without the lock.
    neighbor_gen: AtomicU64,
    workers: Mutex<Vec<Arc<Counters>>>,
    last_tick: Mutex<Option<Instant>>,
    /// Each port's link counters, as its worker last published them.
    link_stats: Mutex<Vec<weft_link::LinkStats>>,
    /// Per port: true when another node of a cluster owns it (its frames cross the
    /// interconnect unfinished; see [`crate::cluster`]). All false on a single box.
    remote: Vec<bool>,
    /// The interconnect's counters per peer, as its thread last published them.
    interconnect: Mutex<Vec<PeerRows>>,
    /// The XDP fast path's counters, as the daemon last read them (empty without one).
    fast_path: Mutex<Vec<(&'static str, u64)>>,
    cfg: RouterConfig,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Router {
    /// A router with these ports; their address prefixes become connected routes.
    pub fn new(ports: Vec<PortSpec>, cfg: RouterConfig) -> Arc<Router> {
        let n = ports.len();
        Router::with_remote_ports(ports, cfg, vec![false; n])
    }

    /// A router that is one node of a cluster: `remote[i]` says port `i` belongs to
    /// another node. A packet routed to a remote port leaves [`Worker::classify`]
    /// unfinished (no neighbour resolution, TTL untouched) with `egress` = that port,
    /// for the data plane to hand to the interconnect; the owner finishes it.
    pub fn with_remote_ports(
        ports: Vec<PortSpec>,
        cfg: RouterConfig,
        mut remote: Vec<bool>,
    ) -> Arc<Router> {
        remote.resize(ports.len(), false);
        let mut connected = Vec::new();
        for (i, p) in ports.iter().enumerate() {
            let nh = NextHop { port: i, via: None };
            let v4 = p.v4.iter().map(|&(a, l)| (IpAddr::V4(a), l));
            let v6 = p.v6.iter().map(|&(a, l)| (IpAddr::V6(a), l));
            connected.extend(
                v4.chain(v6)
                    .filter_map(|(a, l)| Some((IpPrefix::new(a, l)?, nh))),
            );
        }
        // One next hop per port: the next-hop table cannot be full.
        let fib = FibWriter::with_routes(&connected).unwrap_or_default();
        Arc::new(Router {
            ports: ports
                .into_iter()
                .map(|spec| Port {
                    link_local: eui64_link_local(spec.mac),
                    spec,
                })
                .collect(),
            fib: fib.reader(),
            fib_writer: Mutex::new(fib),
            route_gen: AtomicU64::new(0),
            neighbors: Mutex::new(NeighborTable::new(cfg.neighbor)),
            neighbor_gen: AtomicU64::new(0),
            workers: Mutex::new(Vec::new()),
            last_tick: Mutex::new(None),
            link_stats: Mutex::new(Vec::new()),
            remote,
            interconnect: Mutex::new(Vec::new()),
            fast_path: Mutex::new(Vec::new()),
            cfg,
        })
    }

    /// True when port `port` belongs to another node of the cluster.
    pub fn is_remote(&self, port: PortId) -> bool {
        self.remote.get(port).copied().unwrap_or(false)
    }

    /// True when some port belongs to another node (this router is a cluster node).
    pub fn is_cluster_node(&self) -> bool {
        self.remote.iter().any(|&r| r)
    }

    /// Record the interconnect's counters: per peer, (name, value) pairs.
    pub fn publish_interconnect(&self, stats: Vec<PeerRows>) {
        *lock(&self.interconnect) = stats;
    }

    /// The interconnect's counters per peer as last published (empty on a single box).
    pub fn interconnect_stats(&self) -> Vec<PeerRows> {
        lock(&self.interconnect).clone()
    }

    /// Record the XDP fast path's counters (the daemon does, every 50 ms).
    pub fn publish_fast_path_counters(&self, rows: Vec<(&'static str, u64)>) {
        *lock(&self.fast_path) = rows;
    }

    /// The XDP fast path's counters as last published: `xdp_forwarded` and the
    /// frames it sent to this pipeline, by reason (empty when no port runs it).
    pub fn fast_path_counters(&self) -> Vec<(&'static str, u64)> {
        lock(&self.fast_path).clone()
    }

    /// The ports, in id order.
    pub fn ports(&self) -> impl Iterator<Item = &PortSpec> {
        self.ports.iter().map(|p| &p.spec)
    }

    /// Port id by name.
    pub fn port_id(&self, name: &str) -> Option<PortId> {
        self.ports.iter().position(|p| p.spec.name == name)
    }

    /// The current FIB snapshot, for reading: the data plane loads it once per
    /// burst (no lock) and holds it across the burst.
    pub fn fib(&self) -> FibGuard {
        self.fib.load()
    }

    /// The first `limit` routes in prefix order, IPv4 first (for `show routes`).
    pub fn routes(&self, limit: usize) -> Vec<(IpPrefix, NextHop)> {
        lock(&self.fib_writer).routes().take(limit).collect()
    }

    /// Which port reaches `via` directly (its connected prefix holds it).
    pub fn connected_port(&self, via: IpAddr) -> Option<PortId> {
        self.ports.iter().position(|p| match via {
            IpAddr::V4(a) => p.spec.v4.iter().any(|&(pa, l)| {
                IpPrefix::new(IpAddr::V4(pa), l).is_some_and(|x| x.contains(IpAddr::V4(a)))
            }),
            IpAddr::V6(a) => p.spec.v6.iter().any(|&(pa, l)| {
                IpPrefix::new(IpAddr::V6(pa), l).is_some_and(|x| x.contains(IpAddr::V6(a)))
            }),
        })
    }

    /// Add or replace a route via a neighbour on a connected network. Packets in
    /// flight keep flowing: readers never wait for the writer.
    pub fn add_route(&self, prefix: IpPrefix, via: IpAddr) -> Result<Option<NextHop>, RouteError> {
        if prefix.addr().is_ipv4() != via.is_ipv4() {
            return Err(RouteError::FamilyMismatch);
        }
        let port = self
            .connected_port(via)
            .ok_or(RouteError::NextHopNotConnected(via))?;
        self.insert_route(
            prefix,
            NextHop {
                port,
                via: Some(via),
            },
        )
    }

    /// Add or replace a route with an explicit next hop; published before this
    /// returns.
    pub fn insert_route(
        &self,
        prefix: IpPrefix,
        nh: NextHop,
    ) -> Result<Option<NextHop>, RouteError> {
        let mut w = lock(&self.fib_writer);
        let old = w.insert(prefix, nh).map_err(RouteError::Fib)?;
        w.flush();
        self.route_gen.fetch_add(1, Ordering::Release);
        Ok(old)
    }

    /// Remove a route; published before this returns.
    pub fn remove_route(&self, prefix: IpPrefix) -> Option<NextHop> {
        let mut w = lock(&self.fib_writer);
        let old = w.remove(prefix);
        w.flush();
        self.route_gen.fetch_add(1, Ordering::Release);
        old
    }

    /// Add or replace many routes, published once at the end (route files).
    /// Returns how many were given.
    pub fn bulk_insert(
        &self,
        routes: impl IntoIterator<Item = (IpPrefix, NextHop)>,
    ) -> Result<usize, RouteError> {
        let updates: Vec<_> = routes
            .into_iter()
            .map(|(p, nh)| weft_lpm::Update::Insert(p, nh))
            .collect();
        let applied = lock(&self.fib_writer).apply(&updates);
        self.route_gen.fetch_add(1, Ordering::Release);
        applied.map_err(RouteError::Fib)?;
        Ok(updates.len())
    }

    /// A number that changes whenever the FIB does (a route added, replaced or
    /// removed): a copy of the routes (the XDP fast path's maps) need not be
    /// rebuilt while it stays the same.
    pub fn route_generation(&self) -> u64 {
        self.route_gen.load(Ordering::Acquire)
    }

    /// A number that changes whenever the neighbour table does (an entry learned,
    /// changed, expired or flushed).
    pub fn neighbor_generation(&self) -> u64 {
        self.neighbor_gen.load(Ordering::Acquire)
    }

    /// A new worker with its own counters, neighbour cache and ICMP budget.
    pub fn worker(self: &Arc<Self>, pool: BufferPool) -> Worker {
        let counters = Arc::new(Counters::default());
        lock(&self.workers).push(Arc::clone(&counters));
        Worker {
            router: Arc::clone(self),
            counters,
            pool,
            cache: HashMap::new(),
            cache_gen: u64::MAX,
            limiter: TokenBucket::new(self.cfg.icmp_rate, self.cfg.icmp_burst),
            last_tick: None,
        }
    }

    /// Every counter summed over the workers.
    pub fn counters(&self) -> Vec<(Counter, u64)> {
        let w = lock(&self.workers);
        crate::counters::sum(w.iter().map(|c| &**c))
    }

    /// One counter summed over the workers.
    pub fn counter(&self, c: Counter) -> u64 {
        lock(&self.workers).iter().map(|w| w.get(c)).sum()
    }

    /// The neighbour table.
    pub fn neighbors(&self, now: Instant) -> Vec<NeighborView> {
        lock(&self.neighbors).view(now)
    }

    /// Record port `port`'s link counters (data plane threads do, every 100 ms).
    pub fn publish_link_stats(&self, port: PortId, stats: weft_link::LinkStats) {
        let mut v = lock(&self.link_stats);
        if v.len() <= port {
            v.resize(port + 1, weft_link::LinkStats::default());
        }
        v[port] = stats;
    }

    /// Every port's link counters as last published (name, counters).
    pub fn link_stats(&self) -> Vec<(String, weft_link::LinkStats)> {
        let v = lock(&self.link_stats);
        self.ports
            .iter()
            .enumerate()
            .map(|(i, p)| (p.spec.name.clone(), v.get(i).copied().unwrap_or_default()))
            .collect()
    }

    /// Neighbours to refresh without lookups (those the XDP fast path forwards to;
    /// see [`crate::neighbor::NeighborTable::keep_fresh`]).
    pub fn keep_neighbors_fresh(&self, set: Vec<(PortId, IpAddr)>) {
        lock(&self.neighbors).keep_fresh(set);
    }

    /// Forget every neighbour.
    pub fn flush_neighbors(&self) {
        let mut n = lock(&self.neighbors);
        n.flush();
        self.neighbor_gen.store(n.generation(), Ordering::Release);
    }

    /// The egress half of forwarding (P2PNIC's egress NIC): TTL or hop limit − 1 and
    /// the new MACs. The frame was validated by [`Worker::classify`], which also made
    /// sure the TTL is above 1; a frame that no longer parses is left unchanged.
    pub fn finish(&self, buf: &mut PacketBuf, egress: PortId, dst_mac: EthernetAddress) {
        let src = self
            .ports
            .get(egress)
            .map_or(EthernetAddress([0; 6]), |p| p.spec.mac);
        l2::rewrite_forwarded(buf, src, dst_mac);
    }
}

/// A packet routed by [`Worker::classify`], ready for [`Router::finish`] on `egress`.
#[derive(Debug)]
pub struct Forward {
    /// The frame, unchanged so far.
    pub buf: PacketBuf,
    /// The egress port.
    pub egress: PortId,
    /// The next hop's MAC.
    pub dst_mac: EthernetAddress,
}

/// Frames the pipeline wants sent as they are, with their port.
pub type Outbox = Vec<(PortId, PacketBuf)>;

/// One thread's handle on the router: its counters, neighbour cache and ICMP budget.
#[derive(Debug)]
pub struct Worker {
    router: Arc<Router>,
    counters: Arc<Counters>,
    pool: BufferPool,
    /// (port, next hop) → (MAC, valid until), valid while `cache_gen` matches.
    cache: HashMap<(PortId, IpAddr), (EthernetAddress, Instant)>,
    cache_gen: u64,
    limiter: TokenBucket,
    last_tick: Option<Instant>,
}

impl Worker {
    /// The router this worker serves.
    pub fn router(&self) -> &Arc<Router> {
        &self.router
    }

    /// This worker's counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Count a packet dropped because it did not parse: [`drop_counter`] says which
    /// counter, so no stage inspects a wire error itself.
    fn drop(&self, e: &weft_wire::Error) {
        self.counters.inc(drop_counter(e));
    }

    /// Count `c` (for the data plane's own drops, such as a full ring).
    pub fn count(&self, c: Counter, n: u64) {
        self.counters.add(c, n);
    }

    /// Classify and finish a whole burst on one worker (the push path, and tests):
    /// forwarded frames and the router's own frames all land in `out`.
    pub fn process_burst(
        &mut self,
        ingress: PortId,
        frames: impl IntoIterator<Item = PacketBuf>,
        now: Instant,
        out: &mut Outbox,
    ) {
        let router = Arc::clone(&self.router);
        let fib = router.fib();
        for buf in frames {
            if let Some(mut f) = self.classify(&fib, ingress, buf, now, out) {
                router.finish(&mut f.buf, f.egress, f.dst_mac);
                out.push((f.egress, f.buf));
            }
        }
    }

    fn alloc(&mut self, len: usize) -> Option<PacketBuf> {
        let Some(mut b) = self.pool.alloc() else {
            self.counters.inc(Counter::DropNoBuffer);
            return None;
        };
        if !b.set_len(len) {
            self.counters.inc(Counter::DropNoBuffer);
            return None;
        }
        b.fill(0);
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eui64_and_solicited_node() {
        let ll = eui64_link_local(EthernetAddress([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]));
        assert_eq!(
            ll,
            "fe80::11:22ff:fe33:4455".parse::<Ipv6Addr>().expect("addr")
        );
        assert_eq!(
            solicited_node("2001:2:0:1::1".parse().expect("addr")),
            "ff02::1:ff00:1".parse::<Ipv6Addr>().expect("addr")
        );
    }
}
