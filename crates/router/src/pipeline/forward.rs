//! The forwarding policy, written once for IPv4 and IPv6: validation → martians →
//! local delivery or lookup → TTL/hop limit → errors → fragmentation/too big → next
//! hop. What differs between the families — how a header is validated, what a martian
//! is, which counter a rule has — is in the small functions below the policy, each
//! with the rule it implements.

use super::frag::{check_ipv4_options, OptionsCheck};
use super::icmp::IcmpError;
use super::{Forward, Outbox, Router, Worker, ALL_NODES};
use crate::counters::{drop_counter, Counter};
use crate::fib::{Fib, PortId};
use std::net::IpAddr;
use std::time::Instant;
use weft_link::PacketBuf;
use weft_wire::ethernet;
use weft_wire::ip::{IpRepr, Version};
use weft_wire::ipv4::{self, Ipv4Packet, Ipv4Repr};
use weft_wire::ipv6::{Ipv6Packet, Ipv6Repr};
use weft_wire::{Error, IpProtocol};

/// Offset of the IPv4 protocol field (RFC 791 §3.1).
const IPV4_PROTOCOL_FIELD: usize = 9;

/// A packet that passed its family's validation, as the policy sees it.
#[derive(Debug)]
pub(super) struct Datagram {
    /// Addresses, next header, hop limit, payload length.
    pub ip: IpRepr,
    /// Ethernet header plus the IP total length (padding excluded).
    pub frame_len: usize,
    /// Not to be fragmented on the way: IPv4 DF; every IPv6 packet, since routers
    /// never fragment IPv6 (RFC 8200 §5).
    pub dont_frag: bool,
    /// IPv4 options present (forwarded, and counted).
    pub has_options: bool,
    /// The upper-layer protocol, its offset from the IP header (IPv6: behind the
    /// extension headers) and the offset of the field that names it (IPv4: the
    /// protocol field; IPv6: the last Next Header), or why the extension header chain
    /// is malformed.
    pub upper: Result<(IpProtocol, usize, usize), Error>,
}

/// RFC 1812 §5.2.2: the checks a router must make on an IPv4 header — length,
/// version, IHL, total length, checksum (each wire error has its counter) — and the
/// options (RFC 791 §3.1; source routes refused, RFC 7126 §4.3-4.4).
fn validate_v4(payload: &[u8]) -> Result<Datagram, Counter> {
    let ip = Ipv4Packet::new_checked(payload)
        .and_then(|ip| {
            ip.check_checksum()?;
            Ok(ip)
        })
        .map_err(|e| drop_counter(&e))?;
    let has_options = ip.header_len() > ipv4::HEADER_LEN;
    if has_options {
        match check_ipv4_options(ip.options()) {
            OptionsCheck::Ok => {}
            OptionsCheck::Malformed => return Err(Counter::DropIpv4BadOptions),
            OptionsCheck::SourceRoute => return Err(Counter::DropIpv4SourceRoute),
        }
    }
    Ok(Datagram {
        ip: IpRepr::Ipv4(Ipv4Repr {
            src_addr: ip.src_addr(),
            dst_addr: ip.dst_addr(),
            protocol: ip.protocol(),
            payload_len: ip.payload().len(),
            ttl: ip.ttl(),
            dscp_ecn: ip.dscp_ecn(),
            ident: ip.ident(),
            dont_frag: ip.dont_frag(),
        }),
        frame_len: ethernet::HEADER_LEN + usize::from(ip.total_len()),
        dont_frag: ip.dont_frag(),
        has_options,
        upper: Ok((ip.protocol(), ip.header_len(), IPV4_PROTOCOL_FIELD)),
    })
}

/// RFC 8200 §3: 40 bytes, version 6, payload length within the frame; §4: the
/// extension header chain (its error is acted on later, where the rules differ for
/// packets to us and packets forwarded).
fn validate_v6(payload: &[u8]) -> Result<Datagram, Counter> {
    let ip = Ipv6Packet::new_checked(payload).map_err(|e| drop_counter(&e))?;
    Ok(Datagram {
        ip: IpRepr::Ipv6(Ipv6Repr {
            src_addr: ip.src_addr(),
            dst_addr: ip.dst_addr(),
            next_header: ip.next_header(),
            payload_len: usize::from(ip.payload_len()),
            hop_limit: ip.hop_limit(),
            traffic_class: ip.traffic_class(),
            flow_label: ip.flow_label(),
        }),
        frame_len: ethernet::HEADER_LEN + ip.total_len(),
        dont_frag: true,
        has_options: false,
        upper: ip.upper_layer_at(),
    })
}

/// A source that must never appear: RFC 1812 §5.3.7 (IPv4: multicast, limited
/// broadcast, loopback, unspecified); RFC 4291 §2.5.3, §2.7 (IPv6: multicast,
/// loopback). The IPv6 unspecified source is legal to us (duplicate address
/// detection, RFC 4862 §5.4.2) and refused only when forwarding.
fn martian_source(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(a) => {
            a.is_multicast() || a.is_broadcast() || a.is_loopback() || a.is_unspecified()
        }
        IpAddr::V6(a) => a.is_multicast() || a.is_loopback(),
    }
}

/// The counter of a packet whose TTL (RFC 1812 §5.3.1) or hop limit (RFC 8200 §3)
/// would reach 0.
const fn ttl_counter(v: Version) -> Counter {
    match v {
        Version::Ipv4 => Counter::DropTtlExceeded,
        Version::Ipv6 => Counter::DropHopLimitExceeded,
    }
}

/// The counter of a length field that disagrees with the frame.
const fn length_counter(v: Version) -> Counter {
    match v {
        Version::Ipv4 => Counter::DropIpv4BadTotalLength,
        Version::Ipv6 => Counter::DropIpv6BadPayloadLength,
    }
}

/// RFC 4291 §2.5.6: a link-local address never leaves its link (IPv6; IPv4's
/// 169.254/16 is left to the FIB, as RFC 3927 §7 leaves it to configuration).
fn link_local(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(_) => false,
        IpAddr::V6(a) => a.is_unicast_link_local(),
    }
}

impl Router {
    /// A destination the router takes for itself: one of its addresses; for IPv6
    /// also all-nodes and the solicited-node groups of the ingress port (RFC 4861
    /// §7.2.1).
    fn is_for_us(&self, ingress: PortId, dst: IpAddr) -> bool {
        match dst {
            IpAddr::V4(a) => self
                .ports
                .iter()
                .any(|p| p.spec.v4.iter().any(|&(x, _)| x == a)),
            IpAddr::V6(a) => {
                self.ports
                    .iter()
                    .any(|p| p.link_local == a || p.spec.v6.iter().any(|&(x, _)| x == a))
                    || a == ALL_NODES
                    || self.ports.get(ingress).is_some_and(|p| {
                        super::solicited_node(p.link_local) == a
                            || p.spec
                                .v6
                                .iter()
                                .any(|&(x, _)| super::solicited_node(x) == a)
                    })
            }
        }
    }

    /// A destination that must not be routed: RFC 1812 §5.3.7 / §4.2.2.11 (IPv4:
    /// loopback, unspecified, 0/8, limited broadcast) and RFC 2644 (the directed
    /// broadcast of a connected network); RFC 4291 §2.5.2-2.5.3 (IPv6: loopback,
    /// unspecified).
    fn martian_destination(&self, dst: IpAddr) -> bool {
        match dst {
            IpAddr::V4(a) => {
                a.is_loopback()
                    || a.is_unspecified()
                    || a.octets()[0] == 0
                    || a.is_broadcast()
                    || self.ports.iter().any(|p| {
                        p.spec.v4.iter().any(|&(x, l)| {
                            l < 31 && (u32::from(x) | (u32::MAX >> l)) == u32::from(a)
                        })
                    })
            }
            IpAddr::V6(a) => a.is_loopback() || a.is_unspecified(),
        }
    }
}

impl Worker {
    /// The forwarding policy for an IPv4 or IPv6 frame in `buf` (EtherType `v`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ip(
        &mut self,
        fib: &Fib,
        ingress: PortId,
        mut buf: PacketBuf,
        v: Version,
        l2_for_us: bool,
        now: Instant,
        out: &mut Outbox,
    ) -> Option<Forward> {
        // Validation.
        let payload = &buf[ethernet::HEADER_LEN..];
        let d = match v {
            Version::Ipv4 => validate_v4(payload),
            Version::Ipv6 => validate_v6(payload),
        };
        let d = match d {
            Ok(d) => d,
            Err(c) => {
                self.counters.inc(c);
                return None;
            }
        };
        let (src, dst) = (d.ip.src_addr(), d.ip.dst_addr());
        if martian_source(src) {
            self.counters.inc(Counter::DropMartianSource);
            return None;
        }
        // Ethernet padding is not part of the packet.
        if !buf.set_len(d.frame_len) {
            self.counters.inc(length_counter(v));
            return None;
        }
        // Local delivery.
        if self.router.is_for_us(ingress, dst) {
            match d.upper {
                Ok((proto, off, field)) => {
                    self.local(fib, ingress, buf, &d, (proto, off, field), now, out)
                }
                Err(e) => self.drop(&e),
            }
            return None;
        }
        // Martian destinations, and groups (no multicast routing).
        if self.router.martian_destination(dst) {
            self.counters.inc(Counter::DropMartianDestination);
            return None;
        }
        if dst.is_multicast() || !l2_for_us {
            self.counters.inc(Counter::DropMulticast);
            return None;
        }
        if link_local(dst) || link_local(src) {
            self.counters.inc(Counter::DropLinkLocalScope);
            return None;
        }
        if let Err(e) = d.upper {
            self.drop(&e);
            return None;
        }
        // RFC 4291 §2.5.2: the unspecified address is never a source of a packet
        // that leaves its link (IPv4's was a martian above already).
        if src.is_unspecified() {
            self.counters.inc(Counter::DropMartianSource);
            return None;
        }
        // RFC 1812 §5.3.1, RFC 8200 §3: a packet that would leave with TTL / hop limit
        // 0 is dropped here, with time exceeded.
        if d.ip.hop_limit() <= 1 {
            self.counters.inc(ttl_counter(v));
            self.icmp_error(fib, ingress, &buf, &d.ip, IcmpError::TimeExceeded, now, out);
            return None;
        }
        // Lookup.
        let Some(nh) = fib.lookup(dst) else {
            self.counters.inc(Counter::DropNoRoute);
            self.icmp_error(fib, ingress, &buf, &d.ip, IcmpError::NoRoute, now, out);
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
        // Too big: RFC 1191 §4 / RFC 1812 §5.2.7.1 (IPv4 with DF: fragmentation
        // needed) and RFC 8200 §5 / RFC 4443 §3.2 (IPv6: packet too big), with the
        // next-hop MTU so the sender's path MTU discovery learns it.
        if d.frame_len > max && d.dont_frag {
            self.counters.inc(Counter::DropTooBig);
            let e = IcmpError::TooBig(mtu as u16);
            self.icmp_error(fib, ingress, &buf, &d.ip, e, now, out);
            return None;
        }
        if d.has_options {
            self.counters.inc(Counter::Ipv4OptionsForwarded);
        }
        // RFC 1812 §5.2.6: without DF, a router fragments (only IPv4 gets here).
        if d.frame_len > max {
            self.fragment_v4(nh, dst, &buf, mtu, now, out);
            return None;
        }
        self.resolve_forward(nh, dst, buf, true, now, out)
    }
}
