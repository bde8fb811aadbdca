//! Every per-packet rule of the router, driven through one worker with a fixed clock.
//! Frames are built with weft-wire's `Repr`s and checked with its views; checksums
//! are also checked against a from-scratch RFC 1071 sum written here.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_link::{BufferPool, PacketBuf};
use weft_router::{Counter, PortSpec, Router, RouterConfig, Worker};
use weft_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use weft_wire::ethernet::EthernetFrame;
use weft_wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};
use weft_wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};
use weft_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use weft_wire::ipv6::{Ipv6Packet, Ipv6Repr};
use weft_wire::{EtherType, EthernetAddress, IpProtocol};

const R0: EthernetAddress = EthernetAddress([2, 0, 0, 0, 1, 1]);
const R1: EthernetAddress = EthernetAddress([2, 0, 0, 0, 2, 1]);
const HA: EthernetAddress = EthernetAddress([2, 0, 0, 0, 1, 2]);
const HB: EthernetAddress = EthernetAddress([2, 0, 0, 0, 2, 2]);

fn v4(s: &str) -> Ipv4Addr {
    s.parse().expect("ipv4")
}
fn v6(s: &str) -> Ipv6Addr {
    s.parse().expect("ipv6")
}

/// RFC 1071, the obvious way.
fn sum16(b: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for c in b.chunks(2) {
        acc += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

struct Harness {
    router: Arc<Router>,
    worker: Worker,
    pool: BufferPool,
    now: Instant,
}

impl Harness {
    fn new() -> Harness {
        Harness::with_config(RouterConfig::default())
    }

    fn with_config(cfg: RouterConfig) -> Harness {
        Harness::build(cfg, 1514)
    }

    /// The "right" port (towards host B and 198.19/16) with this MTU.
    fn with_right_mtu(mtu: usize) -> Harness {
        Harness::build(RouterConfig::default(), mtu + 14)
    }

    fn build(cfg: RouterConfig, right_max_frame: usize) -> Harness {
        let router = Router::new(
            vec![
                PortSpec {
                    name: "left".into(),
                    mac: R0,
                    v4: vec![(v4("198.18.1.1"), 24)],
                    v6: vec![(v6("2001:2:0:1::1"), 64)],
                    max_frame: 1514,
                },
                PortSpec {
                    name: "right".into(),
                    mac: R1,
                    v4: vec![(v4("198.18.2.1"), 24)],
                    v6: vec![(v6("2001:2:0:2::1"), 64)],
                    max_frame: right_max_frame,
                },
            ],
            cfg,
        );
        router
            .add_route(
                "198.19.0.0/16".parse().expect("prefix"),
                "198.18.2.2".parse().expect("ip"),
            )
            .expect("route");
        router
            .add_route(
                "2001:2:0:100::/56".parse().expect("prefix"),
                "2001:2:0:2::2".parse().expect("ip"),
            )
            .expect("route");
        let pool = BufferPool::new(256, 2048);
        let worker = router.worker(pool.clone());
        Harness {
            router,
            worker,
            pool,
            now: Instant::now(),
        }
    }

    /// Feed one frame on `port`; return what the router sends, as bytes.
    fn rx(&mut self, port: usize, frame: &[u8]) -> Vec<(usize, Vec<u8>)> {
        let mut b: PacketBuf = self.pool.alloc().expect("buffer");
        assert!(b.copy_from(frame));
        let mut out = Vec::new();
        self.worker.process_burst(port, [b], self.now, &mut out);
        out.into_iter().map(|(p, b)| (p, b.to_vec())).collect()
    }

    fn tick(&mut self) -> Vec<(usize, Vec<u8>)> {
        let mut out = Vec::new();
        self.worker.tick(self.now, &mut out);
        out.into_iter().map(|(p, b)| (p, b.to_vec())).collect()
    }

    fn c(&self, c: Counter) -> u64 {
        self.router.counter(c)
    }

    /// Teach the router host B's MAC with an ARP request from B for our address.
    fn learn_hb(&mut self) {
        let out = self.rx(
            1,
            &arp(
                ArpOperation::REQUEST,
                HB,
                v4("198.18.2.2"),
                EthernetAddress([0; 6]),
                v4("198.18.2.1"),
                EthernetAddress::BROADCAST,
            ),
        );
        assert_eq!(out.len(), 1);
    }

    fn learn_hb6(&mut self) {
        let ns = Icmpv6Repr::NeighborSolicit {
            target_addr: v6("2001:2:0:2::1"),
            source_lladdr: Some(HB),
        };
        let f = ip6_icmp(HB, R1, v6("2001:2:0:2::2"), v6("2001:2:0:2::1"), 255, &ns);
        assert_eq!(self.rx(1, &f).len(), 1);
    }
}

fn eth(dst: EthernetAddress, src: EthernetAddress, et: EtherType, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + payload.len()];
    let mut e = EthernetFrame::new_unchecked(&mut f[..]);
    e.set_dst_addr(dst);
    e.set_src_addr(src);
    e.set_tag_and_ethertype(None, et);
    f[14..].copy_from_slice(payload);
    f
}

fn arp(
    op: ArpOperation,
    sha: EthernetAddress,
    spa: Ipv4Addr,
    tha: EthernetAddress,
    tpa: Ipv4Addr,
    dst: EthernetAddress,
) -> Vec<u8> {
    let r = ArpRepr {
        operation: op,
        source_hardware_addr: sha,
        source_protocol_addr: spa,
        target_hardware_addr: tha,
        target_protocol_addr: tpa,
    };
    let mut p = vec![0u8; 28];
    r.emit(&mut ArpPacket::new_unchecked(&mut p[..]))
        .expect("arp");
    eth(dst, sha, EtherType::ARP, &p)
}

fn ip4(src: Ipv4Addr, dst: Ipv4Addr, proto: IpProtocol, ttl: u8, payload: &[u8]) -> Vec<u8> {
    let r = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: proto,
        payload_len: payload.len(),
        ttl,
        dscp_ecn: 0,
        ident: 0x1234,
        dont_frag: true,
    };
    let mut p = vec![0u8; 20 + payload.len()];
    r.emit(&mut Ipv4Packet::new_unchecked(&mut p[..]))
        .expect("ipv4");
    p[20..].copy_from_slice(payload);
    p
}

fn udp_bytes(len: usize) -> Vec<u8> {
    let mut u = vec![0u8; 8 + len];
    u[0..2].copy_from_slice(&40000u16.to_be_bytes());
    u[2..4].copy_from_slice(&33434u16.to_be_bytes());
    u[4..6].copy_from_slice(&((8 + len) as u16).to_be_bytes());
    u
}

fn echo4(ident: u16, seq: u16, data: &[u8]) -> Vec<u8> {
    let r = Icmpv4Repr::EchoRequest {
        ident,
        seq_no: seq,
        data,
    };
    let mut p = vec![0u8; r.buffer_len()];
    r.emit(&mut Icmpv4Packet::new_unchecked(&mut p[..]))
        .expect("icmp");
    p
}

fn ip6(src: Ipv6Addr, dst: Ipv6Addr, nh: IpProtocol, hop: u8, payload: &[u8]) -> Vec<u8> {
    let r = Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: nh,
        payload_len: payload.len(),
        hop_limit: hop,
        traffic_class: 0,
        flow_label: 7,
    };
    let mut p = vec![0u8; 40 + payload.len()];
    r.emit(&mut Ipv6Packet::new_unchecked(&mut p[..]))
        .expect("ipv6");
    p[40..].copy_from_slice(payload);
    p
}

fn ip6_icmp(
    s: EthernetAddress,
    d: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop: u8,
    icmp: &Icmpv6Repr<'_>,
) -> Vec<u8> {
    let mut m = vec![0u8; icmp.buffer_len()];
    icmp.emit(&mut Icmpv6Packet::new_unchecked(&mut m[..]), src, dst)
        .expect("icmpv6");
    eth(
        d,
        s,
        EtherType::IPV6,
        &ip6(src, dst, IpProtocol::IPV6_ICMP, hop, &m),
    )
}

/// A UDP datagram from host A through the router to 198.19.5.5 (routed via B).
fn udp_through(ttl: u8) -> Vec<u8> {
    eth(
        R0,
        HA,
        EtherType::IPV4,
        &ip4(
            v4("198.18.1.2"),
            v4("198.19.5.5"),
            IpProtocol::UDP,
            ttl,
            &udp_bytes(18),
        ),
    )
}

fn parse_icmp4(frame: &[u8]) -> (Ipv4Repr, Vec<u8>) {
    let e = EthernetFrame::new_checked(frame).expect("eth");
    assert_eq!(e.ethertype(), EtherType::IPV4);
    let ip = Ipv4Packet::new_checked(e.payload()).expect("ipv4");
    assert_eq!(sum16(ip.header()), 0, "IPv4 header checksum");
    let r = Ipv4Repr::parse(&ip).expect("repr");
    assert_eq!(r.protocol, IpProtocol::ICMP);
    assert_eq!(sum16(ip.payload()), 0, "ICMP checksum");
    (r, ip.payload().to_vec())
}

// ---- ARP ------------------------------------------------------------------------------

#[test]
fn arp_request_for_our_address_is_answered_and_the_sender_learned() {
    let mut h = Harness::new();
    let req = arp(
        ArpOperation::REQUEST,
        HA,
        v4("198.18.1.2"),
        EthernetAddress([0; 6]),
        v4("198.18.1.1"),
        EthernetAddress::BROADCAST,
    );
    let out = h.rx(0, &req);
    assert_eq!(out.len(), 1);
    let (port, f) = &out[0];
    assert_eq!(*port, 0);
    assert_eq!(f.len(), 60, "padded to the Ethernet minimum");
    let e = EthernetFrame::new_checked(&f[..]).expect("eth");
    assert_eq!(
        (e.dst_addr(), e.src_addr(), e.ethertype()),
        (HA, R0, EtherType::ARP)
    );
    let r = ArpRepr::parse(&ArpPacket::new_checked(e.payload()).expect("arp")).expect("arp repr");
    assert_eq!(r.operation, ArpOperation::REPLY);
    assert_eq!(
        (r.source_hardware_addr, r.source_protocol_addr),
        (R0, v4("198.18.1.1"))
    );
    assert_eq!(
        (r.target_hardware_addr, r.target_protocol_addr),
        (HA, v4("198.18.1.2"))
    );
    assert_eq!(h.c(Counter::ArpReplied), 1);
    let n = h.router.neighbors(h.now);
    assert_eq!(n.len(), 1);
    assert_eq!(
        (n[0].ip, n[0].mac),
        (IpAddr::V4(v4("198.18.1.2")), Some(HA))
    );
}

#[test]
fn arp_for_someone_else_is_counted_and_not_learned() {
    let mut h = Harness::new();
    let req = arp(
        ArpOperation::REQUEST,
        HA,
        v4("198.18.1.2"),
        EthernetAddress([0; 6]),
        v4("198.18.1.77"),
        EthernetAddress::BROADCAST,
    );
    assert!(h.rx(0, &req).is_empty());
    assert_eq!(h.c(Counter::DropArpNotForUs), 1);
    assert!(
        h.router.neighbors(h.now).is_empty(),
        "RFC 826: no entry created for a stranger's conversation"
    );
    let mut bad = req.clone();
    bad[14 + 4] = 8; // hardware length 8
    assert!(h.rx(0, &bad).is_empty());
    assert!(h.rx(0, &req[..30]).is_empty());
    assert_eq!(h.c(Counter::DropArpMalformed), 2);
}

#[test]
fn unresolved_next_hop_queues_asks_once_then_releases_on_the_reply() {
    let mut h = Harness::new();
    let mut requests = 0;
    for _ in 0..6 {
        for (port, f) in h.rx(0, &udp_through(64)) {
            assert_eq!(port, 1);
            let e = EthernetFrame::new_checked(&f[..]).expect("eth");
            assert_eq!(
                (e.dst_addr(), e.src_addr(), e.ethertype()),
                (EthernetAddress::BROADCAST, R1, EtherType::ARP)
            );
            let r =
                ArpRepr::parse(&ArpPacket::new_checked(e.payload()).expect("arp")).expect("repr");
            assert_eq!(
                (r.operation, r.source_protocol_addr, r.target_protocol_addr),
                (ArpOperation::REQUEST, v4("198.18.2.1"), v4("198.18.2.2"))
            );
            requests += 1;
        }
    }
    assert_eq!(requests, 1, "one request, not one per packet");
    assert_eq!(h.c(Counter::QueuedForNeighbor), 4);
    assert_eq!(h.c(Counter::DropNeighborQueueFull), 2);
    let reply = arp(
        ArpOperation::REPLY,
        HB,
        v4("198.18.2.2"),
        R1,
        v4("198.18.2.1"),
        R1,
    );
    let out = h.rx(1, &reply);
    assert_eq!(out.len(), 4, "the queued packets, in order");
    for (port, f) in &out {
        assert_eq!(*port, 1);
        let e = EthernetFrame::new_checked(&f[..]).expect("eth");
        assert_eq!((e.dst_addr(), e.src_addr()), (HB, R1));
        let ip = Ipv4Packet::new_checked(e.payload()).expect("ip");
        assert_eq!(ip.ttl(), 63);
        assert!(ip.verify_checksum());
    }
    assert_eq!(h.c(Counter::ReleasedFromQueue), 4);
    // Now resolved: straight through.
    let out = h.rx(0, &udp_through(64));
    assert_eq!(out.len(), 1);
    assert_eq!(h.c(Counter::Forwarded), 5);
    assert_eq!(h.pool.available(), 256, "no buffer leaked");
}

#[test]
fn unanswered_requests_are_retried_then_the_queue_is_dropped_and_counted() {
    let mut h = Harness::new();
    assert_eq!(h.rx(0, &udp_through(64)).len(), 1);
    let mut retries = 0;
    for _ in 0..50 {
        h.now += Duration::from_millis(200);
        retries += h.tick().len();
    }
    assert_eq!(
        retries, 2,
        "3 requests in all (RFC 4861 MAX_MULTICAST_SOLICIT)"
    );
    assert_eq!(h.c(Counter::DropNeighborUnreachable), 1);
    assert_eq!(h.pool.available(), 256);
}

// ---- IPv4 forwarding ------------------------------------------------------------------

#[test]
fn forwarding_decrements_ttl_patches_the_checksum_and_rewrites_macs() {
    let mut h = Harness::new();
    h.learn_hb();
    let inp = udp_through(17);
    let out = h.rx(0, &inp);
    assert_eq!(out.len(), 1);
    let (port, f) = &out[0];
    assert_eq!(*port, 1);
    assert_eq!(&f[0..6], &HB.0);
    assert_eq!(&f[6..12], &R1.0);
    assert_eq!(f[14 + 8], 16, "TTL − 1");
    assert_eq!(sum16(&f[14..34]), 0, "checksum still verifies");
    // Everything but TTL, checksum and MACs unchanged.
    let mut expect = inp.clone();
    expect[0..12].copy_from_slice(&f[0..12]);
    expect[14 + 8] = 16;
    expect[24..26].copy_from_slice(&f[24..26]);
    assert_eq!(f, &expect);
}

#[test]
fn incremental_checksum_equals_a_full_recompute_for_every_ttl_and_many_headers() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1624);
    let mut h = Harness::new();
    h.learn_hb();
    for i in 0..3000 {
        let ttl = if i < 254 {
            (i + 2) as u8
        } else {
            rng.gen_range(2..=255)
        };
        let mut p = ip4(
            Ipv4Addr::from(0xc612_0100 | rng.gen_range(2..250)),
            Ipv4Addr::from(0xc613_0000 | rng.gen::<u16>() as u32),
            IpProtocol(rng.gen_range(6..=17)),
            ttl,
            &[0u8; 8],
        );
        p[1] = rng.gen();
        p[4..8].copy_from_slice(&rng.gen::<[u8; 4]>());
        p[6] &= 0x40; // DF only: fragments of a forwarded packet are fine, keep it simple
        p[7] = 0;
        p[10..12].copy_from_slice(&[0, 0]);
        let c = sum16(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        let out = h.rx(0, &eth(R0, HA, EtherType::IPV4, &p));
        assert_eq!(out.len(), 1, "packet {i}");
        let f = &out[0].1;
        let mut recomputed = f[14..34].to_vec();
        recomputed[10..12].copy_from_slice(&[0, 0]);
        let full = sum16(&recomputed);
        assert_eq!(
            u16::from_be_bytes([f[24], f[25]]),
            full,
            "ttl {ttl}: RFC 1624 result differs from a recompute"
        );
    }
}

#[test]
fn ttl_one_gets_time_exceeded_from_the_ingress_address_quoting_the_header() {
    let mut h = Harness::new();
    h.learn_hb();
    // Teach A so the ICMP error can go straight back.
    h.rx(
        0,
        &arp(
            ArpOperation::REQUEST,
            HA,
            v4("198.18.1.2"),
            EthernetAddress([0; 6]),
            v4("198.18.1.1"),
            EthernetAddress::BROADCAST,
        ),
    );
    let inp = udp_through(1);
    let out = h.rx(0, &inp);
    assert_eq!(out.len(), 1);
    let (port, f) = &out[0];
    assert_eq!(*port, 0);
    assert_eq!(&f[0..6], &HA.0);
    let (ip, icmp) = parse_icmp4(f);
    assert_eq!(
        (ip.src_addr, ip.dst_addr, ip.ttl),
        (v4("198.18.1.1"), v4("198.18.1.2"), 64)
    );
    assert_eq!((icmp[0], icmp[1]), (11, 0), "time exceeded in transit");
    assert_eq!(
        &icmp[8..],
        &inp[14..14 + 28],
        "the IP header and 8 bytes, TTL as received"
    );
    assert_eq!(h.c(Counter::DropTtlExceeded), 1);
    assert_eq!(h.c(Counter::TimeExceededSent), 1);
    // TTL 0 likewise.
    h.rx(0, &udp_through(0));
    assert_eq!(h.c(Counter::DropTtlExceeded), 2);
}

#[test]
fn no_route_is_unreachable_and_icmp_errors_are_rate_limited() {
    let mut h = Harness::new();
    h.rx(
        0,
        &arp(
            ArpOperation::REQUEST,
            HA,
            v4("198.18.1.2"),
            EthernetAddress([0; 6]),
            v4("198.18.1.1"),
            EthernetAddress::BROADCAST,
        ),
    );
    let f = eth(
        R0,
        HA,
        EtherType::IPV4,
        &ip4(
            v4("198.18.1.2"),
            v4("203.0.113.9"),
            IpProtocol::UDP,
            64,
            &udp_bytes(4),
        ),
    );
    let mut sent = 0;
    for _ in 0..50 {
        for (_, o) in h.rx(0, &f) {
            let (_, icmp) = parse_icmp4(&o);
            assert_eq!((icmp[0], icmp[1]), (3, 0), "net unreachable");
            sent += 1;
        }
    }
    assert_eq!(sent, 10, "the burst, then nothing at the same instant");
    assert_eq!(h.c(Counter::IcmpRateLimited), 40);
    assert_eq!(h.c(Counter::DropNoRoute), 50);
    h.now += Duration::from_millis(100);
    let more: usize = (0..50).map(|_| h.rx(0, &f).len()).sum();
    assert_eq!(more, 10, "100 per second refills 10 in 100 ms");
}

#[test]
fn no_icmp_error_about_an_icmp_error_a_broadcast_or_a_later_fragment() {
    let mut h = Harness::new();
    // A time-exceeded message that itself runs out of TTL.
    let te = {
        let inner = ip4(
            v4("198.19.0.1"),
            v4("198.18.1.2"),
            IpProtocol::UDP,
            3,
            &udp_bytes(0),
        );
        let r = Icmpv4Repr::TimeExceeded {
            code: weft_wire::icmpv4::TimeExceededCode::TTL,
            invoking: &inner[..28],
        };
        let mut m = vec![0u8; r.buffer_len()];
        r.emit(&mut Icmpv4Packet::new_unchecked(&mut m[..]))
            .expect("icmp");
        m
    };
    let f = eth(
        R0,
        HA,
        EtherType::IPV4,
        &ip4(v4("198.18.1.2"), v4("198.19.0.1"), IpProtocol::ICMP, 1, &te),
    );
    assert!(h.rx(0, &f).is_empty());
    // A later fragment with TTL 1.
    let mut p = ip4(
        v4("198.18.1.2"),
        v4("198.19.0.1"),
        IpProtocol::UDP,
        1,
        &udp_bytes(8),
    );
    p[6..8].copy_from_slice(&0x0010u16.to_be_bytes());
    p[10..12].copy_from_slice(&[0, 0]);
    let c = sum16(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    assert!(h.rx(0, &eth(R0, HA, EtherType::IPV4, &p)).is_empty());
    assert_eq!(h.c(Counter::IcmpSuppressed), 2);
    assert_eq!(h.c(Counter::DropTtlExceeded), 2);
}

#[test]
fn too_big_for_the_egress_gets_fragmentation_needed_with_the_mtu() {
    let mut h = Harness::new();
    h.learn_hb();
    h.rx(
        0,
        &arp(
            ArpOperation::REQUEST,
            HA,
            v4("198.18.1.2"),
            EthernetAddress([0; 6]),
            v4("198.18.1.1"),
            EthernetAddress::BROADCAST,
        ),
    );
    let f = eth(
        R0,
        HA,
        EtherType::IPV4,
        &ip4(
            v4("198.18.1.2"),
            v4("198.19.0.1"),
            IpProtocol::UDP,
            64,
            &udp_bytes(1500),
        ),
    );
    let out = h.rx(0, &f);
    assert_eq!(out.len(), 1);
    let (_, icmp) = parse_icmp4(&out[0].1);
    assert_eq!((icmp[0], icmp[1]), (3, 4));
    assert_eq!(u16::from_be_bytes([icmp[6], icmp[7]]), 1500);
    assert_eq!(h.c(Counter::DropTooBig), 1);
}

/// An IPv4 UDP-protocol packet from host A to 198.19.0.1 with these options, DF
/// clear, MF and offset as given, checksum filled.
fn ip4_fragmentable(options: &[u8], more: bool, offset: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = ip4(v4("198.18.1.2"), v4("198.19.0.1"), IpProtocol::UDP, 64, &[]);
    p.extend_from_slice(options);
    p.extend_from_slice(payload);
    let len = p.len() as u16;
    let mut h = Ipv4Packet::new_unchecked(&mut p[..]);
    h.set_version_header_len(20 + options.len());
    h.set_total_len(len);
    h.set_frag(false, more, offset);
    h.fill_checksum();
    p
}

/// Checks the fragments the router sent towards host B for one packet and returns
/// (offset, MF, options, data) of each, in order.
fn fragments_to_hb(out: &[(usize, Vec<u8>)], mtu: usize) -> Vec<(u16, bool, Vec<u8>, Vec<u8>)> {
    out.iter()
        .map(|(port, f)| {
            assert_eq!(*port, 1, "towards host B");
            let e = EthernetFrame::new_checked(&f[..]).expect("eth");
            assert_eq!((e.dst_addr(), e.src_addr()), (HB, R1));
            let ip = Ipv4Packet::new_checked(e.payload()).expect("ipv4");
            assert_eq!(sum16(ip.header()), 0, "each fragment's header checksum");
            assert!(usize::from(ip.total_len()) <= mtu, "fits the MTU");
            assert_eq!((ip.ttl(), ip.ident(), ip.dont_frag()), (63, 0x1234, false));
            assert_eq!(ip.protocol(), IpProtocol::UDP);
            (
                ip.frag_offset(),
                ip.more_frags(),
                ip.options().to_vec(),
                ip.payload().to_vec(),
            )
        })
        .collect()
}

#[test]
fn without_df_a_packet_over_the_egress_mtu_is_fragmented_after_rfc_791() {
    let mut h = Harness::with_right_mtu(576);
    h.learn_hb();
    // NOP; record route (copied flag clear: first fragment only); router alert
    // (copied flag set: every fragment). 12 bytes, so a 32-byte header.
    let options = [1, 7, 7, 4, 0, 0, 0, 0, 148, 4, 0, 0];
    let data: Vec<u8> = (0..1400u32).map(|i| (i % 251) as u8).collect();
    let f = eth(
        R0,
        HA,
        EtherType::IPV4,
        &ip4_fragmentable(&options, false, 0, &data),
    );
    let frags = fragments_to_hb(&h.rx(0, &f), 576);
    // (576 − 32) & !7 = 544 in the first; (576 − 24) & !7 = 552 in the next; the rest.
    let shape: Vec<(u16, bool, usize)> = frags.iter().map(|f| (f.0, f.1, f.3.len())).collect();
    assert_eq!(
        shape,
        [(0, true, 544), (544, true, 552), (1096, false, 304)]
    );
    assert_eq!(frags[0].2, options, "the first fragment has every option");
    for later in &frags[1..] {
        assert_eq!(later.2, [148, 4, 0, 0], "later ones only the copied option");
    }
    let reassembled: Vec<u8> = frags.iter().flat_map(|f| f.3.clone()).collect();
    assert_eq!(reassembled, data);
    assert_eq!(h.c(Counter::Fragmented), 1);
    assert_eq!(h.c(Counter::FragmentsCreated), 3);
    assert_eq!(h.c(Counter::Forwarded), 3);
    assert_eq!(h.c(Counter::Ipv4OptionsForwarded), 1);

    // A fragment already (MF set, offset 1480): offsets continue from its own, and the
    // last piece keeps MF, since more of the original packet follows.
    let f = eth(
        R0,
        HA,
        EtherType::IPV4,
        &ip4_fragmentable(&[], true, 1480, &data[..1000]),
    );
    let frags = fragments_to_hb(&h.rx(0, &f), 576);
    let shape: Vec<(u16, bool, usize)> = frags.iter().map(|f| (f.0, f.1, f.3.len())).collect();
    assert_eq!(shape, [(1480, true, 552), (2032, true, 448)]);
    assert_eq!(frags[1].3, data[552..1000]);

    // Exactly the MTU passes whole; with DF, one byte more is fragmentation needed
    // with the next-hop MTU (RFC 1191), and nothing goes towards B.
    let f = eth(
        R0,
        HA,
        EtherType::IPV4,
        &ip4_fragmentable(&[], false, 0, &data[..556]),
    );
    assert_eq!(fragments_to_hb(&h.rx(0, &f), 576).len(), 1);
    h.rx(
        0,
        &arp(
            ArpOperation::REQUEST,
            HA,
            v4("198.18.1.2"),
            EthernetAddress([0; 6]),
            v4("198.18.1.1"),
            EthernetAddress::BROADCAST,
        ),
    );
    let mut df = ip4_fragmentable(&[], false, 0, &data[..557]);
    df[6] |= 0x40;
    fix_checksum(&mut df);
    let out = h.rx(0, &eth(R0, HA, EtherType::IPV4, &df));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 0, "back to host A");
    let (ip, icmp) = parse_icmp4(&out[0].1);
    assert_eq!(ip.src_addr, v4("198.18.1.1"));
    assert_eq!((icmp[0], icmp[1]), (3, 4));
    assert_eq!(u16::from_be_bytes([icmp[6], icmp[7]]), 576);
    assert_eq!(&icmp[8..36], &df[..28], "quotes the header and 8 bytes");
    assert_eq!(h.c(Counter::DropTooBig), 1);
    assert_eq!(h.c(Counter::TooBigSent), 1);
    assert_eq!(h.c(Counter::Fragmented), 2);
    assert_eq!(h.pool.available(), 256, "every fragment's buffer came back");
}

#[test]
fn ipv6_over_the_egress_mtu_gets_packet_too_big_with_the_mtu() {
    let mut h = Harness::with_right_mtu(1280);
    h.learn_hb6();
    let ns = Icmpv6Repr::NeighborSolicit {
        target_addr: v6("2001:2:0:1::1"),
        source_lladdr: Some(HA),
    };
    h.rx(
        0,
        &ip6_icmp(HA, R0, v6("2001:2:0:1::2"), v6("2001:2:0:1::1"), 255, &ns),
    );
    let packet = |len: usize| {
        eth(
            R0,
            HA,
            EtherType::IPV6,
            &ip6(
                v6("2001:2:0:1::2"),
                v6("2001:2:0:100::9"),
                IpProtocol::UDP,
                64,
                &udp_bytes(len - 40 - 8),
            ),
        )
    };
    // 1280 bytes fit; 1281 do not, and routers never fragment IPv6 (RFC 8200 §5).
    let out = h.rx(0, &packet(1280));
    assert_eq!((out.len(), out[0].0), (1, 1));
    let inp = packet(1281);
    let out = h.rx(0, &inp);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, 0, "back to host A");
    let e = EthernetFrame::new_checked(&out[0].1[..]).expect("eth");
    let ip = Ipv6Packet::new_checked(e.payload()).expect("ipv6");
    assert_eq!(ip.src_addr(), v6("2001:2:0:1::1"));
    assert!(
        ip.payload().len() + 40 <= 1280,
        "the error itself fits the minimum MTU"
    );
    match Icmpv6Repr::parse(
        &Icmpv6Packet::new_checked(ip.payload()).expect("icmp"),
        ip.src_addr(),
        ip.dst_addr(),
    )
    .expect("repr")
    {
        Icmpv6Repr::PacketTooBig { mtu, invoking } => {
            assert_eq!(mtu, 1280);
            assert!(invoking.len() >= 1000);
            assert_eq!(invoking, &inp[14..14 + invoking.len()]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.c(Counter::DropTooBig), 1);
    assert_eq!(h.c(Counter::TooBigSent), 1);
    assert_eq!(h.c(Counter::Fragmented), 0);
}

// ---- IPv4 to the router ----------------------------------------------------------------

#[test]
fn echo_to_either_router_address_is_answered() {
    let mut h = Harness::new();
    h.rx(
        0,
        &arp(
            ArpOperation::REQUEST,
            HA,
            v4("198.18.1.2"),
            EthernetAddress([0; 6]),
            v4("198.18.1.1"),
            EthernetAddress::BROADCAST,
        ),
    );
    for target in ["198.18.1.1", "198.18.2.1"] {
        let data: Vec<u8> = (0..56).collect();
        let f = eth(
            R0,
            HA,
            EtherType::IPV4,
            &ip4(
                v4("198.18.1.2"),
                v4(target),
                IpProtocol::ICMP,
                64,
                &echo4(0x77, 3, &data),
            ),
        );
        let out = h.rx(0, &f);
        assert_eq!(out.len(), 1, "{target}");
        assert_eq!(out[0].0, 0, "the reply goes back the way the request came");
        let (ip, icmp) = parse_icmp4(&out[0].1);
        assert_eq!((ip.src_addr, ip.dst_addr), (v4(target), v4("198.18.1.2")));
        match Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&icmp[..]).expect("icmp")).expect("repr")
        {
            Icmpv4Repr::EchoReply {
                ident,
                seq_no,
                data: d,
            } => {
                assert_eq!((ident, seq_no, d), (0x77, 3, &data[..]));
            }
            other => panic!("not an echo reply: {other:?}"),
        }
    }
    assert_eq!(h.c(Counter::EchoReplied), 2);
}

#[test]
fn udp_to_the_router_is_port_unreachable_from_the_address_asked() {
    let mut h = Harness::new();
    h.rx(
        0,
        &arp(
            ArpOperation::REQUEST,
            HA,
            v4("198.18.1.2"),
            EthernetAddress([0; 6]),
            v4("198.18.1.1"),
            EthernetAddress::BROADCAST,
        ),
    );
    let f = eth(
        R0,
        HA,
        EtherType::IPV4,
        &ip4(
            v4("198.18.1.2"),
            v4("198.18.2.1"),
            IpProtocol::UDP,
            64,
            &udp_bytes(10),
        ),
    );
    let out = h.rx(0, &f);
    assert_eq!(out.len(), 1);
    let (ip, icmp) = parse_icmp4(&out[0].1);
    assert_eq!(ip.src_addr, v4("198.18.2.1"));
    assert_eq!((icmp[0], icmp[1]), (3, 3));
    assert_eq!(h.c(Counter::DropLocalProtocol), 1);
    let f = eth(
        R0,
        HA,
        EtherType::IPV4,
        &ip4(
            v4("198.18.1.2"),
            v4("198.18.1.1"),
            IpProtocol(47),
            64,
            &[0; 8],
        ),
    );
    let (_, icmp) = parse_icmp4(&h.rx(0, &f)[0].1);
    assert_eq!((icmp[0], icmp[1]), (3, 2), "protocol unreachable");
}

// ---- validation: every drop has its counter ---------------------------------------------

fn fix_checksum(p: &mut [u8]) {
    let hl = usize::from(p[0] & 0x0f) * 4;
    p[10..12].copy_from_slice(&[0, 0]);
    let c = sum16(&p[..hl.min(p.len())]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
}

#[test]
fn malformed_frames_are_dropped_each_with_its_own_counter() {
    let mut h = Harness::new();
    h.learn_hb();
    let good = ip4(
        v4("198.18.1.2"),
        v4("198.19.0.1"),
        IpProtocol::UDP,
        64,
        &udp_bytes(12),
    );
    let send = |h: &mut Harness, p: &[u8]| h.rx(0, &eth(R0, HA, EtherType::IPV4, p));
    let cases: Vec<(&str, Vec<u8>, Counter)> = vec![
        (
            "short header",
            good[..19].to_vec(),
            Counter::DropIpv4Truncated,
        ),
        (
            "version 6 in an IPv4 frame",
            {
                let mut p = good.clone();
                p[0] = 0x65;
                fix_checksum(&mut p);
                p
            },
            Counter::DropIpVersion,
        ),
        (
            "IHL 4",
            {
                let mut p = good.clone();
                p[0] = 0x44;
                p
            },
            Counter::DropIpv4BadIhl,
        ),
        (
            "IHL beyond the frame",
            {
                let mut p = good[..24].to_vec();
                p[0] = 0x4f;
                p
            },
            Counter::DropIpv4Truncated,
        ),
        (
            "total length beyond the frame",
            {
                let mut p = good.clone();
                p[2..4].copy_from_slice(&200u16.to_be_bytes());
                fix_checksum(&mut p);
                p
            },
            Counter::DropIpv4BadTotalLength,
        ),
        (
            "total length below the header",
            {
                let mut p = good.clone();
                p[2..4].copy_from_slice(&19u16.to_be_bytes());
                fix_checksum(&mut p);
                p
            },
            Counter::DropIpv4BadTotalLength,
        ),
        (
            "bad checksum",
            {
                let mut p = good.clone();
                p[11] ^= 1;
                p
            },
            Counter::DropIpv4BadChecksum,
        ),
        (
            "multicast source",
            {
                let mut p = good.clone();
                p[12] = 224;
                fix_checksum(&mut p);
                p
            },
            Counter::DropMartianSource,
        ),
        (
            "loopback destination",
            {
                let mut p = good.clone();
                p[16..20].copy_from_slice(&[127, 0, 0, 1]);
                fix_checksum(&mut p);
                p
            },
            Counter::DropMartianDestination,
        ),
        (
            "directed broadcast",
            {
                let mut p = good.clone();
                p[16..20].copy_from_slice(&[198, 18, 2, 255]);
                fix_checksum(&mut p);
                p
            },
            Counter::DropMartianDestination,
        ),
        (
            "multicast destination",
            {
                let mut p = good.clone();
                p[16..20].copy_from_slice(&[239, 1, 1, 1]);
                fix_checksum(&mut p);
                p
            },
            Counter::DropMulticast,
        ),
    ];
    for (what, p, counter) in &cases {
        let before = h.c(*counter);
        assert!(send(&mut h, p).is_empty(), "{what}: must not be forwarded");
        assert_eq!(h.c(*counter), before + 1, "{what}: {counter:?}");
    }
    // Options: source route dropped, malformed dropped, others forwarded.
    let with_opts = |opts: &[u8]| {
        let mut p = vec![0u8; 20 + opts.len()];
        p[..20].copy_from_slice(&good[..20]);
        p[20..].copy_from_slice(opts);
        p.extend_from_slice(&good[20..]);
        p[0] = 0x40 | ((20 + opts.len()) / 4) as u8;
        let tl = p.len() as u16;
        p[2..4].copy_from_slice(&tl.to_be_bytes());
        fix_checksum(&mut p);
        p
    };
    assert!(send(&mut h, &with_opts(&[131, 7, 4, 1, 2, 3, 4, 0])).is_empty());
    assert_eq!(h.c(Counter::DropIpv4SourceRoute), 1);
    assert!(send(&mut h, &with_opts(&[7, 9, 4, 0])).is_empty());
    assert_eq!(h.c(Counter::DropIpv4BadOptions), 1);
    let out = send(&mut h, &with_opts(&[7, 7, 4, 0, 0, 0, 0, 0]));
    assert_eq!(out.len(), 1, "record route is forwarded");
    assert_eq!(sum16(&out[0].1[14..42]), 0);
    assert_eq!(h.c(Counter::Ipv4OptionsForwarded), 1);
    // Ethernet level.
    assert!(h.rx(0, &[0u8; 13]).is_empty());
    assert_eq!(h.c(Counter::DropRunt), 1);
    assert!(h.rx(0, &eth(HB, HA, EtherType::IPV4, &good)).is_empty());
    assert_eq!(h.c(Counter::DropNotOurMac), 1);
    assert!(h.rx(0, &eth(R0, HA, EtherType(0x88b5), &good)).is_empty());
    assert_eq!(h.c(Counter::DropUnknownEthertype), 1);
    let mut tagged = eth(R0, HA, EtherType::VLAN, &[0, 5, 8, 0]);
    tagged.extend_from_slice(&good);
    assert!(h.rx(0, &tagged).is_empty());
    assert_eq!(h.c(Counter::DropVlanTagged), 1);
    // Broadcast frame with a unicast IP destination is not routed.
    assert!(h
        .rx(
            0,
            &eth(EthernetAddress::BROADCAST, HA, EtherType::IPV4, &good)
        )
        .is_empty());
    assert_eq!(h.c(Counter::DropMulticast), 2);
    assert_eq!(h.c(Counter::Forwarded), 1);
    assert_eq!(h.pool.available(), 256);
}

#[test]
fn icmp_fragments_and_extension_headers_to_the_router_each_have_their_counter() {
    let mut h = Harness::new();
    let to_router = |proto: IpProtocol, payload: &[u8]| {
        ip4(v4("198.18.1.2"), v4("198.18.1.1"), proto, 64, payload)
    };
    // An echo request whose ICMP checksum is wrong.
    let mut bad = echo4(1, 1, b"weft");
    bad[2] ^= 0xff;
    assert!(h
        .rx(
            0,
            &eth(R0, HA, EtherType::IPV4, &to_router(IpProtocol::ICMP, &bad))
        )
        .is_empty());
    assert_eq!(h.c(Counter::DropIcmpMalformed), 1);
    // An echo reply: nothing to do with it.
    let reply = Icmpv4Repr::EchoReply {
        ident: 1,
        seq_no: 1,
        data: b"weft",
    };
    let mut m = vec![0u8; reply.buffer_len()];
    reply
        .emit(&mut Icmpv4Packet::new_unchecked(&mut m[..]))
        .expect("icmp");
    assert!(h
        .rx(
            0,
            &eth(R0, HA, EtherType::IPV4, &to_router(IpProtocol::ICMP, &m))
        )
        .is_empty());
    assert_eq!(h.c(Counter::DropIcmpIgnored), 1);
    // A first fragment of an echo request to us: we do not reassemble.
    let mut frag = to_router(IpProtocol::ICMP, &echo4(1, 2, b"weft"));
    frag[6] = 0x20; // MF, DF clear
    fix_checksum(&mut frag);
    assert!(h.rx(0, &eth(R0, HA, EtherType::IPV4, &frag)).is_empty());
    // IPv6: a fragment header (MF set) in front of UDP, to our address.
    let mut p = vec![17, 0, 0, 1, 0, 0, 0, 9];
    p.extend_from_slice(&udp_bytes(8));
    let f = ip6(
        v6("2001:2:0:1::2"),
        v6("2001:2:0:1::1"),
        IpProtocol(44),
        64,
        &p,
    );
    assert!(h.rx(0, &eth(R0, HA, EtherType::IPV6, &f)).is_empty());
    assert_eq!(h.c(Counter::DropLocalFragment), 2);
    // A hop-by-hop header whose length runs past the packet, to be forwarded.
    let f = ip6(
        v6("2001:2:0:1::2"),
        v6("2001:2:0:100::9"),
        IpProtocol(0),
        64,
        &[17, 5, 0, 0, 0, 0, 0, 0],
    );
    assert!(h.rx(0, &eth(R0, HA, EtherType::IPV6, &f)).is_empty());
    assert_eq!(h.c(Counter::DropIpv6BadExtHeaders), 1);
    // No buffer for the echo reply: every buffer but the one the request arrives in
    // is held elsewhere.
    let mut held = Vec::new();
    h.pool.alloc_burst(h.pool.available() - 1, &mut held);
    let echo = to_router(IpProtocol::ICMP, &echo4(1, 3, b"weft"));
    assert!(h.rx(0, &eth(R0, HA, EtherType::IPV4, &echo)).is_empty());
    assert_eq!(h.c(Counter::DropNoBuffer), 1);
    drop(held);
    assert_eq!(h.c(Counter::EchoReplied), 0);
    assert_eq!(h.pool.available(), 256);
}

#[test]
fn an_icmp_error_from_a_port_without_an_ipv4_address_is_counted_not_sent() {
    let router = Router::new(
        vec![
            PortSpec {
                name: "v6only".into(),
                mac: R0,
                v4: vec![],
                v6: vec![(v6("2001:2:0:1::1"), 64)],
                max_frame: 1514,
            },
            PortSpec {
                name: "right".into(),
                mac: R1,
                v4: vec![(v4("198.18.2.1"), 24)],
                v6: vec![],
                max_frame: 1514,
            },
        ],
        RouterConfig::default(),
    );
    let pool = BufferPool::new(16, 2048);
    let mut w = router.worker(pool.clone());
    let mut b: PacketBuf = pool.alloc().expect("buffer");
    let f = eth(
        R0,
        HA,
        EtherType::IPV4,
        &ip4(
            v4("198.18.1.2"),
            v4("198.18.2.2"),
            IpProtocol::UDP,
            1,
            &udp_bytes(8),
        ),
    );
    assert!(b.copy_from(&f));
    let mut out = Vec::new();
    w.process_burst(0, [b], Instant::now(), &mut out);
    assert!(out.is_empty());
    assert_eq!(router.counter(Counter::DropTtlExceeded), 1);
    assert_eq!(router.counter(Counter::DropNoSourceAddress), 1);
    assert_eq!(pool.available(), 16);
}

#[test]
fn ethernet_padding_is_not_forwarded() {
    let mut h = Harness::new();
    h.learn_hb();
    let mut f = eth(
        R0,
        HA,
        EtherType::IPV4,
        &ip4(
            v4("198.18.1.2"),
            v4("198.19.0.1"),
            IpProtocol::UDP,
            64,
            &udp_bytes(0),
        ),
    );
    assert_eq!(f.len(), 42);
    f.resize(60, 0xee);
    let out = h.rx(0, &f);
    assert_eq!(out[0].1.len(), 42);
}

#[test]
fn random_and_mutated_frames_never_panic_or_leak() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(99);
    // A small MTU towards B, so mutated large packets go through the fragmenter.
    let mut h = Harness::with_right_mtu(576);
    h.learn_hb();
    let seeds = [
        udp_through(64),
        eth(
            R0,
            HA,
            EtherType::IPV4,
            &ip4_fragmentable(
                &[1, 7, 7, 4, 0, 0, 0, 0, 148, 4, 0, 0],
                false,
                8,
                &[7; 1400],
            ),
        ),
        eth(
            R0,
            HA,
            EtherType::IPV4,
            &ip4(
                v4("198.18.1.2"),
                v4("198.18.1.1"),
                IpProtocol::ICMP,
                64,
                &echo4(1, 1, &[0; 16]),
            ),
        ),
        arp(
            ArpOperation::REQUEST,
            HA,
            v4("198.18.1.2"),
            EthernetAddress([0; 6]),
            v4("198.18.1.1"),
            EthernetAddress::BROADCAST,
        ),
        ip6_icmp(
            HA,
            R0,
            v6("2001:2:0:1::2"),
            v6("2001:2:0:1::1"),
            255,
            &Icmpv6Repr::NeighborSolicit {
                target_addr: v6("2001:2:0:1::1"),
                source_lladdr: Some(HA),
            },
        ),
        eth(
            R0,
            HA,
            EtherType::IPV6,
            &ip6(
                v6("2001:2:0:1::2"),
                v6("2001:2:0:100::9"),
                IpProtocol::UDP,
                64,
                &udp_bytes(8),
            ),
        ),
    ];
    for i in 0..30_000 {
        let mut f = seeds[i % seeds.len()].clone();
        for _ in 0..rng.gen_range(1..6) {
            let j = rng.gen_range(0..f.len());
            f[j] = rng.gen();
        }
        if rng.gen_bool(0.2) {
            f.truncate(rng.gen_range(0..f.len()));
        }
        let _ = h.rx(rng.gen_range(0..2), &f);
        if i % 1000 == 0 {
            h.now += Duration::from_millis(300);
            h.tick();
        }
    }
    h.now += Duration::from_secs(120);
    for _ in 0..10 {
        h.now += Duration::from_secs(2);
        h.tick();
    }
    assert!(
        h.c(Counter::FragmentsCreated) > 1000,
        "the fragmenter was exercised"
    );
    assert_eq!(h.pool.available(), 256, "every buffer came back");
}

// ---- IPv6 -------------------------------------------------------------------------------

#[test]
fn neighbor_solicitation_for_our_address_gets_a_solicited_advert() {
    let mut h = Harness::new();
    let ns = Icmpv6Repr::NeighborSolicit {
        target_addr: v6("2001:2:0:1::1"),
        source_lladdr: Some(HA),
    };
    let sn = v6("ff02::1:ff00:1");
    let f = ip6_icmp(
        HA,
        EthernetAddress::ipv6_multicast(sn),
        v6("2001:2:0:1::2"),
        sn,
        255,
        &ns,
    );
    let out = h.rx(0, &f);
    assert_eq!(out.len(), 1);
    let (port, o) = &out[0];
    assert_eq!(*port, 0);
    let e = EthernetFrame::new_checked(&o[..]).expect("eth");
    assert_eq!((e.dst_addr(), e.src_addr()), (HA, R0));
    let ip = Ipv6Packet::new_checked(e.payload()).expect("ipv6");
    assert_eq!(
        (ip.src_addr(), ip.dst_addr(), ip.hop_limit()),
        (v6("2001:2:0:1::1"), v6("2001:2:0:1::2"), 255)
    );
    let r = Icmpv6Repr::parse(
        &Icmpv6Packet::new_checked(ip.payload()).expect("icmp"),
        ip.src_addr(),
        ip.dst_addr(),
    )
    .expect("valid NA");
    assert_eq!(
        r,
        Icmpv6Repr::NeighborAdvert {
            router: true,
            solicited: true,
            override_: true,
            target_addr: v6("2001:2:0:1::1"),
            target_lladdr: Some(R0)
        }
    );
    assert_eq!(h.c(Counter::NdAdvertsSent), 1);
    // ND with a hop limit other than 255 came from off-link: dropped.
    let f = ip6_icmp(
        HA,
        EthernetAddress::ipv6_multicast(sn),
        v6("2001:2:0:1::2"),
        sn,
        254,
        &ns,
    );
    assert!(h.rx(0, &f).is_empty());
    assert_eq!(h.c(Counter::DropNdMalformed), 1);
    // NS for an address not ours.
    let other = Icmpv6Repr::NeighborSolicit {
        target_addr: v6("2001:2:0:1::99"),
        source_lladdr: Some(HA),
    };
    let f = ip6_icmp(
        HA,
        R0,
        v6("2001:2:0:1::2"),
        v6("2001:2:0:1::1"),
        255,
        &other,
    );
    assert!(h.rx(0, &f).is_empty());
    assert_eq!(h.c(Counter::DropNdNotForUs), 1);
}

#[test]
fn ipv6_forwarding_resolves_by_solicitation_and_decrements_the_hop_limit() {
    let mut h = Harness::new();
    let pkt = eth(
        R0,
        HA,
        EtherType::IPV6,
        &ip6(
            v6("2001:2:0:1::2"),
            v6("2001:2:0:100::9"),
            IpProtocol::UDP,
            9,
            &udp_bytes(8),
        ),
    );
    let out = h.rx(0, &pkt);
    assert_eq!(out.len(), 1, "a solicitation");
    let (port, ns) = &out[0];
    assert_eq!(*port, 1);
    let e = EthernetFrame::new_checked(&ns[..]).expect("eth");
    let group = v6("ff02::1:ff00:2");
    assert_eq!(e.dst_addr(), EthernetAddress::ipv6_multicast(group));
    let ip = Ipv6Packet::new_checked(e.payload()).expect("ipv6");
    assert_eq!((ip.dst_addr(), ip.hop_limit()), (group, 255));
    let r = Icmpv6Repr::parse(
        &Icmpv6Packet::new_checked(ip.payload()).expect("icmp"),
        ip.src_addr(),
        ip.dst_addr(),
    )
    .expect("valid NS");
    assert_eq!(
        r,
        Icmpv6Repr::NeighborSolicit {
            target_addr: v6("2001:2:0:2::2"),
            source_lladdr: Some(R1)
        }
    );
    // The advert releases the packet.
    let na = Icmpv6Repr::NeighborAdvert {
        router: false,
        solicited: true,
        override_: true,
        target_addr: v6("2001:2:0:2::2"),
        target_lladdr: Some(HB),
    };
    let out = h.rx(
        1,
        &ip6_icmp(HB, R1, v6("2001:2:0:2::2"), ip.src_addr(), 255, &na),
    );
    assert_eq!(out.len(), 1);
    let f = &out[0].1;
    assert_eq!((&f[0..6], &f[6..12]), (&HB.0[..], &R1.0[..]));
    assert_eq!(f[14 + 7], 8, "hop limit − 1");
    assert_eq!(&f[14 + 8..], &pkt[14 + 8..], "nothing else changed");
    assert_eq!(h.c(Counter::NdLearned), 1);
}

#[test]
fn ipv6_hop_limit_one_and_no_route_and_echo() {
    let mut h = Harness::new();
    h.learn_hb6();
    // Teach A's MAC too.
    let ns = Icmpv6Repr::NeighborSolicit {
        target_addr: v6("2001:2:0:1::1"),
        source_lladdr: Some(HA),
    };
    h.rx(
        0,
        &ip6_icmp(HA, R0, v6("2001:2:0:1::2"), v6("2001:2:0:1::1"), 255, &ns),
    );
    let inp = eth(
        R0,
        HA,
        EtherType::IPV6,
        &ip6(
            v6("2001:2:0:1::2"),
            v6("2001:2:0:100::9"),
            IpProtocol::UDP,
            1,
            &udp_bytes(8),
        ),
    );
    let out = h.rx(0, &inp);
    assert_eq!(out.len(), 1);
    let e = EthernetFrame::new_checked(&out[0].1[..]).expect("eth");
    assert_eq!(e.dst_addr(), HA);
    let ip = Ipv6Packet::new_checked(e.payload()).expect("ipv6");
    assert_eq!(ip.src_addr(), v6("2001:2:0:1::1"));
    match Icmpv6Repr::parse(
        &Icmpv6Packet::new_checked(ip.payload()).expect("icmp"),
        ip.src_addr(),
        ip.dst_addr(),
    )
    .expect("repr")
    {
        Icmpv6Repr::TimeExceeded {
            code: weft_wire::icmpv6::TimeExceededCode::HOP_LIMIT,
            invoking,
        } => assert_eq!(invoking, &inp[14..]),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.c(Counter::DropHopLimitExceeded), 1);
    // No route.
    let f = eth(
        R0,
        HA,
        EtherType::IPV6,
        &ip6(
            v6("2001:2:0:1::2"),
            v6("2001:db8::1"),
            IpProtocol::UDP,
            64,
            &udp_bytes(8),
        ),
    );
    let out = h.rx(0, &f);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].1[14 + 40], 1, "ICMPv6 destination unreachable");
    // Echo to the far port's address.
    let req = Icmpv6Repr::EchoRequest {
        ident: 5,
        seq_no: 6,
        data: b"weft",
    };
    let out = h.rx(
        0,
        &ip6_icmp(HA, R0, v6("2001:2:0:1::2"), v6("2001:2:0:2::1"), 64, &req),
    );
    assert_eq!(out.len(), 1);
    let e = EthernetFrame::new_checked(&out[0].1[..]).expect("eth");
    let ip = Ipv6Packet::new_checked(e.payload()).expect("ipv6");
    let r = Icmpv6Repr::parse(
        &Icmpv6Packet::new_checked(ip.payload()).expect("icmp"),
        ip.src_addr(),
        ip.dst_addr(),
    )
    .expect("repr");
    assert_eq!(
        r,
        Icmpv6Repr::EchoReply {
            ident: 5,
            seq_no: 6,
            data: b"weft"
        }
    );
    // Link-local never leaves its link.
    let f = eth(
        R0,
        HA,
        EtherType::IPV6,
        &ip6(
            v6("fe80::2"),
            v6("2001:2:0:100::9"),
            IpProtocol::UDP,
            64,
            &udp_bytes(8),
        ),
    );
    assert!(h.rx(0, &f).is_empty());
    assert_eq!(h.c(Counter::DropLinkLocalScope), 1);
    // Truncated and lying payload length.
    assert!(h
        .rx(0, &eth(R0, HA, EtherType::IPV6, &[0x60; 39]))
        .is_empty());
    assert_eq!(h.c(Counter::DropIpv6Truncated), 1);
    let mut lie = ip6(
        v6("2001:2:0:1::2"),
        v6("2001:2:0:100::9"),
        IpProtocol::UDP,
        64,
        &udp_bytes(8),
    );
    lie[4..6].copy_from_slice(&100u16.to_be_bytes());
    assert!(h.rx(0, &eth(R0, HA, EtherType::IPV6, &lie)).is_empty());
    assert_eq!(h.c(Counter::DropIpv6BadPayloadLength), 1);
}

#[test]
fn a_route_change_moves_traffic_at_once() {
    let mut h = Harness::new();
    h.learn_hb();
    h.rx(
        0,
        &arp(
            ArpOperation::REQUEST,
            HA,
            v4("198.18.1.2"),
            EthernetAddress([0; 6]),
            v4("198.18.1.1"),
            EthernetAddress::BROADCAST,
        ),
    );
    assert_eq!(h.rx(0, &udp_through(64))[0].0, 1);
    h.router
        .add_route(
            "198.19.0.0/16".parse().expect("prefix"),
            "198.18.1.2".parse().expect("ip"),
        )
        .expect("route");
    let out = h.rx(0, &udp_through(64));
    assert_eq!(out[0].0, 0);
    assert_eq!(&out[0].1[0..6], &HA.0);
    h.router
        .remove_route("198.19.0.0/16".parse().expect("prefix"));
    let out = h.rx(0, &udp_through(64));
    let (_, icmp) = parse_icmp4(&out[0].1);
    assert_eq!(icmp[0], 3, "now unreachable");
}

/// RFC 8200 §4: an unrecognized Next Header value to the router is answered with
/// parameter problem code 1 whose pointer is the offset of that value — byte 6 of the
/// IPv6 header, or the first byte of the extension header that holds it. UDP to the
/// router stays port unreachable (RFC 4443 §3.1).
#[test]
fn ipv6_unknown_next_header_to_the_router_gets_parameter_problem_code_1_at_the_field() {
    let mut h = Harness::new();
    // Teach A's MAC.
    let ns = Icmpv6Repr::NeighborSolicit {
        target_addr: v6("2001:2:0:1::1"),
        source_lladdr: Some(HA),
    };
    h.rx(
        0,
        &ip6_icmp(HA, R0, v6("2001:2:0:1::2"), v6("2001:2:0:1::1"), 255, &ns),
    );
    let unknown = IpProtocol(253);
    let mut dest_opts = vec![unknown.0, 0, 1, 4, 0, 0, 0, 0];
    dest_opts.extend_from_slice(&[0xab; 8]);
    let cases = [
        (IpProtocol(253), vec![0xab; 8], 6u32),
        (IpProtocol::DEST_OPTS, dest_opts, 40u32),
    ];
    for (i, (nh, payload, pointer)) in cases.into_iter().enumerate() {
        let inp = eth(
            R0,
            HA,
            EtherType::IPV6,
            &ip6(v6("2001:2:0:1::2"), v6("2001:2:0:1::1"), nh, 64, &payload),
        );
        let out = h.rx(0, &inp);
        assert_eq!(out.len(), 1, "case {i}");
        let e = EthernetFrame::new_checked(&out[0].1[..]).expect("eth");
        assert_eq!(e.dst_addr(), HA);
        let ip = Ipv6Packet::new_checked(e.payload()).expect("ipv6");
        assert_eq!(
            (ip.src_addr(), ip.dst_addr()),
            (v6("2001:2:0:1::1"), v6("2001:2:0:1::2"))
        );
        // The pointed-at byte is the unknown value.
        assert_eq!(inp[14 + pointer as usize], unknown.0);
        match Icmpv6Repr::parse(
            &Icmpv6Packet::new_checked(ip.payload()).expect("icmp"),
            ip.src_addr(),
            ip.dst_addr(),
        )
        .expect("repr")
        {
            Icmpv6Repr::ParamProblem {
                code,
                pointer: p,
                invoking,
            } => {
                assert_eq!(code, weft_wire::icmpv6::ParamProblemCode::NEXT_HEADER);
                assert_eq!(p, pointer, "case {i}");
                assert_eq!(invoking, &inp[14..]);
            }
            other => panic!("not a parameter problem: {other:?}"),
        }
    }
    assert_eq!(h.c(Counter::DropLocalProtocol), 2);
    assert_eq!(h.c(Counter::UnreachableSent), 2);
    // UDP: port unreachable, as before.
    let inp = eth(
        R0,
        HA,
        EtherType::IPV6,
        &ip6(
            v6("2001:2:0:1::2"),
            v6("2001:2:0:1::1"),
            IpProtocol::UDP,
            64,
            &udp_bytes(8),
        ),
    );
    let out = h.rx(0, &inp);
    assert_eq!(out.len(), 1);
    let e = EthernetFrame::new_checked(&out[0].1[..]).expect("eth");
    let ip = Ipv6Packet::new_checked(e.payload()).expect("ipv6");
    assert!(matches!(
        Icmpv6Repr::parse(
            &Icmpv6Packet::new_checked(ip.payload()).expect("icmp"),
            ip.src_addr(),
            ip.dst_addr(),
        ),
        Ok(Icmpv6Repr::DstUnreachable {
            code: weft_wire::icmpv6::UnreachableCode::PORT,
            ..
        })
    ));
    assert_eq!(h.c(Counter::DropLocalProtocol), 3);
}

/// Every change of the FIB moves `route_generation` (what the XDP fast path's sync
/// watches to skip rebuilding its maps), and a lookup does not.
#[test]
fn the_route_generation_moves_with_every_fib_change_and_only_then() {
    let h = Harness::new();
    let g0 = h.router.route_generation();
    let _ = h.router.fib();
    let _ = h.router.routes(10);
    assert_eq!(h.router.route_generation(), g0, "looking changes nothing");
    let prefix: weft_router::IpPrefix = "198.20.0.0/16".parse().expect("prefix");
    h.router
        .add_route(prefix, "198.18.2.2".parse().expect("ip"))
        .expect("route");
    let g1 = h.router.route_generation();
    assert_ne!(g1, g0, "an added route");
    assert!(h.router.remove_route(prefix).is_some());
    let g2 = h.router.route_generation();
    assert_ne!(g2, g1, "a removed route");
    let nh = h.router.routes(usize::MAX)[0].1;
    h.router.bulk_insert([(prefix, nh)]).expect("bulk");
    assert_ne!(h.router.route_generation(), g2, "a bulk insert");
}
