//! ARP (RFC 826), neighbour discovery (RFC 4861) and next-hop resolution: learning
//! neighbours, answering for our addresses, asking for next hops, and releasing the
//! packets that waited for them.

use super::icmp::Icmp;
use super::l2::{rewrite_forwarded, set_eth};
use super::{lock, solicited_node, Forward, Outbox, Worker, ALL_NODES, MIN_FRAME, ND_HOP_LIMIT};
use crate::counters::Counter;
use crate::fib::{IpPrefix, NextHop, PortId};
use crate::neighbor::{Enqueued, Lookup, Waiting};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_link::PacketBuf;
use weft_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use weft_wire::ethernet::{self, EthernetFrame};
use weft_wire::icmpv6::Icmpv6Repr;
use weft_wire::{EtherType, EthernetAddress};

impl Worker {
    // ---- ARP (RFC 826) -------------------------------------------------------------

    pub(super) fn arp(
        &mut self,
        ingress: PortId,
        mut buf: PacketBuf,
        now: Instant,
        out: &mut Outbox,
    ) {
        let router = Arc::clone(&self.router);
        let port = &router.ports[ingress];
        let repr = match ArpPacket::new_checked(&buf[ethernet::HEADER_LEN..])
            .and_then(|p| ArpRepr::parse(&p))
        {
            Ok(r) => r,
            Err(e) => {
                self.drop(&e);
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

    #[allow(clippy::too_many_arguments)]
    pub(super) fn neighbor_solicit(
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
            (ALL_NODES, EthernetAddress::ipv6_multicast(ALL_NODES), false)
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
        if let Some(mut b) = self.build(
            IpAddr::V6(target),
            IpAddr::V6(dst_ip),
            ND_HOP_LIMIT,
            &Icmp::V6(na),
        ) {
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
        if let Some(mut b) = self.build(
            IpAddr::V6(src),
            IpAddr::V6(group),
            ND_HOP_LIMIT,
            &Icmp::V6(ns),
        ) {
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

    /// RFC 4861 §7.2.5: a neighbour advertisement updates the cache (creating the
    /// entry only when solicited) and releases what waited for the target.
    pub(super) fn neighbor_advert(
        &mut self,
        ingress: PortId,
        target: Ipv6Addr,
        mac: EthernetAddress,
        solicited: bool,
        now: Instant,
        out: &mut Outbox,
    ) {
        let released = {
            let router = Arc::clone(&self.router);
            let mut n = lock(&router.neighbors);
            let r = n.learn(ingress, IpAddr::V6(target), mac, solicited, now);
            router.neighbor_gen.store(n.generation(), Ordering::Release);
            r
        };
        self.counters.inc(Counter::NdLearned);
        self.release(ingress, mac, released, out);
    }

    /// The MAC for the next hop, from this worker's cache, or the shared table; when
    /// unknown the packet is queued and a request sent.
    pub(super) fn resolve_forward(
        &mut self,
        nh: NextHop,
        dst: IpAddr,
        buf: PacketBuf,
        forwarded: bool,
        now: Instant,
        out: &mut Outbox,
    ) -> Option<Forward> {
        // A port of another cluster node: its owner resolves the next hop and
        // finishes the frame; here it only leaves for the interconnect.
        if self.router.is_remote(nh.port) {
            return Some(Forward {
                buf,
                egress: nh.port,
                dst_mac: EthernetAddress([0; 6]),
            });
        }
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
}
