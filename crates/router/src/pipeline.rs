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
//! Every byte of a frame is hostile: all parsing goes through weft-wire's checked
//! views, and every way a frame can be wrong ends in a [`Counter`], never a panic.
#![forbid(unsafe_code)]

use crate::counters::{Counter, Counters};
use crate::fib::{Fib, FibGuard, FibWriter, IpPrefix, NextHop, PortId};
use crate::neighbor::{Enqueued, Lookup, NeighborConfig, NeighborTable, NeighborView, Waiting};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use weft_link::{BufferPool, PacketBuf};
use weft_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use weft_wire::ethernet::{self, EthernetFrame};
use weft_wire::icmpv4::{self, Icmpv4Message, Icmpv4Packet, Icmpv4Repr};
use weft_wire::icmpv6::{self, Icmpv6Message, Icmpv6Packet, Icmpv6Repr};
use weft_wire::ipv4::{self, Ipv4Packet, Ipv4Repr};
use weft_wire::ipv6::{self, Ipv6Packet, Ipv6Repr};
use weft_wire::{EtherType, EthernetAddress, IpProtocol};

/// Ethernet's minimum frame without FCS; shorter frames we build are zero-padded.
const MIN_FRAME: usize = 60;
/// TTL / hop limit of packets the router originates.
const OWN_TTL: u8 = 64;
/// ND messages must carry hop limit 255 (RFC 4861 §7.1.1).
const ND_HOP_LIMIT: u8 = 255;

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
    neighbors: Mutex<NeighborTable>,
    /// Mirror of the neighbour table's generation, read without the lock.
    neighbor_gen: AtomicU64,
    workers: Mutex<Vec<Arc<Counters>>>,
    last_tick: Mutex<Option<Instant>>,
    /// Each port's link counters, as its worker last published them.
    link_stats: Mutex<Vec<weft_link::LinkStats>>,
    cfg: RouterConfig,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Router {
    /// A router with these ports; their address prefixes become connected routes.
    pub fn new(ports: Vec<PortSpec>, cfg: RouterConfig) -> Arc<Router> {
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
            neighbors: Mutex::new(NeighborTable::new(cfg.neighbor)),
            neighbor_gen: AtomicU64::new(0),
            workers: Mutex::new(Vec::new()),
            last_tick: Mutex::new(None),
            link_stats: Mutex::new(Vec::new()),
            cfg,
        })
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
        Ok(old)
    }

    /// Remove a route; published before this returns.
    pub fn remove_route(&self, prefix: IpPrefix) -> Option<NextHop> {
        let mut w = lock(&self.fib_writer);
        let old = w.remove(prefix);
        w.flush();
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
        lock(&self.fib_writer)
            .apply(&updates)
            .map_err(RouteError::Fib)?;
        Ok(updates.len())
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

    /// Forget every neighbour.
    pub fn flush_neighbors(&self) {
        let mut n = lock(&self.neighbors);
        n.flush();
        self.neighbor_gen.store(n.generation(), Ordering::Release);
    }

    fn is_local_v4(&self, a: Ipv4Addr) -> bool {
        self.ports
            .iter()
            .any(|p| p.spec.v4.iter().any(|&(x, _)| x == a))
    }

    fn is_local_v6(&self, a: Ipv6Addr) -> bool {
        self.ports
            .iter()
            .any(|p| p.link_local == a || p.spec.v6.iter().any(|&(x, _)| x == a))
    }

    /// Directed broadcast of a connected IPv4 network (not forwarded: RFC 2644).
    fn is_subnet_broadcast(&self, a: Ipv4Addr) -> bool {
        self.ports.iter().any(|p| {
            p.spec
                .v4
                .iter()
                .any(|&(x, l)| l < 31 && (u32::from(x) | (u32::MAX >> l)) == u32::from(a))
        })
    }

    /// The egress half of forwarding (P2PNIC's egress NIC): TTL or hop limit − 1 and
    /// the new MACs. The frame was validated by [`Worker::classify`], which also made
    /// sure the TTL is above 1; a frame that no longer parses is left unchanged.
    pub fn finish(&self, buf: &mut PacketBuf, egress: PortId, dst_mac: EthernetAddress) {
        let src = self
            .ports
            .get(egress)
            .map_or(EthernetAddress([0; 6]), |p| p.spec.mac);
        rewrite_forwarded(buf, src, dst_mac);
    }
}

/// TTL/hop limit − 1 and MAC rewrite on an untagged frame.
fn rewrite_forwarded(buf: &mut [u8], src: EthernetAddress, dst: EthernetAddress) {
    let Ok(mut eth) = EthernetFrame::new_checked(&mut buf[..]) else {
        return;
    };
    match eth.ethertype() {
        EtherType::IPV4 => {
            if let Ok(mut ip) = Ipv4Packet::new_checked(eth.payload_mut()) {
                // RFC 1812 §5.3.1 and RFC 1624: patch, do not recompute.
                ip.decrement_ttl();
            }
        }
        EtherType::IPV6 => {
            if let Ok(mut ip) = Ipv6Packet::new_checked(eth.payload_mut()) {
                ip.decrement_hop_limit();
            }
        }
        _ => {}
    }
    eth.set_src_addr(src);
    eth.set_dst_addr(dst);
}

/// A token bucket over caller-supplied time (deterministic in tests).
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Option<Instant>,
}

impl TokenBucket {
    /// `rate` tokens per second, at most `burst` saved.
    pub fn new(rate: f64, burst: f64) -> TokenBucket {
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            last: None,
        }
    }

    /// Take a token if one is there.
    pub fn take(&mut self, now: Instant) -> bool {
        if let Some(last) = self.last {
            let dt = now.saturating_duration_since(last).as_secs_f64();
            self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        }
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
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

/// Which ICMP error to send about a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IcmpError {
    TimeExceeded,
    NoRoute,
    /// Port unreachable (UDP/TCP to us).
    PortUnreachable,
    /// Protocol unreachable (IPv4 only; IPv6 uses parameter problem, which we do not
    /// send, so it falls back to port unreachable).
    ProtocolUnreachable,
    /// Fragmentation needed / packet too big, with the egress MTU.
    TooBig(u16),
}

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

    /// The ingress half: everything but the final rewrite. Returns the frame when it
    /// is to be forwarded; otherwise it has been answered, queued or dropped and
    /// counted, and any frames the router sends in response are in `out`.
    pub fn classify(
        &mut self,
        fib: &Fib,
        ingress: PortId,
        buf: PacketBuf,
        now: Instant,
        out: &mut Outbox,
    ) -> Option<Forward> {
        self.counters.inc(Counter::RxFrames);
        let our_mac = self.router.ports.get(ingress)?.spec.mac;
        let Ok(eth) = EthernetFrame::new_checked(&buf[..]) else {
            self.counters.inc(Counter::DropRunt);
            return None;
        };
        let dst = eth.dst_addr();
        let l2_for_us = dst == our_mac;
        if !l2_for_us && dst.is_unicast() {
            self.counters.inc(Counter::DropNotOurMac);
            return None;
        }
        if eth.is_tagged() {
            self.counters.inc(Counter::DropVlanTagged);
            return None;
        }
        match eth.ethertype() {
            EtherType::ARP => {
                self.arp(ingress, buf, now, out);
                None
            }
            EtherType::IPV4 => self.ipv4(fib, ingress, buf, l2_for_us, now, out),
            EtherType::IPV6 => self.ipv6(fib, ingress, buf, l2_for_us, now, out),
            _ => {
                self.counters.inc(Counter::DropUnknownEthertype);
                None
            }
        }
    }

    // ---- ARP (RFC 826) -------------------------------------------------------------

    fn arp(&mut self, ingress: PortId, mut buf: PacketBuf, now: Instant, out: &mut Outbox) {
        let router = Arc::clone(&self.router);
        let port = &router.ports[ingress];
        let repr = match ArpPacket::new_checked(&buf[ethernet::HEADER_LEN..])
            .and_then(|p| ArpRepr::parse(&p))
        {
            Ok(r) => r,
            Err(_) => {
                self.counters.inc(Counter::DropArpMalformed);
                return;
            }
        };
        let target_ours = port
            .spec
            .v4
            .iter()
            .any(|&(a, _)| a == repr.target_protocol_addr);
        let sender_on_link = port.spec.v4.iter().any(|&(a, l)| {
            IpPrefix::new(IpAddr::V4(a), l)
                .is_some_and(|p| p.contains(IpAddr::V4(repr.source_protocol_addr)))
        });
        if sender_on_link && repr.source_hardware_addr.is_unicast() {
            // RFC 826: merge the sender into the table; create only if it is talking
            // to us.
            let released = {
                let mut n = lock(&router.neighbors);
                let r = n.learn(
                    ingress,
                    IpAddr::V4(repr.source_protocol_addr),
                    repr.source_hardware_addr,
                    target_ours,
                    now,
                );
                router.neighbor_gen.store(n.generation(), Ordering::Release);
                r
            };
            self.counters.inc(Counter::ArpLearned);
            self.release(ingress, repr.source_hardware_addr, released, out);
        }
        if repr.operation != ArpOperation::REQUEST {
            return;
        }
        if !target_ours {
            self.counters.inc(Counter::DropArpNotForUs);
            return;
        }
        // Answer in place: the request's buffer becomes the reply.
        let reply = ArpRepr {
            operation: ArpOperation::REPLY,
            source_hardware_addr: port.spec.mac,
            source_protocol_addr: repr.target_protocol_addr,
            target_hardware_addr: repr.source_hardware_addr,
            target_protocol_addr: repr.source_protocol_addr,
        };
        if !buf.set_len(MIN_FRAME) {
            self.counters.inc(Counter::DropNoBuffer);
            return;
        }
        buf.fill(0);
        let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
        eth.set_dst_addr(repr.source_hardware_addr);
        eth.set_src_addr(port.spec.mac);
        eth.set_tag_and_ethertype(None, EtherType::ARP);
        let mut arp = ArpPacket::new_unchecked(&mut buf[ethernet::HEADER_LEN..]);
        if reply.emit(&mut arp).is_ok() {
            self.counters.inc(Counter::ArpReplied);
            out.push((ingress, buf));
        }
    }

    fn send_arp_request(&mut self, port_id: PortId, target: Ipv4Addr, out: &mut Outbox) {
        let router = Arc::clone(&self.router);
        let Some(port) = router.ports.get(port_id) else {
            return;
        };
        let src = port
            .spec
            .v4
            .iter()
            .find(|&&(a, l)| {
                IpPrefix::new(IpAddr::V4(a), l).is_some_and(|p| p.contains(IpAddr::V4(target)))
            })
            .or(port.spec.v4.first())
            .map(|&(a, _)| a);
        let Some(src) = src else {
            self.counters.inc(Counter::DropNoSourceAddress);
            return;
        };
        let Some(mut buf) = self.alloc(MIN_FRAME) else {
            return;
        };
        let mut eth = EthernetFrame::new_unchecked(&mut buf[..]);
        eth.set_dst_addr(EthernetAddress::BROADCAST);
        eth.set_src_addr(port.spec.mac);
        eth.set_tag_and_ethertype(None, EtherType::ARP);
        let req = ArpRepr {
            operation: ArpOperation::REQUEST,
            source_hardware_addr: port.spec.mac,
            source_protocol_addr: src,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: target,
        };
        if req
            .emit(&mut ArpPacket::new_unchecked(
                &mut buf[ethernet::HEADER_LEN..],
            ))
            .is_ok()
        {
            self.counters.inc(Counter::ArpRequestsSent);
            out.push((port_id, buf));
        }
    }

    // ---- IPv4 (RFC 791, RFC 1812) ------------------------------------------------------

    fn ipv4(
        &mut self,
        fib: &Fib,
        ingress: PortId,
        mut buf: PacketBuf,
        l2_for_us: bool,
        now: Instant,
        out: &mut Outbox,
    ) -> Option<Forward> {
        let payload = &buf[ethernet::HEADER_LEN..];
        // RFC 1812 §5.2.2: the checks a router must make, each with its own counter.
        if payload.len() < ipv4::HEADER_LEN {
            self.counters.inc(Counter::DropIpv4Truncated);
            return None;
        }
        let view = Ipv4Packet::new_unchecked(payload);
        if view.version() != 4 {
            self.counters.inc(Counter::DropIpVersion);
            return None;
        }
        if view.header_len() < ipv4::HEADER_LEN {
            self.counters.inc(Counter::DropIpv4BadIhl);
            return None;
        }
        if view.header_len() > payload.len() {
            self.counters.inc(Counter::DropIpv4Truncated);
            return None;
        }
        let total = usize::from(view.total_len());
        if total < view.header_len() || total > payload.len() {
            self.counters.inc(Counter::DropIpv4BadTotalLength);
            return None;
        }
        let Ok(ip) = Ipv4Packet::new_checked(payload) else {
            self.counters.inc(Counter::DropIpv4BadTotalLength);
            return None;
        };
        if !ip.verify_checksum() {
            self.counters.inc(Counter::DropIpv4BadChecksum);
            return None;
        }
        let (src, dst, ttl) = (ip.src_addr(), ip.dst_addr(), ip.ttl());
        let dont_frag = ip.dont_frag();
        let has_options = ip.header_len() > ipv4::HEADER_LEN;
        if has_options {
            match check_ipv4_options(ip.options()) {
                OptionsCheck::Ok => {}
                OptionsCheck::Malformed => {
                    self.counters.inc(Counter::DropIpv4BadOptions);
                    return None;
                }
                OptionsCheck::SourceRoute => {
                    self.counters.inc(Counter::DropIpv4SourceRoute);
                    return None;
                }
            }
        }
        // RFC 1812 §5.3.7: martian sources.
        if src.is_multicast() || src.is_broadcast() || src.is_loopback() || src.is_unspecified() {
            self.counters.inc(Counter::DropMartianSource);
            return None;
        }
        // Ethernet padding is not part of the packet.
        let frame_len = ethernet::HEADER_LEN + total;
        if !buf.set_len(frame_len) {
            self.counters.inc(Counter::DropIpv4BadTotalLength);
            return None;
        }
        if self.router.is_local_v4(dst) {
            self.local_v4(fib, ingress, buf, now, out);
            return None;
        }
        if dst.is_loopback()
            || dst.is_unspecified()
            || dst.octets()[0] == 0
            || dst.is_broadcast()
            || self.router.is_subnet_broadcast(dst)
        {
            self.counters.inc(Counter::DropMartianDestination);
            return None;
        }
        if dst.is_multicast() || !l2_for_us {
            self.counters.inc(Counter::DropMulticast);
            return None;
        }
        // RFC 1812 §5.3.1: a packet that would leave with TTL 0 is dropped here.
        if ttl <= 1 {
            self.counters.inc(Counter::DropTtlExceeded);
            self.icmp_error_v4(fib, ingress, &buf, IcmpError::TimeExceeded, now, out);
            return None;
        }
        let Some(nh) = fib.lookup_v4(dst) else {
            self.counters.inc(Counter::DropNoRoute);
            self.icmp_error_v4(fib, ingress, &buf, IcmpError::NoRoute, now, out);
            return None;
        };
        let max = self
            .router
            .ports
            .get(nh.port)
            .map_or(0, |p| p.spec.max_frame);
        let mtu = max
            .saturating_sub(ethernet::HEADER_LEN)
            .min(usize::from(u16::MAX));
        if frame_len > max && dont_frag {
            // RFC 1191 §4 / RFC 1812 §5.2.7.1: fragmentation needed, with the next-hop
            // MTU, so the sender's path MTU discovery learns it.
            self.counters.inc(Counter::DropTooBig);
            let e = IcmpError::TooBig(mtu as u16);
            self.icmp_error_v4(fib, ingress, &buf, e, now, out);
            return None;
        }
        if has_options {
            self.counters.inc(Counter::Ipv4OptionsForwarded);
        }
        if frame_len > max {
            // RFC 1812 §5.2.6: without DF, a router fragments.
            self.fragment_v4(nh, dst, &buf, mtu, now, out);
            return None;
        }
        self.resolve_forward(nh, IpAddr::V4(dst), buf, true, now, out)
    }

    /// Split the validated IPv4 packet in `buf` (DF clear) into fragments of at most
    /// `mtu` bytes, after RFC 791 §3.2 ("An Example Fragmentation Procedure"): each
    /// fragment's data is a multiple of 8 bytes but the last's, offsets add to the
    /// packet's own (it may be a fragment already), MF is set on all but the last,
    /// which keeps the packet's MF; the first fragment carries every option, later
    /// ones only the options whose copied flag is set (RFC 791 §3.1). Fragments are
    /// finished here, on the ingress worker, and leave through `out` in order; this is
    /// the slow path, so it allocates a buffer per fragment from the pool.
    fn fragment_v4(
        &mut self,
        nh: NextHop,
        dst: Ipv4Addr,
        buf: &PacketBuf,
        mtu: usize,
        now: Instant,
        out: &mut Outbox,
    ) {
        let eth_header = &buf[..ethernet::HEADER_LEN];
        let ip = Ipv4Packet::new_unchecked(&buf[ethernet::HEADER_LEN..]);
        let (first_hlen, data) = (ip.header_len(), ip.payload());
        let mut later_options = [0u8; 40];
        let later_hlen = ipv4::HEADER_LEN + copied_options(ip.options(), &mut later_options);
        // The largest multiple of 8 that fits after each kind of header.
        let first_room = mtu.saturating_sub(first_hlen) & !7;
        let later_room = mtu.saturating_sub(later_hlen) & !7;
        let base = usize::from(ip.frag_offset());
        // RFC 791: every router can forward 68 bytes, so 8 bytes of data per fragment
        // always fit on a real link; an offset past the 13-bit field cannot be sent.
        if first_room == 0 || later_room == 0 || base + data.len() > usize::from(u16::MAX) {
            self.counters.inc(Counter::DropTooBig);
            return;
        }
        let mut pos = 0;
        while pos < data.len() {
            let (hlen, room) = if pos == 0 {
                (first_hlen, first_room)
            } else {
                (later_hlen, later_room)
            };
            let n = room.min(data.len() - pos);
            let more = pos + n < data.len() || ip.more_frags();
            let len = ethernet::HEADER_LEN + hlen + n;
            let Some(mut f) = self.alloc(len.max(MIN_FRAME)) else {
                // The fragments already sent are wasted; the receiver's reassembly
                // times out, as after any loss.
                return;
            };
            f[..ethernet::HEADER_LEN].copy_from_slice(eth_header);
            {
                let frag = &mut f[ethernet::HEADER_LEN..len];
                frag[..ipv4::HEADER_LEN].copy_from_slice(&ip.header()[..ipv4::HEADER_LEN]);
                if pos == 0 {
                    frag[ipv4::HEADER_LEN..hlen].copy_from_slice(ip.options());
                } else {
                    frag[ipv4::HEADER_LEN..hlen]
                        .copy_from_slice(&later_options[..hlen - ipv4::HEADER_LEN]);
                }
                frag[hlen..].copy_from_slice(&data[pos..pos + n]);
                let mut h = Ipv4Packet::new_unchecked(frag);
                h.set_version_header_len(hlen);
                h.set_total_len((hlen + n) as u16);
                h.set_frag(false, more, (base + pos) as u16);
                h.fill_checksum();
            }
            self.counters.inc(Counter::FragmentsCreated);
            if let Some(mut fw) = self.resolve_forward(nh, IpAddr::V4(dst), f, true, now, out) {
                self.router.finish(&mut fw.buf, fw.egress, fw.dst_mac);
                out.push((fw.egress, fw.buf));
            }
            pos += n;
        }
        self.counters.inc(Counter::Fragmented);
    }

    /// A packet for one of our IPv4 addresses.
    fn local_v4(
        &mut self,
        fib: &Fib,
        ingress: PortId,
        buf: PacketBuf,
        now: Instant,
        out: &mut Outbox,
    ) {
        let ip = Ipv4Packet::new_unchecked(&buf[ethernet::HEADER_LEN..]);
        if ip.more_frags() || ip.frag_offset() != 0 {
            self.counters.inc(Counter::DropLocalFragment);
            return;
        }
        let proto = ip.protocol();
        if proto != IpProtocol::ICMP {
            self.counters.inc(Counter::DropLocalProtocol);
            let e = if proto == IpProtocol::UDP || proto == IpProtocol::TCP {
                IcmpError::PortUnreachable
            } else {
                IcmpError::ProtocolUnreachable
            };
            self.icmp_error_v4(fib, ingress, &buf, e, now, out);
            return;
        }
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let repr = Icmpv4Packet::new_checked(ip.payload()).and_then(|p| Icmpv4Repr::parse(&p));
        match repr {
            Ok(Icmpv4Repr::EchoRequest {
                ident,
                seq_no,
                data,
            }) => {
                let reply = Icmpv4Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                if let Some(b) = self.build_v4(dst, src, &reply) {
                    self.counters.inc(Counter::EchoReplied);
                    self.originate(fib, b, IpAddr::V4(src), now, out);
                }
            }
            Ok(_) | Err(weft_wire::Error::Unsupported(_)) => {
                self.counters.inc(Counter::DropIcmpIgnored)
            }
            Err(_) => self.counters.inc(Counter::DropIcmpMalformed),
        }
    }

    /// An IPv4 + ICMP packet from `src` to `dst` in a fresh buffer, Ethernet header
    /// left for [`Worker::originate`].
    fn build_v4(
        &mut self,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        icmp: &Icmpv4Repr<'_>,
    ) -> Option<PacketBuf> {
        let icmp_len = icmp.buffer_len();
        let ip = Ipv4Repr {
            src_addr: src,
            dst_addr: dst,
            protocol: IpProtocol::ICMP,
            payload_len: icmp_len,
            ttl: OWN_TTL,
            dscp_ecn: 0,
            ident: 0,
            dont_frag: false,
        };
        let len = ethernet::HEADER_LEN + ip.buffer_len();
        let mut buf = self.alloc(len.max(MIN_FRAME))?;
        let ok = {
            let body = &mut buf[ethernet::HEADER_LEN..];
            let (h, rest) = body.split_at_mut(ipv4::HEADER_LEN);
            ip.emit(&mut Ipv4Packet::new_unchecked(h)).is_ok()
                && icmp
                    .emit(&mut Icmpv4Packet::new_unchecked(&mut rest[..icmp_len]))
                    .is_ok()
        };
        if !ok {
            self.counters.inc(Counter::DropNoBuffer);
            return None;
        }
        Some(buf)
    }

    /// Send an ICMPv4 error about the IPv4 packet in `offending` (RFC 1812 §4.3.2),
    /// subject to the rules about when not to, and to the rate limit.
    fn icmp_error_v4(
        &mut self,
        fib: &Fib,
        ingress: PortId,
        offending: &PacketBuf,
        kind: IcmpError,
        now: Instant,
        out: &mut Outbox,
    ) {
        let datagram = &offending[ethernet::HEADER_LEN..];
        let ip = Ipv4Packet::new_unchecked(datagram);
        // RFC 1812 §4.3.2.7: never about an ICMP error, a non-first fragment, a
        // non-unicast destination or source, or a link-layer broadcast.
        let eth_dst = EthernetFrame::new_unchecked(&offending[..]).dst_addr();
        let about_icmp_error = ip.protocol() == IpProtocol::ICMP
            && ip.payload().first().is_none_or(|&t| {
                !matches!(
                    Icmpv4Message(t),
                    Icmpv4Message::ECHO_REQUEST | Icmpv4Message::ECHO_REPLY
                ) && t != 13
                    && t != 14
            });
        let dst = ip.dst_addr();
        if about_icmp_error
            || ip.frag_offset() != 0
            || dst.is_multicast()
            || dst.is_broadcast()
            || !eth_dst.is_unicast()
        {
            self.counters.inc(Counter::IcmpSuppressed);
            return;
        }
        if !self.limiter.take(now) {
            self.counters.inc(Counter::IcmpRateLimited);
            return;
        }
        let Some(&(our, _)) = self
            .router
            .ports
            .get(ingress)
            .and_then(|p| p.spec.v4.first())
        else {
            self.counters.inc(Counter::DropNoSourceAddress);
            return;
        };
        let quote = icmpv4::quote(datagram);
        let (repr, counter) = match kind {
            IcmpError::TimeExceeded => (
                Icmpv4Repr::TimeExceeded {
                    code: icmpv4::time_exceeded::TTL,
                    invoking: quote,
                },
                Counter::TimeExceededSent,
            ),
            IcmpError::NoRoute => (
                Icmpv4Repr::DstUnreachable {
                    code: icmpv4::unreachable::NET,
                    next_hop_mtu: 0,
                    invoking: quote,
                },
                Counter::UnreachableSent,
            ),
            IcmpError::PortUnreachable => (
                Icmpv4Repr::DstUnreachable {
                    code: icmpv4::unreachable::PORT,
                    next_hop_mtu: 0,
                    invoking: quote,
                },
                Counter::UnreachableSent,
            ),
            IcmpError::ProtocolUnreachable => (
                Icmpv4Repr::DstUnreachable {
                    code: icmpv4::unreachable::PROTOCOL,
                    next_hop_mtu: 0,
                    invoking: quote,
                },
                Counter::UnreachableSent,
            ),
            IcmpError::TooBig(mtu) => (
                Icmpv4Repr::DstUnreachable {
                    code: icmpv4::unreachable::FRAG_NEEDED,
                    next_hop_mtu: mtu,
                    invoking: quote,
                },
                Counter::TooBigSent,
            ),
        };
        let to = ip.src_addr();
        // A port-unreachable answers from the address that was asked.
        let from = if matches!(
            kind,
            IcmpError::PortUnreachable | IcmpError::ProtocolUnreachable
        ) {
            dst
        } else {
            our
        };
        if let Some(b) = self.build_v4(from, to, &repr) {
            self.counters.inc(counter);
            self.originate(fib, b, IpAddr::V4(to), now, out);
        }
    }

    // ---- IPv6 (RFC 8200, RFC 4861, RFC 4443) -------------------------------------------

    fn ipv6(
        &mut self,
        fib: &Fib,
        ingress: PortId,
        mut buf: PacketBuf,
        l2_for_us: bool,
        now: Instant,
        out: &mut Outbox,
    ) -> Option<Forward> {
        let payload = &buf[ethernet::HEADER_LEN..];
        if payload.len() < ipv6::HEADER_LEN {
            self.counters.inc(Counter::DropIpv6Truncated);
            return None;
        }
        let ip = match Ipv6Packet::new_checked(payload) {
            Ok(ip) => ip,
            Err(weft_wire::Error::Malformed(_)) => {
                self.counters.inc(Counter::DropIpVersion);
                return None;
            }
            Err(_) => {
                self.counters.inc(Counter::DropIpv6BadPayloadLength);
                return None;
            }
        };
        let (src, dst, hop) = (ip.src_addr(), ip.dst_addr(), ip.hop_limit());
        if src.is_multicast() || src.is_loopback() {
            self.counters.inc(Counter::DropMartianSource);
            return None;
        }
        let frame_len = ethernet::HEADER_LEN + ip.total_len();
        if !buf.set_len(frame_len) {
            self.counters.inc(Counter::DropIpv6BadPayloadLength);
            return None;
        }
        let ip = Ipv6Packet::new_unchecked(&buf[ethernet::HEADER_LEN..]);
        let upper = ip.upper_layer();
        // Neighbour discovery and everything for us.
        let for_us = self.router.is_local_v6(dst)
            || dst == Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1)
            || self.router.ports.get(ingress).is_some_and(|p| {
                solicited_node(p.link_local) == dst
                    || p.spec.v6.iter().any(|&(a, _)| solicited_node(a) == dst)
            });
        if for_us {
            match upper {
                Ok((proto, off)) => self.local_v6(fib, ingress, buf, proto, off, now, out),
                Err(_) => self.counters.inc(Counter::DropIpv6BadExtHeaders),
            }
            return None;
        }
        if dst.is_loopback() || dst.is_unspecified() {
            self.counters.inc(Counter::DropMartianDestination);
            return None;
        }
        if dst.is_multicast() || !l2_for_us {
            self.counters.inc(Counter::DropMulticast);
            return None;
        }
        // RFC 4291 §2.5.6: link-local never leaves its link.
        if dst.is_unicast_link_local() || src.is_unicast_link_local() {
            self.counters.inc(Counter::DropLinkLocalScope);
            return None;
        }
        if upper.is_err() {
            self.counters.inc(Counter::DropIpv6BadExtHeaders);
            return None;
        }
        if src.is_unspecified() {
            self.counters.inc(Counter::DropMartianSource);
            return None;
        }
        if hop <= 1 {
            self.counters.inc(Counter::DropHopLimitExceeded);
            self.icmp_error_v6(fib, ingress, &buf, IcmpError::TimeExceeded, now, out);
            return None;
        }
        let Some(nh) = fib.lookup_v6(dst) else {
            self.counters.inc(Counter::DropNoRoute);
            self.icmp_error_v6(fib, ingress, &buf, IcmpError::NoRoute, now, out);
            return None;
        };
        let max = self
            .router
            .ports
            .get(nh.port)
            .map_or(0, |p| p.spec.max_frame);
        if frame_len > max {
            self.counters.inc(Counter::DropTooBig);
            let mtu = max
                .saturating_sub(ethernet::HEADER_LEN)
                .min(usize::from(u16::MAX)) as u16;
            self.icmp_error_v6(fib, ingress, &buf, IcmpError::TooBig(mtu), now, out);
            return None;
        }
        self.resolve_forward(nh, IpAddr::V6(dst), buf, true, now, out)
    }

    #[allow(clippy::too_many_arguments)]
    fn local_v6(
        &mut self,
        fib: &Fib,
        ingress: PortId,
        buf: PacketBuf,
        proto: IpProtocol,
        off: usize,
        now: Instant,
        out: &mut Outbox,
    ) {
        let ip = Ipv6Packet::new_unchecked(&buf[ethernet::HEADER_LEN..]);
        let (src, dst, hop) = (ip.src_addr(), ip.dst_addr(), ip.hop_limit());
        if !matches!(ip.fragment(), Ok(None)) {
            self.counters.inc(Counter::DropLocalFragment);
            return;
        }
        let end = ip.total_len();
        let upper = buf
            .get(ethernet::HEADER_LEN + off..ethernet::HEADER_LEN + end)
            .unwrap_or(&[]);
        if proto != IpProtocol::IPV6_ICMP {
            self.counters.inc(Counter::DropLocalProtocol);
            if !dst.is_multicast() {
                self.icmp_error_v6(fib, ingress, &buf, IcmpError::PortUnreachable, now, out);
            }
            return;
        }
        let Ok(pkt) = Icmpv6Packet::new_checked(upper) else {
            self.counters.inc(Counter::DropIcmpMalformed);
            return;
        };
        let is_nd = matches!(
            pkt.msg_type(),
            Icmpv6Message::NEIGHBOR_SOLICIT | Icmpv6Message::NEIGHBOR_ADVERT
        );
        if is_nd && hop != ND_HOP_LIMIT {
            self.counters.inc(Counter::DropNdMalformed);
            return;
        }
        let repr = match Icmpv6Repr::parse(&pkt, src, dst) {
            Ok(r) => r,
            Err(weft_wire::Error::Unsupported(_)) if !is_nd => {
                self.counters.inc(Counter::DropIcmpIgnored);
                return;
            }
            Err(_) => {
                self.counters.inc(if is_nd {
                    Counter::DropNdMalformed
                } else {
                    Counter::DropIcmpMalformed
                });
                return;
            }
        };
        match repr {
            Icmpv6Repr::EchoRequest {
                ident,
                seq_no,
                data,
            } if !dst.is_multicast() => {
                let reply = Icmpv6Repr::EchoReply {
                    ident,
                    seq_no,
                    data,
                };
                if let Some(b) = self.build_v6(dst, src, OWN_TTL, &reply) {
                    self.counters.inc(Counter::EchoReplied);
                    self.originate(fib, b, IpAddr::V6(src), now, out);
                }
            }
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                source_lladdr,
            } => {
                let eth_src = EthernetFrame::new_unchecked(&buf[..]).src_addr();
                self.neighbor_solicit(ingress, src, target_addr, source_lladdr, eth_src, now, out);
            }
            Icmpv6Repr::NeighborAdvert {
                target_addr,
                target_lladdr,
                solicited,
                ..
            } => {
                let mac = target_lladdr
                    .unwrap_or_else(|| EthernetFrame::new_unchecked(&buf[..]).src_addr());
                let released = {
                    let router = Arc::clone(&self.router);
                    let mut n = lock(&router.neighbors);
                    let r = n.learn(ingress, IpAddr::V6(target_addr), mac, solicited, now);
                    router.neighbor_gen.store(n.generation(), Ordering::Release);
                    r
                };
                self.counters.inc(Counter::NdLearned);
                self.release(ingress, mac, released, out);
            }
            _ => self.counters.inc(Counter::DropIcmpIgnored),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn neighbor_solicit(
        &mut self,
        ingress: PortId,
        src: Ipv6Addr,
        target: Ipv6Addr,
        source_lladdr: Option<EthernetAddress>,
        eth_src: EthernetAddress,
        now: Instant,
        out: &mut Outbox,
    ) {
        let router = Arc::clone(&self.router);
        let port = &router.ports[ingress];
        let ours = port.link_local == target || port.spec.v6.iter().any(|&(a, _)| a == target);
        if !ours {
            self.counters.inc(Counter::DropNdNotForUs);
            return;
        }
        // RFC 4861 §7.2.3: the solicitation's source link-layer address goes into the
        // cache (the solicitor is talking to us, so create the entry).
        if let (false, Some(mac)) = (src.is_unspecified(), source_lladdr) {
            let released = {
                let mut n = lock(&router.neighbors);
                let r = n.learn(ingress, IpAddr::V6(src), mac, true, now);
                router.neighbor_gen.store(n.generation(), Ordering::Release);
                r
            };
            self.counters.inc(Counter::NdLearned);
            self.release(ingress, mac, released, out);
        }
        // §7.2.4: solicited advert to the solicitor, or to all-nodes for DAD.
        let (dst_ip, dst_mac, solicited) = if src.is_unspecified() {
            let all = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
            (all, EthernetAddress::ipv6_multicast(all), false)
        } else {
            (src, source_lladdr.unwrap_or(eth_src), true)
        };
        let na = Icmpv6Repr::NeighborAdvert {
            router: true,
            solicited,
            override_: true,
            target_addr: target,
            target_lladdr: Some(port.spec.mac),
        };
        if let Some(mut b) = self.build_v6(target, dst_ip, ND_HOP_LIMIT, &na) {
            set_eth(&mut b, port.spec.mac, dst_mac, EtherType::IPV6);
            self.counters.inc(Counter::NdAdvertsSent);
            out.push((ingress, b));
        }
    }

    fn send_neighbor_solicit(&mut self, port_id: PortId, target: Ipv6Addr, out: &mut Outbox) {
        let router = Arc::clone(&self.router);
        let Some(port) = router.ports.get(port_id) else {
            return;
        };
        let src = if target.is_unicast_link_local() {
            port.link_local
        } else {
            port.spec
                .v6
                .iter()
                .find(|&&(a, l)| {
                    IpPrefix::new(IpAddr::V6(a), l).is_some_and(|p| p.contains(IpAddr::V6(target)))
                })
                .or(port.spec.v6.first())
                .map_or(port.link_local, |&(a, _)| a)
        };
        let group = solicited_node(target);
        let ns = Icmpv6Repr::NeighborSolicit {
            target_addr: target,
            source_lladdr: Some(port.spec.mac),
        };
        if let Some(mut b) = self.build_v6(src, group, ND_HOP_LIMIT, &ns) {
            set_eth(
                &mut b,
                port.spec.mac,
                EthernetAddress::ipv6_multicast(group),
                EtherType::IPV6,
            );
            self.counters.inc(Counter::NdSolicitsSent);
            out.push((port_id, b));
        }
    }

    fn build_v6(
        &mut self,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        hop: u8,
        icmp: &Icmpv6Repr<'_>,
    ) -> Option<PacketBuf> {
        let icmp_len = icmp.buffer_len();
        let ip = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::IPV6_ICMP,
            payload_len: icmp_len,
            hop_limit: hop,
            traffic_class: 0,
            flow_label: 0,
        };
        let len = ethernet::HEADER_LEN + ip.buffer_len();
        let mut buf = self.alloc(len.max(MIN_FRAME))?;
        let ok = {
            let body = &mut buf[ethernet::HEADER_LEN..];
            let (h, rest) = body.split_at_mut(ipv6::HEADER_LEN);
            ip.emit(&mut Ipv6Packet::new_unchecked(h)).is_ok()
                && icmp
                    .emit(
                        &mut Icmpv6Packet::new_unchecked(&mut rest[..icmp_len]),
                        src,
                        dst,
                    )
                    .is_ok()
        };
        if !ok {
            self.counters.inc(Counter::DropNoBuffer);
            return None;
        }
        Some(buf)
    }

    /// RFC 4443 §2.4: send an ICMPv6 error about the IPv6 packet in `offending`.
    fn icmp_error_v6(
        &mut self,
        fib: &Fib,
        ingress: PortId,
        offending: &PacketBuf,
        kind: IcmpError,
        now: Instant,
        out: &mut Outbox,
    ) {
        let packet = &offending[ethernet::HEADER_LEN..];
        let ip = Ipv6Packet::new_unchecked(packet);
        // §2.4(e): not about an ICMPv6 error (or one we cannot classify), not to or
        // from a non-unicast address (Packet Too Big excepted for multicast dst).
        let about_error = match ip.upper_layer() {
            Ok((IpProtocol::IPV6_ICMP, off)) => packet.get(off).is_none_or(|&t| t < 128),
            Ok(_) => false,
            Err(_) => true,
        };
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        if about_error
            || src.is_unspecified()
            || src.is_multicast()
            || (dst.is_multicast() && !matches!(kind, IcmpError::TooBig(_)))
        {
            self.counters.inc(Counter::IcmpSuppressed);
            return;
        }
        if !self.limiter.take(now) {
            self.counters.inc(Counter::IcmpRateLimited);
            return;
        }
        let router = Arc::clone(&self.router);
        let Some(port) = router.ports.get(ingress) else {
            return;
        };
        let our = match kind {
            IcmpError::PortUnreachable | IcmpError::ProtocolUnreachable => dst,
            _ => port.spec.v6.first().map_or(port.link_local, |&(a, _)| a),
        };
        let quote = icmpv6::quote(packet);
        let (repr, counter) = match kind {
            IcmpError::TimeExceeded => (
                Icmpv6Repr::TimeExceeded {
                    code: 0,
                    invoking: quote,
                },
                Counter::TimeExceededSent,
            ),
            IcmpError::NoRoute => (
                Icmpv6Repr::DstUnreachable {
                    code: 0,
                    invoking: quote,
                },
                Counter::UnreachableSent,
            ),
            IcmpError::PortUnreachable | IcmpError::ProtocolUnreachable => (
                Icmpv6Repr::DstUnreachable {
                    code: 4,
                    invoking: quote,
                },
                Counter::UnreachableSent,
            ),
            IcmpError::TooBig(mtu) => (
                Icmpv6Repr::PacketTooBig {
                    mtu: u32::from(mtu),
                    invoking: quote,
                },
                Counter::TooBigSent,
            ),
        };
        if let Some(b) = self.build_v6(our, src, OWN_TTL, &repr) {
            self.counters.inc(counter);
            self.originate(fib, b, IpAddr::V6(src), now, out);
        }
    }

    // ---- next hops ----------------------------------------------------------------------

    /// Route and send a packet the router made itself (IP header at offset 14, TTL
    /// already final).
    fn originate(
        &mut self,
        fib: &Fib,
        buf: PacketBuf,
        dst: IpAddr,
        now: Instant,
        out: &mut Outbox,
    ) {
        let Some(nh) = fib.lookup(dst) else {
            self.counters.inc(Counter::DropNoRoute);
            return;
        };
        if let Some(f) = self.resolve_forward(nh, dst, buf, false, now, out) {
            let mut b = f.buf;
            let src = self
                .router
                .ports
                .get(f.egress)
                .map_or(EthernetAddress([0; 6]), |p| p.spec.mac);
            let et = if dst.is_ipv4() {
                EtherType::IPV4
            } else {
                EtherType::IPV6
            };
            set_eth(&mut b, src, f.dst_mac, et);
            out.push((f.egress, b));
        }
    }

    /// The MAC for the next hop, from this worker's cache, or the shared table; when
    /// unknown the packet is queued and a request sent.
    fn resolve_forward(
        &mut self,
        nh: NextHop,
        dst: IpAddr,
        buf: PacketBuf,
        forwarded: bool,
        now: Instant,
        out: &mut Outbox,
    ) -> Option<Forward> {
        let hop = nh.via.unwrap_or(dst);
        let gen = self.router.neighbor_gen.load(Ordering::Acquire);
        if gen != self.cache_gen {
            self.cache.clear();
            self.cache_gen = gen;
        }
        if let Some(&(mac, until)) = self.cache.get(&(nh.port, hop)) {
            if now < until {
                if forwarded {
                    self.counters.inc(Counter::Forwarded);
                }
                return Some(Forward {
                    buf,
                    egress: nh.port,
                    dst_mac: mac,
                });
            }
        }
        let router = Arc::clone(&self.router);
        let mut table = lock(&router.neighbors);
        match table.lookup(nh.port, hop, now) {
            Lookup::Known {
                mac,
                valid_until,
                refresh,
            } => {
                drop(table);
                self.cache.insert((nh.port, hop), (mac, valid_until));
                if refresh {
                    self.send_request(nh.port, hop, out);
                }
                if forwarded {
                    self.counters.inc(Counter::Forwarded);
                }
                Some(Forward {
                    buf,
                    egress: nh.port,
                    dst_mac: mac,
                })
            }
            Lookup::Unknown => {
                let r = table.enqueue(nh.port, hop, Waiting { buf, forwarded }, now);
                router
                    .neighbor_gen
                    .store(table.generation(), Ordering::Release);
                drop(table);
                match r {
                    Enqueued::Queued { send_request } => {
                        self.counters.inc(Counter::QueuedForNeighbor);
                        if send_request {
                            self.send_request(nh.port, hop, out);
                        }
                    }
                    Enqueued::Full(_) => self.counters.inc(Counter::DropNeighborQueueFull),
                }
                None
            }
        }
    }

    fn send_request(&mut self, port: PortId, hop: IpAddr, out: &mut Outbox) {
        match hop {
            IpAddr::V4(a) => self.send_arp_request(port, a, out),
            IpAddr::V6(a) => self.send_neighbor_solicit(port, a, out),
        }
    }

    /// Finish and send packets that waited for `mac` on `port`.
    fn release(
        &mut self,
        port: PortId,
        mac: EthernetAddress,
        waiting: Vec<Waiting>,
        out: &mut Outbox,
    ) {
        let src = self
            .router
            .ports
            .get(port)
            .map_or(EthernetAddress([0; 6]), |p| p.spec.mac);
        for w in waiting {
            let mut b = w.buf;
            if w.forwarded {
                rewrite_forwarded(&mut b, src, mac);
                self.counters.inc(Counter::Forwarded);
            } else if let Ok(mut eth) = EthernetFrame::new_checked(&mut b[..]) {
                eth.set_src_addr(src);
                eth.set_dst_addr(mac);
            }
            self.counters.inc(Counter::ReleasedFromQueue);
            out.push((port, b));
        }
    }

    /// Timers: retransmit neighbour requests and drop what never resolved. Cheap when
    /// called often: it runs at most every 100 ms across all workers.
    pub fn tick(&mut self, now: Instant, out: &mut Outbox) {
        if self
            .last_tick
            .is_some_and(|l| now < l + Duration::from_millis(100))
        {
            return;
        }
        self.last_tick = Some(now);
        let router = Arc::clone(&self.router);
        {
            let mut last = lock(&router.last_tick);
            if last.is_some_and(|l| now < l + Duration::from_millis(100)) {
                return;
            }
            *last = Some(now);
        }
        let t = {
            let mut n = lock(&router.neighbors);
            let t = n.tick(now);
            router.neighbor_gen.store(n.generation(), Ordering::Release);
            t
        };
        for (port, ip) in t.requests {
            self.send_request(port, ip, out);
        }
        self.counters
            .add(Counter::DropNeighborUnreachable, t.failed.len() as u64);
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

fn set_eth(buf: &mut [u8], src: EthernetAddress, dst: EthernetAddress, et: EtherType) {
    if let Ok(mut eth) = EthernetFrame::new_checked(buf) {
        eth.set_dst_addr(dst);
        eth.set_src_addr(src);
        eth.set_tag_and_ethertype(None, et);
    }
}

#[derive(Debug, PartialEq, Eq)]
enum OptionsCheck {
    Ok,
    Malformed,
    SourceRoute,
}

/// The options of `opts` whose copied flag is set (RFC 791 §3.1: they go into every
/// fragment), written to `to` and padded with end-of-list to a multiple of 4; returns
/// the padded length. `opts` passed [`check_ipv4_options`]; a malformed tail ends the
/// walk all the same.
fn copied_options(opts: &[u8], to: &mut [u8; 40]) -> usize {
    let (mut i, mut n) = (0, 0);
    while let Some(&kind) = opts.get(i) {
        match kind {
            0 => break,
            1 => i += 1,
            _ => {
                let len = usize::from(opts.get(i + 1).copied().unwrap_or(0));
                let Some(opt) = opts.get(i..i + len).filter(|_| len >= 2) else {
                    break;
                };
                if kind & 0x80 != 0 && n + len <= to.len() {
                    to[n..n + len].copy_from_slice(opt);
                    n += len;
                }
                i += len;
            }
        }
    }
    let padded = n.div_ceil(4) * 4;
    to[n..padded].fill(0);
    padded
}

/// Walk IPv4 options (RFC 791 §3.1): type 0 ends the list, type 1 is one byte, every
/// other option has a length byte of at least 2 that must stay inside the header.
fn check_ipv4_options(opts: &[u8]) -> OptionsCheck {
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            0 => return OptionsCheck::Ok,
            1 => i += 1,
            t => {
                let Some(&len) = opts.get(i + 1) else {
                    return OptionsCheck::Malformed;
                };
                let len = usize::from(len);
                if len < 2 || i + len > opts.len() {
                    return OptionsCheck::Malformed;
                }
                // Loose (131) and strict (137) source route.
                if t == 131 || t == 137 {
                    return OptionsCheck::SourceRoute;
                }
                i += len;
            }
        }
    }
    OptionsCheck::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copied_options_keep_only_the_copied_flag_padded_to_four() {
        let mut to = [0xaa; 40];
        // NOP, record route (not copied), router alert (copied), EOL, junk after it.
        let n = copied_options(&[1, 7, 7, 4, 0, 0, 0, 0, 148, 4, 0, 0, 0, 148], &mut to);
        assert_eq!(&to[..n], &[148, 4, 0, 0]);
        // A copied option of odd length is padded with end-of-list.
        let n = copied_options(&[130, 3, 9], &mut to);
        assert_eq!(&to[..n], &[130, 3, 9, 0]);
        // Nothing copied, or a length running past the end: nothing, no panic.
        assert_eq!(copied_options(&[7, 7, 4, 0, 0, 0, 0], &mut to), 0);
        assert_eq!(copied_options(&[148, 40, 0], &mut to), 0);
        assert_eq!(copied_options(&[148, 0], &mut to), 0);
        assert_eq!(copied_options(&[], &mut to), 0);
    }

    #[test]
    fn option_walk() {
        assert_eq!(check_ipv4_options(&[1, 1, 1, 0]), OptionsCheck::Ok);
        assert_eq!(
            check_ipv4_options(&[7, 7, 4, 0, 0, 0, 0, 0]),
            OptionsCheck::Ok
        );
        assert_eq!(check_ipv4_options(&[7, 9, 4, 0]), OptionsCheck::Malformed);
        assert_eq!(check_ipv4_options(&[7, 1, 0, 0]), OptionsCheck::Malformed);
        assert_eq!(check_ipv4_options(&[7]), OptionsCheck::Malformed);
        assert_eq!(
            check_ipv4_options(&[131, 3, 4, 0]),
            OptionsCheck::SourceRoute
        );
    }

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

    #[test]
    fn token_bucket_refills_at_its_rate() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10.0, 2.0);
        assert!(b.take(t0) && b.take(t0));
        assert!(!b.take(t0));
        assert!(!b.take(t0 + Duration::from_millis(50)));
        assert!(b.take(t0 + Duration::from_millis(101)));
    }
}
