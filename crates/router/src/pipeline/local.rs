//! Local delivery: packets for one of the router's own addresses (or, for IPv6, the
//! groups it listens to). The router answers echo requests, takes neighbour
//! discovery, and answers anything else with the ICMP error its family prescribes.

use super::forward::Datagram;
use super::icmp::{Icmp, IcmpError};
use super::{Outbox, Worker, ND_HOP_LIMIT, OWN_TTL};
use crate::counters::Counter;
use crate::fib::{Fib, PortId};
use std::net::IpAddr;
use std::time::Instant;
use weft_link::PacketBuf;
use weft_wire::ethernet::{self, EthernetFrame};
use weft_wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};
use weft_wire::icmpv6::{Icmpv6Message, Icmpv6Packet, Icmpv6Repr};
use weft_wire::ip::Version;
use weft_wire::ipv4::Ipv4Packet;
use weft_wire::ipv6::Ipv6Packet;
use weft_wire::IpProtocol;

/// The router does not reassemble (RFC 1812 §5.2.3 lets a router's own stack
/// decline), so a fragment to us is dropped: IPv4 MF or an offset; IPv6 any Fragment
/// header (RFC 8200 §4.5), or a chain that cannot be read.
fn is_fragment(v: Version, datagram: &[u8]) -> bool {
    match v {
        Version::Ipv4 => {
            let ip = Ipv4Packet::new_unchecked(datagram);
            ip.more_frags() || ip.frag_offset() != 0
        }
        Version::Ipv6 => !matches!(Ipv6Packet::new_unchecked(datagram).fragment(), Ok(None)),
    }
}

impl Worker {
    /// A validated packet `d` for us in `buf`, whose upper layer is `proto` at `off`
    /// bytes from the IP header, named by the field at offset `field`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn local(
        &mut self,
        fib: &Fib,
        ingress: PortId,
        buf: PacketBuf,
        d: &Datagram,
        (proto, off, field): (IpProtocol, usize, usize),
        now: Instant,
        out: &mut Outbox,
    ) {
        let v = d.ip.version();
        if is_fragment(v, &buf[ethernet::HEADER_LEN..]) {
            self.counters.inc(Counter::DropLocalFragment);
            return;
        }
        let dst = d.ip.dst_addr();
        if proto != v.icmp() {
            self.counters.inc(Counter::DropLocalProtocol);
            // RFC 8200 §4.7: No Next Header means nothing follows; nothing to answer.
            if v == Version::Ipv6 && proto == IpProtocol::NO_NEXT {
                return;
            }
            // RFC 1122 §3.2.2.1 / RFC 4443 §3.1: UDP or TCP to a port we do not serve
            // is port unreachable. Any other protocol: IPv4 protocol unreachable; IPv6
            // (RFC 8200 §4) parameter problem code 1, unrecognized next header,
            // pointing at the Next Header field that names it.
            let kind = if proto == IpProtocol::UDP || proto == IpProtocol::TCP {
                IcmpError::PortUnreachable
            } else {
                IcmpError::UnknownProtocol {
                    pointer: field as u32,
                }
            };
            // RFC 1812 §4.3.2.7, RFC 4443 §2.4(e.3): no error about a packet to a group
            // (only IPv6 delivers group traffic to us).
            if !dst.is_multicast() {
                self.icmp_error(fib, ingress, &buf, &d.ip, kind, now, out);
            }
            return;
        }
        let upper = buf
            .get(ethernet::HEADER_LEN + off..d.frame_len)
            .unwrap_or(&[]);
        match v {
            Version::Ipv4 => self.local_icmpv4(fib, d, upper, now, out),
            Version::Ipv6 => self.local_icmpv6(fib, ingress, &buf, d, upper, now, out),
        }
    }

    /// RFC 1122 §3.2.2.6: an echo request gets its echo reply, from the address it
    /// was sent to; other ICMP messages are not acted on.
    fn local_icmpv4(
        &mut self,
        fib: &Fib,
        d: &Datagram,
        upper: &[u8],
        now: Instant,
        out: &mut Outbox,
    ) {
        match Icmpv4Packet::new_checked(upper).and_then(|p| Icmpv4Repr::parse(&p)) {
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
                self.echo_reply(fib, d, &Icmp::V4(reply), now, out);
            }
            Ok(_) => self.counters.inc(Counter::DropIcmpIgnored),
            Err(e) => self.drop(&e),
        }
    }

    /// ICMPv6 to us: echo (RFC 4443 §4.1, never to a group) and neighbour discovery
    /// (RFC 4861 §7.1: hop limit 255 and the message checks weft-wire makes).
    #[allow(clippy::too_many_arguments)]
    fn local_icmpv6(
        &mut self,
        fib: &Fib,
        ingress: PortId,
        buf: &PacketBuf,
        d: &Datagram,
        upper: &[u8],
        now: Instant,
        out: &mut Outbox,
    ) {
        let (IpAddr::V6(src), IpAddr::V6(dst)) = (d.ip.src_addr(), d.ip.dst_addr()) else {
            return;
        };
        let pkt = match Icmpv6Packet::new_checked(upper) {
            Ok(p) => p,
            Err(e) => {
                self.drop(&e);
                return;
            }
        };
        let is_nd = matches!(
            pkt.msg_type(),
            Icmpv6Message::NEIGHBOR_SOLICIT | Icmpv6Message::NEIGHBOR_ADVERT
        );
        // RFC 4861 §7.1.1: ND from off-link (hop limit below 255) is invalid.
        if is_nd && d.ip.hop_limit() != ND_HOP_LIMIT {
            self.counters.inc(Counter::DropNdMalformed);
            return;
        }
        let repr = match Icmpv6Repr::parse(&pkt, src, dst) {
            Ok(r) => r,
            Err(e) => {
                self.drop(&e);
                return;
            }
        };
        let eth_src = EthernetFrame::new_unchecked(&buf[..]).src_addr();
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
                self.echo_reply(fib, d, &Icmp::V6(reply), now, out);
            }
            Icmpv6Repr::NeighborSolicit {
                target_addr,
                source_lladdr,
            } => {
                self.neighbor_solicit(ingress, src, target_addr, source_lladdr, eth_src, now, out);
            }
            Icmpv6Repr::NeighborAdvert {
                target_addr,
                target_lladdr,
                solicited,
                ..
            } => {
                let mac = target_lladdr.unwrap_or(eth_src);
                self.neighbor_advert(ingress, target_addr, mac, solicited, now, out);
            }
            _ => self.counters.inc(Counter::DropIcmpIgnored),
        }
    }

    /// Send `reply` back to the sender of `d`, from the address `d` was for.
    fn echo_reply(
        &mut self,
        fib: &Fib,
        d: &Datagram,
        reply: &Icmp<'_>,
        now: Instant,
        out: &mut Outbox,
    ) {
        let (src, dst) = (d.ip.src_addr(), d.ip.dst_addr());
        if let Some(b) = self.build(dst, src, OWN_TTL, reply) {
            self.counters.inc(Counter::EchoReplied);
            self.originate(fib, b, src, now, out);
        }
    }
}
