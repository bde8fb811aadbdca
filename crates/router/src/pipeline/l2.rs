//! Layer 2: the Ethernet header on the way in (our MAC or a group, untagged, an
//! EtherType we handle) and on the way out (the new MACs, and TTL/hop limit − 1 on a
//! forwarded packet).

use super::{Forward, Outbox, Worker};
use crate::counters::Counter;
use crate::fib::{Fib, PortId};
use std::time::Instant;
use weft_link::PacketBuf;
use weft_wire::ethernet::EthernetFrame;
use weft_wire::ip::Version;
use weft_wire::ipv4::Ipv4Packet;
use weft_wire::ipv6::Ipv6Packet;
use weft_wire::{EtherType, EthernetAddress};

impl Worker {
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
        let eth = match EthernetFrame::new_checked(&buf[..]) {
            Ok(eth) => eth,
            Err(e) => {
                self.drop(&e);
                return None;
            }
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
            EtherType::IPV4 => self.ip(fib, ingress, buf, Version::Ipv4, l2_for_us, now, out),
            EtherType::IPV6 => self.ip(fib, ingress, buf, Version::Ipv6, l2_for_us, now, out),
            _ => {
                self.counters.inc(Counter::DropUnknownEthertype);
                None
            }
        }
    }
}

impl Worker {
    /// The ingress half for a frame another cluster node handed over the interconnect
    /// (it entered the cluster on port `ingress`, of whichever node): the Ethernet
    /// header only says which family; the destination MAC was the ingress port's, so
    /// it is not checked. Then the same policy as [`Worker::classify`]: the TTL was
    /// checked but not decremented by the ingress node, so the cluster decrements it
    /// once, here or wherever the frame is finished.
    pub fn classify_from_cluster(
        &mut self,
        fib: &Fib,
        ingress: PortId,
        buf: PacketBuf,
        now: Instant,
        out: &mut Outbox,
    ) -> Option<Forward> {
        if ingress >= self.router.ports.len() {
            self.counters.inc(Counter::DropClusterMalformed);
            return None;
        }
        let eth = match EthernetFrame::new_checked(&buf[..]) {
            Ok(eth) => eth,
            Err(e) => {
                self.drop(&e);
                return None;
            }
        };
        match eth.ethertype() {
            EtherType::IPV4 => self.ip(fib, ingress, buf, Version::Ipv4, true, now, out),
            EtherType::IPV6 => self.ip(fib, ingress, buf, Version::Ipv6, true, now, out),
            _ => {
                self.counters.inc(Counter::DropUnknownEthertype);
                None
            }
        }
    }
}

/// TTL/hop limit − 1 and MAC rewrite on an untagged frame.
pub(super) fn rewrite_forwarded(buf: &mut [u8], src: EthernetAddress, dst: EthernetAddress) {
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
                // RFC 8200 §3: hop limit − 1; there is no header checksum.
                ip.decrement_hop_limit();
            }
        }
        _ => {}
    }
    eth.set_src_addr(src);
    eth.set_dst_addr(dst);
}

/// Write an untagged Ethernet header into a frame the router built.
pub(super) fn set_eth(buf: &mut [u8], src: EthernetAddress, dst: EthernetAddress, et: EtherType) {
    if let Ok(mut eth) = EthernetFrame::new_checked(buf) {
        eth.set_dst_addr(dst);
        eth.set_src_addr(src);
        eth.set_tag_and_ethertype(None, et);
    }
}

/// The EtherType of a version.
pub(super) const fn ethertype(v: Version) -> EtherType {
    match v {
        Version::Ipv4 => EtherType::IPV4,
        Version::Ipv6 => EtherType::IPV6,
    }
}
