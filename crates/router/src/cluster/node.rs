//! The interconnect thread of a cluster node: one more participant of the data
//! plane's ring grid.
//!
//! - From the port workers it takes unfinished frames for other nodes' ports, picks
//!   each one's next node ([`Balancer`]), and gathers up to `batch` of them per next
//!   node into one message (one SGE per packet). A batch is sent when it is full,
//!   when the ingress burst has ended (the rings are empty), or when its oldest
//!   packet has waited the delay bound.
//! - From the fabric it takes messages, splits them ([`split`]) and runs each packet
//!   through [`Worker::classify_from_cluster`]: for a port of this node it is finished
//!   (TTL − 1, MACs) and posted to that port's ring; for another node's port (this
//!   node was a VLB intermediate) it is sent on once more.
//! - Frames the pipeline makes itself here (ICMP errors, neighbour requests) go the
//!   same ways.
//!
//! Every drop has a counter: per peer (shown by `show interconnect`) and in the
//! router's counters.
#![forbid(unsafe_code)]

use super::balance::{bucket_of, direct_path_loaded, flow_hash, Balancer, ReorderCounter, BUCKETS};
use super::batch::{prepend_header, split, PacketHeader, SplitError, HEADER_LEN};
use super::config::ClusterPlan;
use super::fabric::{Fabric, FabricError};
use crate::counters::Counter;
use crate::dataplane::{Desc, Idle, Options, Outbound};
use crate::fib::PortId;
use crate::pipeline::{Outbox, Worker};
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_link::spsc::Consumer;
use weft_link::{BufferPool, PacketBuf};

/// What the interconnect thread needs: the fabric, the plan, a buffer pool for the
/// packets it receives (the pool the ports use, which the real fabric registers: a
/// packet leaves from the buffer it arrived in).
pub struct Interconnect {
    fabric: Box<dyn Fabric>,
    plan: ClusterPlan,
    pool: BufferPool,
}

impl std::fmt::Debug for Interconnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interconnect")
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl Interconnect {
    /// An interconnect for node `plan.me` over `fabric`.
    pub fn new(fabric: Box<dyn Fabric>, plan: ClusterPlan, pool: BufferPool) -> Interconnect {
        Interconnect { fabric, plan, pool }
    }

    /// The pool received packets are copied into.
    pub fn pool(&self) -> &BufferPool {
        &self.pool
    }
}

/// One peer's counters.
#[derive(Debug, Default, Clone, Copy)]
struct PeerStats {
    tx_messages: u64,
    tx_packets: u64,
    tx_bytes: u64,
    tx_drops: u64,
    tx_copied: u64,
    rx_messages: u64,
    rx_packets: u64,
    rx_bytes: u64,
    rx_drops: u64,
    reordered: u64,
}

impl PeerStats {
    fn rows(&self, up: bool) -> Vec<(&'static str, u64)> {
        let per = |p: u64, m: u64| (p * 100).checked_div(m).unwrap_or(0);
        vec![
            ("up", u64::from(up)),
            ("tx_messages", self.tx_messages),
            ("tx_packets", self.tx_packets),
            ("tx_bytes", self.tx_bytes),
            (
                "tx_packets_per_message_x100",
                per(self.tx_packets, self.tx_messages),
            ),
            ("tx_drops", self.tx_drops),
            ("tx_copied", self.tx_copied),
            ("rx_messages", self.rx_messages),
            ("rx_packets", self.rx_packets),
            ("rx_bytes", self.rx_bytes),
            (
                "rx_packets_per_message_x100",
                per(self.rx_packets, self.rx_messages),
            ),
            ("rx_drops", self.rx_drops),
            ("rx_reordered", self.reordered),
        ]
    }
}

/// A batch being gathered for one next node: each buffer holds its packet's header
/// and frame.
#[derive(Debug, Default)]
struct Pending {
    packets: Vec<PacketBuf>,
    since: Option<Instant>,
}

/// The thread's state.
struct Node {
    ic: Interconnect,
    worker: Worker,
    to: Outbound,
    slot: usize,
    balancer: Balancer,
    reorder: ReorderCounter,
    seq: HashMap<u16, u16>,
    pending: HashMap<u8, Pending>,
    stats: HashMap<u8, PeerStats>,
    no_local_tx: Vec<PacketBuf>,
}

impl Node {
    fn stats(&mut self, peer: u8) -> &mut PeerStats {
        self.stats.entry(peer).or_default()
    }

    /// Queue an unfinished frame for port `egress` (another node's).
    fn enqueue(&mut self, buf: PacketBuf, egress: PortId, hdr: PacketHeader, now: Instant) {
        let Some(&owner) = self.ic.plan.owner.get(egress) else {
            self.worker.count(Counter::DropClusterMalformed, 1);
            return;
        };
        if owner == self.ic.plan.me {
            // Cannot happen: the pipeline finishes frames for our ports itself.
            self.worker.count(Counter::DropClusterMalformed, 1);
            return;
        }
        let next = if hdr.hops == 0 {
            let l = direct_path_loaded(self.ic.fabric.in_flight(owner), self.ic.fabric.depth());
            self.balancer.next_node(owner, hdr.bucket, l, now)
        } else {
            owner
        };
        let Some((buf, copied)) = self.framed(buf, &hdr) else {
            self.worker.count(Counter::DropNoBuffer, 1);
            return;
        };
        if copied {
            self.stats(next).tx_copied += 1;
        }
        let p = self.pending.entry(next).or_default();
        p.since.get_or_insert(now);
        p.packets.push(buf);
        if p.packets.len() >= self.ic.plan.batch {
            self.flush(next);
        }
    }

    /// `buf` with `hdr` in its headroom, and whether it had to be copied: a buffer
    /// without the headroom is copied into a fresh one first (`None`: the pool is
    /// empty).
    fn framed(&self, mut buf: PacketBuf, hdr: &PacketHeader) -> Option<(PacketBuf, bool)> {
        let hdr = PacketHeader {
            len: u16::try_from(buf.len()).ok()?,
            ..*hdr
        };
        if prepend_header(&mut buf, &hdr) {
            return Some((buf, false));
        }
        let mut fresh = self.ic.pool.alloc()?;
        // Just the header's room in front: a frame as long as the slot allows fits.
        let front = fresh.headroom().saturating_sub(HEADER_LEN);
        (fresh.prepend(front) && fresh.copy_from(&buf) && prepend_header(&mut fresh, &hdr))
            .then_some((fresh, true))
    }

    /// A frame that starts its crossing here: a fresh header.
    fn originate(&mut self, buf: PacketBuf, egress: PortId, ingress: PortId, now: Instant) {
        if buf.len() > usize::from(u16::MAX) || buf.len() + HEADER_LEN > self.ic.fabric.slot_size()
        {
            self.worker.count(Counter::DropTooBig, 1);
            return;
        }
        let bucket = bucket_of(flow_hash(&buf));
        let seq = self.seq.entry(bucket).or_insert(0);
        *seq = seq.wrapping_add(1);
        let hdr = PacketHeader {
            hops: 0,
            len: buf.len() as u16,
            ingress_port: u16::try_from(ingress).unwrap_or(u16::MAX),
            origin: self.ic.plan.me,
            bucket,
            seq: *seq,
        };
        self.enqueue(buf, egress, hdr, now);
    }

    /// Send the batch for `peer` as one message: the buffers go to the fabric (which
    /// gives them back to the pool when the send completed).
    fn flush(&mut self, peer: u8) {
        let Some(p) = self.pending.get_mut(&peer) else {
            return;
        };
        if p.packets.is_empty() {
            return;
        }
        p.since = None;
        let mut packets = std::mem::take(&mut p.packets);
        let n = packets.len() as u64;
        let r = self.ic.fabric.send(peer, &mut packets);
        // The emptied vector keeps its capacity for the next batch.
        if let Some(p) = self.pending.get_mut(&peer) {
            p.packets = packets;
        }
        let s = self.stats(peer);
        match r {
            Ok(r) => {
                if r.sent > 0 {
                    s.tx_messages += 1;
                }
                s.tx_packets += r.sent as u64;
                s.tx_bytes += r.bytes as u64;
                s.tx_copied += r.copied as u64;
                s.tx_drops += r.dropped as u64;
                if r.dropped > 0 {
                    self.worker.count(Counter::DropNoBuffer, r.dropped as u64);
                }
            }
            Err(e) => {
                s.tx_drops += n;
                let c = match e {
                    FabricError::PeerDown => Counter::DropClusterPeerDown,
                    FabricError::Full => Counter::DropClusterBacklog,
                };
                self.worker.count(c, n);
            }
        }
    }

    /// Send every batch that is due: all of them when `all` (the burst ended), else
    /// those whose oldest packet waited the delay bound.
    fn flush_due(&mut self, all: bool, now: Instant) {
        let delay = self.ic.plan.delay;
        let due: Vec<u8> = self
            .pending
            .iter()
            .filter(|(_, p)| {
                !p.packets.is_empty()
                    && (all
                        || p.since
                            .is_some_and(|t| now.saturating_duration_since(t) >= delay))
            })
            .map(|(&k, _)| k)
            .collect();
        for peer in due {
            self.flush(peer);
        }
    }

    /// A frame the pipeline produced here: to a port of ours, or across.
    fn route(&mut self, egress: PortId, buf: PacketBuf, ingress: PortId, now: Instant) {
        if self.worker.router().is_remote(egress) {
            self.worker.count(Counter::ClusterSent, 1);
            self.originate(buf, egress, ingress, now);
        } else {
            self.to.post(
                self.slot,
                egress,
                Desc::Ready(buf),
                &mut self.no_local_tx,
                &self.worker,
            );
        }
    }

    /// Split one received message and process its packets.
    fn receive(&mut self, from: u8, msg: &[u8], now: Instant, out: &mut Outbox) {
        let router = Arc::clone(self.worker.router());
        let fib = router.fib();
        let nports = router.ports().count();
        {
            let s = self.stats(from);
            s.rx_messages += 1;
            s.rx_bytes += msg.len() as u64;
        }
        for item in split(msg) {
            let (h, frame) = match item {
                Ok(x) => x,
                Err(e) => {
                    debug_assert!(matches!(
                        e,
                        SplitError::Truncated | SplitError::BadHeader | SplitError::Runt
                    ));
                    self.stats(from).rx_drops += 1;
                    self.worker.count(Counter::DropClusterMalformed, 1);
                    continue;
                }
            };
            self.stats(from).rx_packets += 1;
            self.worker.count(Counter::ClusterReceived, 1);
            let ingress = usize::from(h.ingress_port);
            if ingress >= nports
                || h.bucket >= BUCKETS
                || !self.ic.plan.nodes.iter().any(|&(id, _)| id == h.origin)
            {
                self.stats(from).rx_drops += 1;
                self.worker.count(Counter::DropClusterMalformed, 1);
                continue;
            }
            let Some(mut buf) = self.ic.pool.alloc() else {
                self.worker.count(Counter::DropNoBuffer, 1);
                continue;
            };
            if !buf.copy_from(frame) {
                self.worker.count(Counter::DropNoBuffer, 1);
                continue;
            }
            let Some(mut f) = self
                .worker
                .classify_from_cluster(&fib, ingress, buf, now, out)
            else {
                continue;
            };
            if router.is_remote(f.egress) {
                // A VLB intermediate sends it on; a packet that crossed before and
                // would cross again is in a loop (the FIBs disagree).
                if h.hops >= 1 {
                    self.worker.count(Counter::DropClusterLoop, 1);
                    continue;
                }
                self.worker.count(Counter::ClusterRelayed, 1);
                let hdr = PacketHeader {
                    hops: h.hops + 1,
                    ..h
                };
                self.enqueue(f.buf, f.egress, hdr, now);
                continue;
            }
            if self.reorder.note(h.origin, h.bucket, h.seq) {
                self.stats(h.origin).reordered += 1;
                self.worker.count(Counter::ClusterReordered, 1);
            }
            router.finish(&mut f.buf, f.egress, f.dst_mac);
            self.to.post(
                self.slot,
                f.egress,
                Desc::Ready(f.buf),
                &mut self.no_local_tx,
                &self.worker,
            );
        }
    }

    fn publish(&self) {
        let mut peers: Vec<u8> = self.ic.plan.peers().collect();
        peers.sort_unstable();
        let rows = peers
            .into_iter()
            .map(|p| {
                let s = self.stats.get(&p).copied().unwrap_or_default();
                (format!("node{p}"), s.rows(self.ic.fabric.is_up(p)))
            })
            .collect();
        self.worker.router().publish_interconnect(rows);
    }
}

/// The interconnect thread (ring slot `slot`).
pub(crate) fn run(
    slot: usize,
    ic: Interconnect,
    worker: Worker,
    to: Outbound,
    mut from: Vec<Consumer<Desc>>,
    opts: Options,
    stop: &AtomicBool,
) -> io::Result<()> {
    let nodes: Vec<u8> = ic.plan.nodes.iter().map(|&(id, _)| id).collect();
    let balancer = Balancer::new(ic.plan.balance, ic.plan.me, nodes);
    let mut n = Node {
        ic,
        worker,
        to,
        slot,
        balancer,
        reorder: ReorderCounter::default(),
        seq: HashMap::new(),
        pending: HashMap::new(),
        stats: HashMap::new(),
        no_local_tx: Vec::new(),
    };
    let mut descs = Vec::with_capacity(opts.burst);
    let mut out: Outbox = Vec::new();
    let mut msgs: Vec<(u8, Vec<u8>)> = Vec::new();
    let mut idle = Idle::new(opts.spin_before_wait);
    let mut last_publish: Option<Instant> = None;
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        n.to.flush();
        // From the ports: gather.
        let mut gathered = 0;
        for c in &mut from {
            gathered += c.pop_burst(&mut descs, opts.burst);
            for d in descs.drain(..) {
                match d {
                    Desc::Remote {
                        buf,
                        egress,
                        ingress,
                    } => n.originate(buf, egress, ingress, now),
                    other => {
                        // Only remote frames are posted here.
                        n.worker.count(Counter::DropClusterMalformed, 1);
                        drop(other);
                    }
                }
            }
        }
        // The burst ended (nothing more waiting): flush everything; else only what
        // waited the delay bound.
        n.flush_due(gathered == 0, now);
        // From the fabric: split and process.
        let got = n.ic.fabric.poll(&mut msgs);
        for (peer, m) in msgs.drain(..) {
            n.receive(peer, &m, now, &mut out);
            n.ic.fabric.recycle(m);
        }
        n.worker.tick(now, &mut out);
        for (e, b) in std::mem::take(&mut out) {
            // Made here: no ingress port; the egress port stands in (the header
            // needs a valid one).
            n.route(e, b, e, now);
        }
        // Relayed packets wait at most until the next round.
        if got > 0 {
            n.flush_due(from.iter_mut().all(|c| c.is_empty()), now);
        }
        n.to.doorbells();
        if last_publish.is_none_or(|t| now >= t + Duration::from_millis(100)) {
            last_publish = Some(now);
            n.publish();
        }
        if gathered > 0 || got > 0 {
            idle.busy();
        } else if idle.idle() {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    n.publish();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::config::{Balance, Interconnect as Kind, Transport};
    use super::super::fabric::mem::{self, MemFabric};
    use super::*;
    use crate::dataplane::Dataplane;
    use crate::pipeline::{PortSpec, Router, RouterConfig};
    use std::net::Ipv4Addr;
    use weft_link::sim::{self, SimLink};
    use weft_link::Link;
    use weft_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
    use weft_wire::ethernet::EthernetFrame;
    use weft_wire::ipv4::{Ipv4Packet, Ipv4Repr};
    use weft_wire::{EtherType, EthernetAddress, IpProtocol};

    fn rmac(i: usize) -> EthernetAddress {
        EthernetAddress([2, 0, 0, 0, i as u8 + 1, 1])
    }
    fn hmac(i: usize) -> EthernetAddress {
        EthernetAddress([2, 0, 0, 0, i as u8 + 1, 2])
    }
    fn host_ip(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(198, 18, i as u8 + 1, 2)
    }

    fn udp(from: usize, dst: Ipv4Addr, ttl: u8, sport: u16, seq: u16) -> Vec<u8> {
        let ip = Ipv4Repr {
            src_addr: host_ip(from),
            dst_addr: dst,
            protocol: IpProtocol::UDP,
            payload_len: 8,
            ttl,
            dscp_ecn: 0,
            ident: seq,
            dont_frag: true,
        };
        let mut f = vec![0u8; 14 + 28];
        let mut e = EthernetFrame::new_unchecked(&mut f[..]);
        e.set_dst_addr(rmac(from));
        e.set_src_addr(hmac(from));
        e.set_tag_and_ethertype(None, EtherType::IPV4);
        ip.emit(&mut Ipv4Packet::new_unchecked(&mut f[14..34]))
            .expect("ip");
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&9u16.to_be_bytes());
        f[38..40].copy_from_slice(&8u16.to_be_bytes());
        f
    }

    /// A UDP frame of `len` bytes (Ethernet header included) with DF as given.
    fn udp_sized(from: usize, dst: Ipv4Addr, len: usize, dont_frag: bool) -> Vec<u8> {
        let ip = Ipv4Repr {
            src_addr: host_ip(from),
            dst_addr: dst,
            protocol: IpProtocol::UDP,
            payload_len: len - 34,
            ttl: 64,
            dscp_ecn: 0,
            ident: 7,
            dont_frag,
        };
        let mut f = vec![0u8; len];
        let mut e = EthernetFrame::new_unchecked(&mut f[..]);
        e.set_dst_addr(rmac(from));
        e.set_src_addr(hmac(from));
        e.set_tag_and_ethertype(None, EtherType::IPV4);
        ip.emit(&mut Ipv4Packet::new_unchecked(&mut f[14..34]))
            .expect("ip");
        f[34..36].copy_from_slice(&5u16.to_be_bytes());
        f[36..38].copy_from_slice(&9u16.to_be_bytes());
        f[38..40].copy_from_slice(&((len - 34) as u16).to_be_bytes());
        f
    }

    /// A packet larger than the far port's MTU (1000-byte frames there): without DF it
    /// is fragmented on the ingress node and every fragment crosses unfinished, so the
    /// TTL still drops once; with DF the sender gets "fragmentation needed" with that
    /// MTU.
    #[test]
    fn a_packet_too_big_for_the_far_port_is_fragmented_once_or_refused() {
        let mut c = cluster_with_frames(2, &[1, 2], Balance::Direct, 8, &[1514, 1000]);
        assert!(c.hosts[0].send_bytes(&udp_sized(0, host_ip(1), 1400, false)));
        let got = c.hosts[1].recv_bytes_timeout(2, Duration::from_secs(10));
        let nonzero = |n: usize| -> Vec<(Counter, u64)> {
            c.nodes[n]
                .router()
                .counters()
                .into_iter()
                .filter(|&(_, v)| v > 0)
                .collect()
        };
        assert_eq!(
            got.len(),
            2,
            "two fragments: {:?} {:?}",
            nonzero(0),
            nonzero(1)
        );
        let mut payload = 0;
        for f in &got {
            assert!(f.len() <= 1000);
            let ip = Ipv4Packet::new_checked(&f[14..]).expect("ip");
            assert_eq!(ip.ttl(), 63, "decremented once, fragments too");
            assert!(ip.verify_checksum());
            payload += usize::from(ip.total_len()) - 20;
        }
        assert_eq!(payload, 1400 - 34, "every byte arrived");
        assert!(c.hosts[0].send_bytes(&udp_sized(0, host_ip(1), 1400, true)));
        let back = c.hosts[0].recv_bytes_timeout(1, Duration::from_secs(5));
        assert_eq!(back.len(), 1);
        let ip = Ipv4Packet::new_checked(&back[0][14..]).expect("ip");
        assert_eq!(ip.protocol(), IpProtocol::ICMP);
        assert_eq!(
            (ip.payload()[0], ip.payload()[1]),
            (3, 4),
            "fragmentation needed"
        );
        assert_eq!(u16::from_be_bytes([ip.payload()[6], ip.payload()[7]]), 986);
        stop(c);
    }

    fn arp_request(i: usize) -> Vec<u8> {
        let r = ArpRepr {
            operation: ArpOperation::REQUEST,
            source_hardware_addr: hmac(i),
            source_protocol_addr: host_ip(i),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(198, 18, i as u8 + 1, 1),
        };
        let mut f = vec![0u8; 42];
        let mut e = EthernetFrame::new_unchecked(&mut f[..]);
        e.set_dst_addr(EthernetAddress::BROADCAST);
        e.set_src_addr(hmac(i));
        e.set_tag_and_ethertype(None, EtherType::ARP);
        r.emit(&mut ArpPacket::new_unchecked(&mut f[14..]))
            .expect("arp");
        f
    }

    struct Cluster {
        hosts: Vec<SimLink>,
        nodes: Vec<Dataplane>,
        dead: Arc<std::sync::Mutex<std::collections::HashSet<u8>>>,
        sent: Arc<std::sync::Mutex<Vec<(u8, u8, usize)>>>,
        inject: std::sync::mpsc::Sender<(u8, Vec<u8>)>,
    }

    /// `owner[i]`: the node (1-based) of port i; one host behind each port.
    fn cluster(nodes: u8, owner: &[u8], balance: Balance, batch: usize) -> Cluster {
        cluster_with_frames(nodes, owner, balance, batch, &vec![1514; owner.len()])
    }

    /// [`cluster`] with each port's largest frame given.
    fn cluster_with_frames(
        nodes: u8,
        owner: &[u8],
        balance: Balance,
        batch: usize,
        max_frame: &[usize],
    ) -> Cluster {
        let pool = BufferPool::new(8192, 2048);
        let specs: Vec<PortSpec> = (0..owner.len())
            .map(|i| PortSpec {
                name: format!("p{i}"),
                mac: rmac(i),
                v4: vec![(Ipv4Addr::new(198, 18, i as u8 + 1, 1), 24)],
                v6: vec![],
                max_frame: max_frame[i],
            })
            .collect();
        let ids: Vec<u8> = (1..=nodes).collect();
        let (fabrics, dead, sent) = mem::fabric(&ids);
        let inject = fabrics[fabrics.len() - 1].tx[&(nodes)].clone();
        let mut hosts: Vec<Option<SimLink>> = (0..owner.len()).map(|_| None).collect();
        let mut dps = Vec::new();
        for f in fabrics {
            let me = f.me;
            let mut links: Vec<Option<Box<dyn Link>>> = Vec::new();
            for (i, &o) in owner.iter().enumerate() {
                if o == me {
                    let (r, h) = sim::pair(
                        &pool,
                        (&format!("r{i}"), rmac(i).0),
                        (&format!("h{i}"), hmac(i).0),
                        4096,
                    );
                    links.push(Some(Box::new(r)));
                    hosts[i] = Some(h);
                } else {
                    links.push(None);
                }
            }
            let remote = owner.iter().map(|&o| o != me).collect();
            let router = Router::with_remote_ports(specs.clone(), RouterConfig::default(), remote);
            let plan = ClusterPlan {
                me,
                nodes: ids
                    .iter()
                    .map(|&i| (i, std::net::IpAddr::from([198, 18, 100, i])))
                    .collect(),
                owner: owner.to_vec(),
                interconnect: Kind::Udp,
                batch,
                balance,
                transport: Transport::Uc,
                delay: Duration::from_micros(50),
                cm_port: 0,
            };
            let fab: MemFabric = f;
            let ic = Interconnect::new(Box::new(fab), plan, pool.clone());
            dps.push(
                Dataplane::start_cluster(router, links, ic, Options::default()).expect("start"),
            );
        }
        let mut hosts: Vec<SimLink> = hosts.into_iter().map(|h| h.expect("host")).collect();
        for (i, h) in hosts.iter_mut().enumerate() {
            assert!(h.send_bytes(&arp_request(i)));
            let got = h.recv_bytes_timeout(1, Duration::from_secs(5));
            assert_eq!(got.len(), 1, "ARP reply to host {i} from its port's owner");
        }
        Cluster {
            hosts,
            nodes: dps,
            dead,
            sent,
            inject,
        }
    }

    fn counter(c: &Cluster, node: usize, k: Counter) -> u64 {
        c.nodes[node].router().counter(k)
    }

    fn stop(c: Cluster) {
        for d in c.nodes {
            d.stop().expect("clean stop");
        }
    }

    #[test]
    fn two_nodes_forward_once_decrement_once_and_batch() {
        let mut c = cluster(2, &[1, 2], Balance::Direct, 8);
        // A burst of 64 packets for the far host, in 8 flows.
        for s in 0..64u16 {
            assert!(c.hosts[0].send_bytes(&udp(0, host_ip(1), 64, 1000 + s % 8, s)));
        }
        let got = c.hosts[1].recv_bytes_timeout(64, Duration::from_secs(10));
        assert_eq!(got.len(), 64);
        for f in &got {
            assert_eq!(&f[0..6], &hmac(1).0, "the owner resolved the next hop");
            assert_eq!(&f[6..12], &rmac(1).0);
            let ip = Ipv4Packet::new_checked(&f[14..]).expect("ip");
            assert_eq!(ip.ttl(), 63, "decremented once across the cluster");
            assert!(ip.verify_checksum());
        }
        // Packets per message: at most the batch, and batching happened.
        let sent = c.sent.lock().expect("l").clone();
        assert!(sent.iter().all(|&(f, t, n)| (f, t) == (1, 2) && n <= 8));
        assert_eq!(sent.iter().map(|s| s.2).sum::<usize>(), 64);
        assert!(sent.len() < 64, "some packets shared a message: {sent:?}");
        // TTL 1: time exceeded from the ingress port's address; TTL 2 reaches the
        // far host with TTL 1 (one hop).
        assert!(c.hosts[0].send_bytes(&udp(0, host_ip(1), 1, 5, 1)));
        let te = c.hosts[0].recv_bytes_timeout(1, Duration::from_secs(5));
        assert_eq!(te.len(), 1);
        let ip = Ipv4Packet::new_checked(&te[0][14..]).expect("ip");
        assert_eq!(ip.src_addr(), Ipv4Addr::new(198, 18, 1, 1));
        assert_eq!(ip.protocol(), IpProtocol::ICMP);
        assert_eq!(ip.payload()[0], 11, "time exceeded");
        assert!(c.hosts[0].send_bytes(&udp(0, host_ip(1), 2, 5, 2)));
        let far = c.hosts[1].recv_bytes_timeout(1, Duration::from_secs(5));
        assert_eq!(far.len(), 1);
        assert_eq!(Ipv4Packet::new_checked(&far[0][14..]).expect("ip").ttl(), 1);
        // And back the other way.
        for s in 0..10u16 {
            assert!(c.hosts[1].send_bytes(&udp(1, host_ip(0), 64, 7, s)));
        }
        assert_eq!(
            c.hosts[0]
                .recv_bytes_timeout(10, Duration::from_secs(5))
                .len(),
            10
        );
        assert_eq!(counter(&c, 0, Counter::ClusterSent), 65);
        assert_eq!(counter(&c, 1, Counter::ClusterReceived), 65);
        assert_eq!(counter(&c, 1, Counter::ClusterReordered), 0);
        assert_eq!(counter(&c, 1, Counter::Forwarded), 65);
        // The interconnect's counters reach `show interconnect`.
        std::thread::sleep(Duration::from_millis(250));
        let s = c.nodes[0].router().interconnect_stats();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].0, "node2");
        assert!(s[0].1.contains(&("tx_packets", 65)), "{s:?}");
        stop(c);
    }

    #[test]
    fn hostile_messages_are_counted_drops() {
        let mut c = cluster(2, &[1, 2], Balance::Direct, 4);
        let good = {
            let f = udp(0, host_ip(1), 64, 1, 1);
            let mut m = Vec::new();
            let h = PacketHeader {
                hops: 0,
                len: f.len() as u16,
                ingress_port: 0,
                origin: 1,
                bucket: 0,
                seq: 1,
            };
            super::super::batch::encode_contiguous([(h, &f[..])], &mut m);
            m
        };
        let mut bad_port = good.clone();
        bad_port[4..6].copy_from_slice(&99u16.to_be_bytes());
        let mut bad_origin = good.clone();
        bad_origin[6] = 77;
        let mut bad_bucket = good.clone();
        bad_bucket[8..10].copy_from_slice(&4096u16.to_be_bytes());
        let mut bad_magic = good.clone();
        bad_magic[0] = 0;
        let truncated = good[..good.len() - 1].to_vec();
        for m in [
            bad_port,
            bad_origin,
            bad_bucket,
            bad_magic,
            truncated,
            vec![0xff; 3],
            good,
        ] {
            c.inject.send((1, m)).expect("inject");
        }
        let got = c.hosts[1].recv_bytes_timeout(1, Duration::from_secs(5));
        assert_eq!(got.len(), 1, "only the good one");
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(counter(&c, 1, Counter::DropClusterMalformed), 6);
        stop(c);
    }

    #[test]
    fn vlb_crosses_twice_direct_once_and_a_dead_node_costs_only_its_traffic() {
        // Ports: 0 on node 1, 1 on node 2, 2 on node 3.
        for (balance, crossings) in [(Balance::Direct, 1), (Balance::Vlb, 2)] {
            let mut c = cluster(3, &[1, 2, 3], balance, 16);
            for s in 0..100u16 {
                assert!(c.hosts[0].send_bytes(&udp(0, host_ip(1), 64, s, s)));
            }
            let got = c.hosts[1].recv_bytes_timeout(100, Duration::from_secs(10));
            assert_eq!(got.len(), 100, "{balance:?}");
            for f in &got {
                let ip = Ipv4Packet::new_checked(&f[14..]).expect("ip");
                assert_eq!(ip.ttl(), 63, "{balance:?}: once, however many crossings");
            }
            let sent = c.sent.lock().expect("l").clone();
            let packets: usize = sent.iter().map(|s| s.2).sum();
            assert_eq!(packets, 100 * crossings, "{balance:?}: {sent:?}");
            if balance == Balance::Vlb {
                assert!(sent
                    .iter()
                    .all(|&(f, t, _)| (f, t) == (1, 3) || (f, t) == (3, 2)));
                assert_eq!(counter(&c, 2, Counter::ClusterRelayed), 100);
            }
            assert_eq!(counter(&c, 1, Counter::ClusterReordered), 0);
            // Node 2 dies: traffic for it is counted, traffic for node 3 flows.
            c.dead.lock().expect("l").insert(2);
            for s in 0..20u16 {
                assert!(c.hosts[0].send_bytes(&udp(0, host_ip(1), 64, s, s)));
            }
            for s in 0..20u16 {
                assert!(c.hosts[0].send_bytes(&udp(0, host_ip(2), 64, s, s)));
            }
            let wait = if balance == Balance::Direct { 10 } else { 1 };
            let third = c.hosts[2].recv_bytes_timeout(20, Duration::from_secs(wait));
            if balance == Balance::Direct {
                assert_eq!(third.len(), 20, "node 3 does not need node 2");
                std::thread::sleep(Duration::from_millis(100));
                assert_eq!(counter(&c, 0, Counter::DropClusterPeerDown), 20);
            } else {
                // VLB sends node 3's traffic through node 2: it is lost, and counted
                // where node 2 was needed.
                std::thread::sleep(Duration::from_millis(200));
                let lost = counter(&c, 0, Counter::DropClusterPeerDown)
                    + counter(&c, 2, Counter::DropClusterPeerDown);
                assert_eq!(lost as usize + third.len(), 40, "{lost} {}", third.len());
            }
            stop(c);
        }
    }

    /// Uniform traffic among three nodes (every host to every other host, 16 flows
    /// each): crossings per external packet are 1 with direct and with Direct-VLB on
    /// an unloaded fabric, 2 with VLB; nothing is reordered; every packet arrives.
    #[test]
    fn crossings_per_external_packet_under_uniform_traffic() {
        for (balance, want) in [
            (Balance::Direct, 1.0),
            (Balance::Vlb, 2.0),
            (Balance::DirectVlb, 1.0),
        ] {
            let mut c = cluster(3, &[1, 2, 3], balance, 16);
            let mut external = 0;
            for from in 0..3 {
                for to in 0..3 {
                    if from == to {
                        continue;
                    }
                    for s in 0..48u16 {
                        assert!(c.hosts[from].send_bytes(&udp(from, host_ip(to), 64, s % 16, s)));
                        external += 1;
                    }
                }
            }
            let mut arrived = 0;
            for to in 0..3 {
                arrived += c.hosts[to]
                    .recv_bytes_timeout(96, Duration::from_secs(10))
                    .len();
            }
            assert_eq!(arrived, external, "{balance:?}");
            let sent = c.sent.lock().expect("l").clone();
            let crossings: usize = sent.iter().map(|s| s.2).sum();
            let per = crossings as f64 / external as f64;
            assert!(
                (per - want).abs() < 1e-9,
                "{balance:?}: {per} crossings per packet"
            );
            let messages = sent.len();
            assert!(
                messages < crossings,
                "{balance:?}: batched ({messages} messages)"
            );
            for n in 0..3 {
                assert_eq!(counter(&c, n, Counter::ClusterReordered), 0);
            }
            stop(c);
        }
    }
}
