//! ICMP and ICMPv6 errors about packets the router could not deliver, written once
//! for both families: when not to send one (RFC 1812 §4.3.2.7, RFC 4443 §2.4(e)), the
//! rate limit (RFC 1812 §4.3.2.8, RFC 4443 §2.4(f)), the source address, the message
//! for each kind and family, and sending what the router built.

use super::l2::{ethertype, set_eth};
use super::{Outbox, Worker, MIN_FRAME, OWN_TTL};
use crate::counters::Counter;
use crate::fib::{Fib, PortId};
use std::net::IpAddr;
use std::time::Instant;
use weft_link::PacketBuf;
use weft_wire::ethernet::{self, EthernetFrame};
use weft_wire::icmpv4::{self, Icmpv4Message, Icmpv4Packet, Icmpv4Repr};
use weft_wire::icmpv6::{self, Icmpv6Packet, Icmpv6Repr};
use weft_wire::ip::{IpRepr, Version};
use weft_wire::ipv4::Ipv4Packet;
use weft_wire::ipv6::Ipv6Packet;
use weft_wire::{EthernetAddress, IpProtocol};

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

/// Which ICMP error to send about a packet; [`Worker::icmp_error`] picks the message
/// of the packet's family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IcmpError {
    /// TTL / hop limit exceeded in transit.
    TimeExceeded,
    /// No route to the destination.
    NoRoute,
    /// Port unreachable (UDP/TCP to one of our addresses).
    PortUnreachable,
    /// A protocol / next header we do not handle, to one of our addresses: IPv4
    /// protocol unreachable (RFC 1122 §3.2.2.1); IPv6 parameter problem code 1 with
    /// `pointer` at the next-header field that names it (RFC 8200 §4, RFC 4443 §3.4).
    UnknownProtocol {
        /// Offset of that next-header field in the packet (IPv6 only).
        pointer: u32,
    },
    /// Fragmentation needed / packet too big, with the egress MTU.
    TooBig(u16),
}

impl IcmpError {
    /// The counter of a sent error.
    const fn counter(self) -> Counter {
        match self {
            IcmpError::TimeExceeded => Counter::TimeExceededSent,
            IcmpError::NoRoute | IcmpError::PortUnreachable | IcmpError::UnknownProtocol { .. } => {
                Counter::UnreachableSent
            }
            IcmpError::TooBig(_) => Counter::TooBigSent,
        }
    }

    /// An error about a packet to one of our addresses answers from that address.
    const fn answers_for_destination(self) -> bool {
        matches!(
            self,
            IcmpError::PortUnreachable | IcmpError::UnknownProtocol { .. }
        )
    }
}

/// An ICMP message of either family, for [`Worker::build`].
#[derive(Debug, Clone, Copy)]
pub(super) enum Icmp<'a> {
    /// ICMP for IPv4.
    V4(Icmpv4Repr<'a>),
    /// ICMPv6.
    V6(Icmpv6Repr<'a>),
}

impl Icmp<'_> {
    fn buffer_len(&self) -> usize {
        match self {
            Icmp::V4(r) => r.buffer_len(),
            Icmp::V6(r) => r.buffer_len(),
        }
    }

    fn protocol(&self) -> IpProtocol {
        match self {
            Icmp::V4(_) => Version::Ipv4.icmp(),
            Icmp::V6(_) => Version::Ipv6.icmp(),
        }
    }

    /// Write the message into `buf` (exactly `buffer_len()` bytes); ICMPv6's
    /// checksum covers the addresses of the packet that carries it.
    fn emit(&self, buf: &mut [u8], src: IpAddr, dst: IpAddr) -> bool {
        match (self, src, dst) {
            (Icmp::V4(r), _, _) => r.emit(&mut Icmpv4Packet::new_unchecked(buf)).is_ok(),
            (Icmp::V6(r), IpAddr::V6(s), IpAddr::V6(d)) => {
                r.emit(&mut Icmpv6Packet::new_unchecked(buf), s, d).is_ok()
            }
            (Icmp::V6(_), _, _) => false,
        }
    }
}

/// The message of `kind` about `datagram` (the quote is the family's, RFC 792 /
/// RFC 4443 §2.4(c)).
fn message(v: Version, kind: IcmpError, datagram: &[u8]) -> Icmp<'_> {
    match v {
        Version::Ipv4 => {
            let invoking = icmpv4::quote(datagram);
            let unreachable = |code| Icmpv4Repr::DstUnreachable {
                code,
                next_hop_mtu: 0,
                invoking,
            };
            Icmp::V4(match kind {
                IcmpError::TimeExceeded => Icmpv4Repr::TimeExceeded {
                    code: icmpv4::TimeExceededCode::TTL,
                    invoking,
                },
                IcmpError::NoRoute => unreachable(icmpv4::UnreachableCode::NET),
                IcmpError::PortUnreachable => unreachable(icmpv4::UnreachableCode::PORT),
                IcmpError::UnknownProtocol { .. } => unreachable(icmpv4::UnreachableCode::PROTOCOL),
                // RFC 1191 §4: the next-hop MTU, so path MTU discovery learns it.
                IcmpError::TooBig(mtu) => Icmpv4Repr::DstUnreachable {
                    code: icmpv4::UnreachableCode::FRAG_NEEDED,
                    next_hop_mtu: mtu,
                    invoking,
                },
            })
        }
        Version::Ipv6 => {
            let invoking = icmpv6::quote(datagram);
            Icmp::V6(match kind {
                IcmpError::TimeExceeded => Icmpv6Repr::TimeExceeded {
                    code: icmpv6::TimeExceededCode::HOP_LIMIT,
                    invoking,
                },
                IcmpError::NoRoute => Icmpv6Repr::DstUnreachable {
                    code: icmpv6::UnreachableCode::NO_ROUTE,
                    invoking,
                },
                IcmpError::PortUnreachable => Icmpv6Repr::DstUnreachable {
                    code: icmpv6::UnreachableCode::PORT,
                    invoking,
                },
                IcmpError::UnknownProtocol { pointer } => Icmpv6Repr::ParamProblem {
                    code: icmpv6::ParamProblemCode::NEXT_HEADER,
                    pointer,
                    invoking,
                },
                IcmpError::TooBig(mtu) => Icmpv6Repr::PacketTooBig {
                    mtu: u32::from(mtu),
                    invoking,
                },
            })
        }
    }
}

/// True when no error may be sent about the validated frame `offending`.
fn suppressed(v: Version, offending: &[u8], kind: IcmpError) -> bool {
    let datagram = &offending[ethernet::HEADER_LEN..];
    match v {
        Version::Ipv4 => {
            let ip = Ipv4Packet::new_unchecked(datagram);
            // RFC 1812 §4.3.2.7: never about an ICMP error, a non-first fragment, a
            // non-unicast destination, or a link-layer broadcast.
            let eth_dst = EthernetFrame::new_unchecked(offending).dst_addr();
            let about_icmp_error = ip.protocol() == IpProtocol::ICMP
                && ip.payload().first().is_none_or(|&t| {
                    // Echo, and timestamp (13) and its reply (14), are queries.
                    !matches!(
                        Icmpv4Message(t),
                        Icmpv4Message::ECHO_REQUEST | Icmpv4Message::ECHO_REPLY
                    ) && t != 13
                        && t != 14
                });
            let dst = ip.dst_addr();
            about_icmp_error
                || ip.frag_offset() != 0
                || dst.is_multicast()
                || dst.is_broadcast()
                || !eth_dst.is_unicast()
        }
        Version::Ipv6 => {
            let ip = Ipv6Packet::new_unchecked(datagram);
            // RFC 4443 §2.4(e): not about an ICMPv6 error (or a packet whose chain we
            // cannot classify), not to or from a non-unicast address (Packet Too Big
            // excepted for a multicast destination).
            let about_error = match ip.upper_layer() {
                Ok((IpProtocol::IPV6_ICMP, off)) => datagram.get(off).is_none_or(|&t| t < 128),
                Ok(_) => false,
                Err(_) => true,
            };
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            about_error
                || src.is_unspecified()
                || src.is_multicast()
                || (dst.is_multicast() && !matches!(kind, IcmpError::TooBig(_)))
        }
    }
}

impl Worker {
    /// Send an ICMP or ICMPv6 error about the validated packet in `offending`, whose
    /// header is `ip`, subject to the rules about when not to, and to the rate limit.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn icmp_error(
        &mut self,
        fib: &Fib,
        ingress: PortId,
        offending: &PacketBuf,
        ip: &IpRepr,
        kind: IcmpError,
        now: Instant,
        out: &mut Outbox,
    ) {
        let datagram = &offending[ethernet::HEADER_LEN..];
        let v = ip.version();
        if suppressed(v, offending, kind) {
            self.counters.inc(Counter::IcmpSuppressed);
            return;
        }
        if !self.limiter.take(now) {
            self.counters.inc(Counter::IcmpRateLimited);
            return;
        }
        let Some(port) = self.router.ports.get(ingress) else {
            return;
        };
        // The error comes from the ingress port's address (IPv6: its link-local one
        // if it has no other); one about a packet to us, from the address it was for.
        let ours = match v {
            Version::Ipv4 => port.spec.v4.first().map(|&(a, _)| IpAddr::V4(a)),
            Version::Ipv6 => Some(IpAddr::V6(
                port.spec.v6.first().map_or(port.link_local, |&(a, _)| a),
            )),
        };
        let Some(ours) = ours else {
            self.counters.inc(Counter::DropNoSourceAddress);
            return;
        };
        let from = if kind.answers_for_destination() {
            ip.dst_addr()
        } else {
            ours
        };
        let to = ip.src_addr();
        let msg = message(v, kind, datagram);
        if let Some(b) = self.build(from, to, OWN_TTL, &msg) {
            self.counters.inc(kind.counter());
            self.originate(fib, b, to, now, out);
        }
    }

    /// An IP + ICMP packet from `src` to `dst` in a fresh buffer, Ethernet header left
    /// for [`Worker::originate`] (or the caller).
    pub(super) fn build(
        &mut self,
        src: IpAddr,
        dst: IpAddr,
        hop_limit: u8,
        icmp: &Icmp<'_>,
    ) -> Option<PacketBuf> {
        let icmp_len = icmp.buffer_len();
        let ip = IpRepr::new(src, dst, icmp.protocol(), icmp_len, hop_limit).ok()?;
        let len = ethernet::HEADER_LEN + ip.buffer_len();
        let mut buf = self.alloc(len.max(MIN_FRAME))?;
        let ok = {
            let body = &mut buf[ethernet::HEADER_LEN..len];
            let (h, rest) = body.split_at_mut(ip.header_len());
            ip.emit(h).is_ok() && icmp.emit(rest, src, dst)
        };
        if !ok {
            self.counters.inc(Counter::DropNoBuffer);
            return None;
        }
        Some(buf)
    }

    /// Route and send a packet the router made itself (IP header at offset 14, TTL
    /// already final).
    pub(super) fn originate(
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
            let v = if dst.is_ipv4() {
                Version::Ipv4
            } else {
                Version::Ipv6
            };
            set_eth(&mut b, src, f.dst_mac, ethertype(v));
            out.push((f.egress, b));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
