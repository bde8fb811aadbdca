//! Counters: one for every drop reason and for every thing the router does with a
//! packet. Each worker thread owns a [`Counters`] block and is its only writer, so a
//! count is a relaxed load and store on a cache line no other core writes; readers
//! (the control socket) sum the blocks.

use std::sync::atomic::{AtomicU64, Ordering};
use weft_wire::{Error, Field, Header};

macro_rules! counters {
    ($( $(#[$doc:meta])* $name:ident = $text:literal, )*) => {
        /// What happened to a packet.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(usize)]
        pub enum Counter { $( $(#[$doc])* $name, )* }

        impl Counter {
            /// Every counter, in display order.
            pub const ALL: &'static [Counter] = &[ $( Counter::$name, )* ];
            /// The name shown by `weft router ctl show counters`.
            pub const fn name(self) -> &'static str {
                match self { $( Counter::$name => $text, )* }
            }
        }
    };
}

counters! {
    /// Frames received on a port.
    RxFrames = "rx_frames",
    /// Packets forwarded to an egress port (a fragmented packet once per fragment).
    Forwarded = "forwarded",
    /// Frames transmitted by port workers (forwards and the router's own).
    TxFrames = "tx_frames",
    /// ARP requests for our addresses answered.
    ArpReplied = "arp_replied",
    /// ARP requests we sent to resolve a next hop.
    ArpRequestsSent = "arp_requests_sent",
    /// Neighbour entries learned or refreshed from ARP.
    ArpLearned = "arp_learned",
    /// Neighbour solicitations for our addresses answered.
    NdAdvertsSent = "nd_adverts_sent",
    /// Neighbour solicitations we sent to resolve a next hop.
    NdSolicitsSent = "nd_solicits_sent",
    /// Neighbour entries learned or refreshed from ND.
    NdLearned = "nd_learned",
    /// Echo requests to our addresses answered.
    EchoReplied = "echo_replied",
    /// ICMP/ICMPv6 time exceeded sent.
    TimeExceededSent = "icmp_time_exceeded_sent",
    /// ICMP/ICMPv6 destination unreachable sent.
    UnreachableSent = "icmp_unreachable_sent",
    /// ICMP fragmentation needed / ICMPv6 packet too big sent.
    TooBigSent = "icmp_too_big_sent",
    /// ICMP errors not sent because of the rate limit.
    IcmpRateLimited = "icmp_rate_limited",
    /// ICMP errors not sent because the rules forbid one (about an ICMP error, to a
    /// multicast or broadcast, from a non-unicast source, a later fragment).
    IcmpSuppressed = "icmp_suppressed",
    /// Packets queued while their next hop is resolved.
    QueuedForNeighbor = "queued_for_neighbor",
    /// Queued packets sent once the next hop answered.
    ReleasedFromQueue = "released_from_queue",
    /// Errors from a link (a failed send or receive call); the worker keeps going.
    LinkErrors = "link_errors",
    /// Receive calls that returned frames (`rx_frames` / `rx_bursts` is the mean
    /// burst: batches follow the load, one frame each when traffic is sparse).
    RxBursts = "rx_bursts",
    /// Times a data plane thread, idle for its busy-poll window, blocked on its link
    /// and its doorbell.
    Sleeps = "thread_sleeps",
    /// Times a thread woke a sleeping one by its doorbell (an eventfd write) after
    /// posting descriptors for it.
    DoorbellWakeups = "doorbell_wakeups",
    /// IPv4 packets with options, forwarded.
    Ipv4OptionsForwarded = "ipv4_options_forwarded",
    /// IPv4 packets without DF, larger than the egress MTU, split into fragments.
    Fragmented = "ipv4_fragmented",
    /// Fragments made from them (each also counts as forwarded).
    FragmentsCreated = "ipv4_fragments_created",
    /// Drop: frame shorter than an Ethernet header.
    DropRunt = "drop_runt",
    /// Drop: unicast frame for another MAC.
    DropNotOurMac = "drop_not_our_mac",
    /// Drop: 802.1Q tagged frame (ports are untagged).
    DropVlanTagged = "drop_vlan_tagged",
    /// Drop: EtherType we do not handle.
    DropUnknownEthertype = "drop_unknown_ethertype",
    /// Drop: ARP that does not parse or is not Ethernet/IPv4.
    DropArpMalformed = "drop_arp_malformed",
    /// Drop: ARP request for an address not ours.
    DropArpNotForUs = "drop_arp_not_for_us",
    /// Drop: IPv4 shorter than its header (20 bytes, or IHL × 4).
    DropIpv4Truncated = "drop_ipv4_truncated",
    /// Drop: IP version field does not match the EtherType.
    DropIpVersion = "drop_ip_version",
    /// Drop: IPv4 IHL below 5.
    DropIpv4BadIhl = "drop_ipv4_bad_ihl",
    /// Drop: IPv4 total length below the header length or beyond the frame.
    DropIpv4BadTotalLength = "drop_ipv4_bad_total_length",
    /// Drop: IPv4 header checksum wrong.
    DropIpv4BadChecksum = "drop_ipv4_bad_checksum",
    /// Drop: IPv4 options malformed (an option running past the header).
    DropIpv4BadOptions = "drop_ipv4_bad_options",
    /// Drop: IPv4 loose or strict source route option (RFC 7126 §4.3, §4.4).
    DropIpv4SourceRoute = "drop_ipv4_source_route",
    /// Drop: source address that must never appear (multicast, broadcast, loopback,
    /// unspecified).
    DropMartianSource = "drop_martian_source",
    /// Drop: destination that must not be routed (loopback, unspecified, 0/8, limited
    /// broadcast).
    DropMartianDestination = "drop_martian_destination",
    /// Drop: multicast destination (no multicast routing).
    DropMulticast = "drop_multicast",
    /// Drop: IPv6 link-local source or destination that would leave its link.
    DropLinkLocalScope = "drop_link_local_scope",
    /// Drop: IPv6 shorter than 40 bytes.
    DropIpv6Truncated = "drop_ipv6_truncated",
    /// Drop: IPv6 payload length beyond the frame.
    DropIpv6BadPayloadLength = "drop_ipv6_bad_payload_length",
    /// Drop: IPv6 extension header chain malformed or too long.
    DropIpv6BadExtHeaders = "drop_ipv6_bad_ext_headers",
    /// Drop: TTL expired (time exceeded sent unless limited).
    DropTtlExceeded = "drop_ttl_exceeded",
    /// Drop: hop limit expired (time exceeded sent unless limited).
    DropHopLimitExceeded = "drop_hop_limit_exceeded",
    /// Drop: no route (unreachable sent unless limited).
    DropNoRoute = "drop_no_route",
    /// Drop: larger than the egress MTU and not to be fragmented: IPv4 with DF
    /// (fragmentation needed sent unless limited), any IPv6 (packet too big sent unless
    /// limited), or an IPv4 fragment whose offset would overflow.
    DropTooBig = "drop_too_big",
    /// Drop: the next hop's queue was full while resolving.
    DropNeighborQueueFull = "drop_neighbor_queue_full",
    /// Drop: the next hop never answered.
    DropNeighborUnreachable = "drop_neighbor_unreachable",
    /// Drop: ICMP/ICMPv6 to us that is malformed or has a bad checksum.
    DropIcmpMalformed = "drop_icmp_malformed",
    /// Drop: ICMP to us we do not act on (replies, errors, other types).
    DropIcmpIgnored = "drop_icmp_ignored",
    /// Drop: neighbour discovery that fails RFC 4861 §7.1 validation.
    DropNdMalformed = "drop_nd_malformed",
    /// Drop: NS for an address not ours.
    DropNdNotForUs = "drop_nd_not_for_us",
    /// Drop: a fragment addressed to us (we do not reassemble).
    DropLocalFragment = "drop_local_fragment",
    /// Drop: TCP/UDP/other protocol to us (unreachable sent unless limited).
    DropLocalProtocol = "drop_local_protocol",
    /// Drop: no packet buffer free for a reply or request.
    DropNoBuffer = "drop_no_buffer",
    /// Drop: the egress port's descriptor ring was full.
    DropEgressRingFull = "drop_egress_ring_full",
    /// Drop: the link's transmit ring stayed full.
    DropTxRingFull = "drop_tx_ring_full",
    /// Drop: no address on the port to send an ICMP error or ND/ARP from.
    DropNoSourceAddress = "drop_no_source_address",
    /// Drop: a parse error no other counter names (a header the router does not
    /// validate itself; see [`drop_counter`]).
    DropMalformedOther = "drop_malformed_other",
    /// Cluster: packets handed to the interconnect for a port of another node.
    ClusterSent = "cluster_sent",
    /// Cluster: packets received from the interconnect.
    ClusterReceived = "cluster_received",
    /// Cluster: packets received from the interconnect and sent on to a third node
    /// (a VLB intermediate's work).
    ClusterRelayed = "cluster_relayed",
    /// Cluster: packets that arrived behind a later packet of their flow bucket.
    ClusterReordered = "cluster_reordered",
    /// Drop: an interconnect message or per-packet header that does not parse (wrong
    /// magic, a length past the message, a runt, an unknown port or node).
    DropClusterMalformed = "drop_cluster_malformed",
    /// Drop: a packet that crossed the interconnect twice already and would cross again
    /// (the nodes' FIBs disagree).
    DropClusterLoop = "drop_cluster_loop",
    /// Drop: a packet for a node the interconnect cannot reach (not connected, or its
    /// connection closed: the node stopped or died).
    DropClusterPeerDown = "drop_cluster_peer_down",
    /// Drop: the interconnect's send slots to a node stayed full.
    DropClusterBacklog = "drop_cluster_backlog",
}

/// The one place a weft-wire parse error becomes a drop counter, as rustls maps each
/// error to one alert: the pipeline never inspects an error itself. Each arm is the
/// check RFC 1812 §5.2.2 (IPv4), RFC 8200 §3-4 (IPv6), RFC 826 (ARP), RFC 4861 §7.1
/// (ND) or RFC 1122 §3.2.2 / RFC 4443 §2.4 (ICMP) names.
pub fn drop_counter(e: &Error) -> Counter {
    match *e {
        Error::Truncated {
            header: Header::Ethernet,
            ..
        } => Counter::DropRunt,
        Error::Field {
            header: Header::Ipv4 | Header::Ipv6,
            field: Field::Version,
            ..
        } => Counter::DropIpVersion,
        // IPv4: shorter than 20 bytes or than IHL × 4, IHL below 5, total length below
        // the header or past the frame, header checksum.
        Error::Truncated {
            header: Header::Ipv4,
            ..
        } => Counter::DropIpv4Truncated,
        Error::Field {
            header: Header::Ipv4,
            field: Field::Ihl,
            ..
        } => Counter::DropIpv4BadIhl,
        Error::Length {
            header: Header::Ipv4,
            field: Field::TotalLength,
            ..
        } => Counter::DropIpv4BadTotalLength,
        Error::Checksum {
            header: Header::Ipv4,
        } => Counter::DropIpv4BadChecksum,
        // IPv6: shorter than 40 bytes, payload length past the frame, an extension
        // header chain that is malformed or too long.
        Error::Truncated {
            header: Header::Ipv6,
            ..
        } => Counter::DropIpv6Truncated,
        Error::Length {
            header: Header::Ipv6,
            field: Field::PayloadLength,
            ..
        } => Counter::DropIpv6BadPayloadLength,
        Error::Field {
            header: Header::Ipv6,
            field: Field::ExtCount,
            ..
        } => Counter::DropIpv6BadExtHeaders,
        _ if matches!(e.header(), Header::Ipv6Ext(_)) => Counter::DropIpv6BadExtHeaders,
        _ if e.header() == Header::Arp => Counter::DropArpMalformed,
        // ICMP types we do not parse are valid messages we do not act on.
        Error::Unsupported {
            header: Header::Icmpv4 | Header::Icmpv6,
            field: Field::Type,
            ..
        } => Counter::DropIcmpIgnored,
        _ if e.header() == Header::Ndp => Counter::DropNdMalformed,
        _ if matches!(e.header(), Header::Icmpv4 | Header::Icmpv6) => Counter::DropIcmpMalformed,
        _ => Counter::DropMalformedOther,
    }
}

/// Number of counters.
pub const COUNT: usize = Counter::ALL.len();

/// One worker's counters.
#[derive(Debug)]
pub struct Counters {
    v: [AtomicU64; COUNT],
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            v: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Counters {
    /// Add `n`. Only the owning worker calls this, so load + store is enough (no
    /// locked read-modify-write); readers may see a value one update old.
    #[inline]
    pub fn add(&self, c: Counter, n: u64) {
        let a = &self.v[c as usize];
        a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Add one.
    #[inline]
    pub fn inc(&self, c: Counter) {
        self.add(c, 1);
    }

    /// Current value.
    pub fn get(&self, c: Counter) -> u64 {
        self.v[c as usize].load(Ordering::Relaxed)
    }
}

/// The sum over several workers' blocks.
pub fn sum<'a>(blocks: impl IntoIterator<Item = &'a Counters>) -> Vec<(Counter, u64)> {
    let mut total = [0u64; COUNT];
    for b in blocks {
        for (i, t) in total.iter_mut().enumerate() {
            *t = t.wrapping_add(b.v[i].load(Ordering::Relaxed));
        }
    }
    Counter::ALL
        .iter()
        .map(|&c| (c, total[c as usize]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_sums_add_up() {
        let mut names: Vec<_> = Counter::ALL.iter().map(|c| c.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), COUNT);
        let (a, b) = (Counters::default(), Counters::default());
        a.inc(Counter::DropRunt);
        b.add(Counter::DropRunt, 2);
        let s = sum([&a, &b]);
        assert_eq!(s[Counter::DropRunt as usize], (Counter::DropRunt, 3));
    }

    #[test]
    fn each_wire_error_has_its_counter() {
        let t = |header, need, have| Error::Truncated { header, need, have };
        let f = |header, field, value| Error::Field {
            header,
            field,
            value,
        };
        let l = |header, field, value| Error::Length {
            header,
            field,
            value,
        };
        let cases = [
            (t(Header::Ethernet, 14, 3), Counter::DropRunt),
            (t(Header::Arp, 28, 27), Counter::DropArpMalformed),
            (f(Header::Ipv4, Field::Version, 6), Counter::DropIpVersion),
            (f(Header::Ipv6, Field::Version, 4), Counter::DropIpVersion),
            (t(Header::Ipv4, 20, 19), Counter::DropIpv4Truncated),
            (t(Header::Ipv4, 24, 20), Counter::DropIpv4Truncated),
            (f(Header::Ipv4, Field::Ihl, 4), Counter::DropIpv4BadIhl),
            (
                l(Header::Ipv4, Field::TotalLength, 19),
                Counter::DropIpv4BadTotalLength,
            ),
            (
                Error::Checksum {
                    header: Header::Ipv4,
                },
                Counter::DropIpv4BadChecksum,
            ),
            (t(Header::Ipv6, 40, 39), Counter::DropIpv6Truncated),
            (
                l(Header::Ipv6, Field::PayloadLength, 8),
                Counter::DropIpv6BadPayloadLength,
            ),
            (
                f(Header::Ipv6, Field::ExtCount, 9),
                Counter::DropIpv6BadExtHeaders,
            ),
            (
                t(Header::Ipv6Ext(weft_wire::IpProtocol::ROUTING), 42, 40),
                Counter::DropIpv6BadExtHeaders,
            ),
            (
                Error::Unsupported {
                    header: Header::Icmpv4,
                    field: Field::Type,
                    value: 13,
                },
                Counter::DropIcmpIgnored,
            ),
            (
                Error::Checksum {
                    header: Header::Icmpv6,
                },
                Counter::DropIcmpMalformed,
            ),
            (
                Error::Checksum {
                    header: Header::Ndp,
                },
                Counter::DropNdMalformed,
            ),
            (f(Header::Ndp, Field::Code, 1), Counter::DropNdMalformed),
            (f(Header::Bth, Field::TVer, 1), Counter::DropMalformedOther),
        ];
        for (e, c) in cases {
            assert_eq!(drop_counter(&e), c, "{e}");
        }
    }
}
