//! A router port of backend `shm` (opened from the TOML config like any port) to
//! another *process*: this test binary re-runs itself as the neighbour router on the
//! other end of the shm port, which introduces itself with ARP, sends frames through
//! the router to a host on a simulated port, and receives the frames the router
//! forwards to it. Every wait is bounded; the child is killed at its deadline.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use weft_link::shm::{mac_for_name, ShmFrameLink, ShmOptions};
use weft_link::sim;
use weft_link::{BufferPool, Link, PacketBuf};
use weft_router::config::{Backend, Config, SHM_MAX_FRAME};
use weft_router::{Architecture, Counter, Dataplane, Options, Router, RouterConfig};
use weft_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use weft_wire::ethernet::EthernetFrame;
use weft_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use weft_wire::{EtherType, EthernetAddress, IpProtocol};

const CHILD: &str = "WEFT_ROUTER_SHM_CHILD";
const H0: EthernetAddress = EthernetAddress([2, 0, 0, 0, 1, 2]);
const R0: EthernetAddress = EthernetAddress([2, 0, 0, 0, 1, 1]);
const H0_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 2);
const R1_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 1);
const NEIGHBOUR_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 2, 2);
/// Frames from the neighbour to h0, and from h0 through the neighbour.
const TO_H0: u16 = 200;
const VIA_NEIGHBOUR: u16 = 2000;

/// The router's and the neighbour's port names (from the parent's pid, handed to the
/// child in the environment).
fn names() -> (SocketAddr, SocketAddr) {
    let pid = std::env::var("PARENT_PID")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(std::process::id);
    let port = (pid % 50_000) as u16 + 10_000;
    (
        SocketAddr::new([127, 0, 5, 1].into(), port),
        SocketAddr::new([127, 0, 5, 2].into(), port),
    )
}

fn udp_frame(
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    seq: u16,
) -> Vec<u8> {
    let ip = Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        protocol: IpProtocol::UDP,
        payload_len: 8,
        ttl: 64,
        dscp_ecn: 0,
        ident: seq,
        dont_frag: true,
    };
    let mut f = vec![0u8; 14 + 28];
    let mut e = EthernetFrame::new_unchecked(&mut f[..]);
    e.set_dst_addr(dst_mac);
    e.set_src_addr(src_mac);
    e.set_tag_and_ethertype(None, EtherType::IPV4);
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut f[14..34]))
        .expect("ip");
    f
}

fn arp_request(mac: EthernetAddress, ip: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let r = ArpRepr {
        operation: ArpOperation::REQUEST,
        source_hardware_addr: mac,
        source_protocol_addr: ip,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: target,
    };
    let mut f = vec![0u8; 42];
    let mut e = EthernetFrame::new_unchecked(&mut f[..]);
    e.set_dst_addr(EthernetAddress::BROADCAST);
    e.set_src_addr(mac);
    e.set_tag_and_ethertype(None, EtherType::ARP);
    r.emit(&mut ArpPacket::new_unchecked(&mut f[14..]))
        .expect("arp");
    f
}

/// The IPv4 ident and TTL of a forwarded frame, checking its checksum and MACs.
fn forwarded(f: &[u8], dst_mac: EthernetAddress, src_mac: EthernetAddress) -> (u16, u8) {
    let e = EthernetFrame::new_checked(f).expect("ethernet");
    assert_eq!(e.dst_addr(), dst_mac);
    assert_eq!(e.src_addr(), src_mac);
    let ip = Ipv4Packet::new_checked(e.payload()).expect("ipv4");
    assert!(ip.verify_checksum());
    (ip.ident(), ip.ttl())
}

fn send(l: &mut impl Link, bytes: &[u8]) {
    let mut b: PacketBuf = l.pool().alloc().expect("buffer");
    assert!(b.copy_from(bytes));
    let mut v = vec![b];
    let deadline = Instant::now() + Duration::from_secs(5);
    while !v.is_empty() {
        assert!(Instant::now() < deadline, "send stuck");
        l.send_burst(&mut v).expect("send");
    }
}

#[test]
#[ignore = "child role of a_router_forwards_both_ways_over_an_shm_port_to_another_process"]
fn child_neighbour() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let (router_port, me) = names();
    let my_mac = EthernetAddress([2, 0, 0, 0, 2, 2]);
    let mut l = ShmFrameLink::bind(
        me,
        router_port,
        my_mac.0,
        ShmOptions {
            slot_size: SHM_MAX_FRAME,
            ..ShmOptions::default()
        },
    )
    .expect("bind");
    let deadline = Instant::now() + Duration::from_secs(30);
    // Introduce ourselves until the router answers (it may still be starting).
    let mut router_mac = None;
    let mut rx = Vec::new();
    while router_mac.is_none() {
        assert!(
            Instant::now() < deadline,
            "no ARP reply: {:?} {:?}",
            l.stats(),
            l.shm_stats()
        );
        send(&mut l, &arp_request(my_mac, NEIGHBOUR_IP, R1_IP));
        l.wait(Duration::from_millis(50)).expect("wait");
        rx.clear();
        l.recv_burst(&mut rx, 32).expect("recv");
        for f in &rx {
            let e = EthernetFrame::new_checked(&f[..]).expect("eth");
            if e.ethertype() == EtherType::ARP {
                let a = ArpRepr::parse(&ArpPacket::new_checked(e.payload()).expect("arp"))
                    .expect("arp");
                if a.operation == ArpOperation::REPLY {
                    router_mac = Some(a.source_hardware_addr);
                }
            }
        }
    }
    let router_mac = router_mac.expect("mac");
    assert_eq!(router_mac.0, mac_for_name(router_port), "the port's MAC");
    for seq in 0..TO_H0 {
        send(
            &mut l,
            &udp_frame(my_mac, router_mac, NEIGHBOUR_IP, H0_IP, seq),
        );
    }
    let mut next = 0u16;
    while next < VIA_NEIGHBOUR {
        assert!(Instant::now() < deadline, "only {next} frames arrived");
        rx.clear();
        if l.recv_burst(&mut rx, 64).expect("recv") == 0 {
            l.wait(Duration::from_millis(20)).expect("wait");
        }
        for f in &rx {
            if EthernetFrame::new_checked(&f[..]).expect("eth").ethertype() != EtherType::IPV4 {
                continue;
            }
            let (ident, ttl) = forwarded(f, my_mac, router_mac);
            assert_eq!(ident, next, "in order");
            assert_eq!(ttl, 63);
            next += 1;
        }
    }
}

fn finish(mut c: Child, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = c.try_wait().expect("try_wait") {
            return s.success();
        }
        if Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_router_forwards_both_ways_over_an_shm_port_to_another_process() {
    let (router_port, child_port) = names();
    let cfg = Config::parse(&format!(
        r#"
[[port]]
name = "hosts"
interface = "sim0"
addresses = ["198.18.1.1/24"]
[[port]]
name = "neighbour"
backend = "shm"
interface = "{router_port}"
peer = "{child_port}"
addresses = ["198.18.2.1/24"]
[[route]]
prefix = "198.19.0.0/16"
via = "198.18.2.2"
"#
    ))
    .expect("config");
    let backend = cfg.ports[1].backend().expect("backend");
    assert_eq!(backend, Backend::Shm { peer: child_port });
    let pool = BufferPool::new(8192, 2048);
    let (r0, mut h0) = sim::pair(&pool, ("r0", R0.0), ("h0", H0.0), 4096);
    let shm = backend
        .open(&cfg.ports[1].interface, pool.clone())
        .expect("open shm port");
    let shm_mac = shm.info().mac;
    assert_eq!(shm.info().max_frame, SHM_MAX_FRAME);
    let specs = cfg
        .port_specs(&[(R0.0, 1514), (shm_mac, shm.info().max_frame)])
        .expect("specs");
    let router = Router::new(specs, RouterConfig::default());
    cfg.install_routes(&router, std::path::Path::new("."))
        .expect("routes");
    let links: Vec<Box<dyn Link>> = vec![Box::new(r0), shm];
    let dp = Dataplane::start(
        router,
        links,
        Options {
            arch: Architecture::Push,
            ..Options::default()
        },
    )
    .expect("start");
    assert!(h0.send_bytes(&arp_request(H0, H0_IP, Ipv4Addr::new(198, 18, 1, 1))));
    assert_eq!(h0.recv_bytes_timeout(1, Duration::from_secs(5)).len(), 1);

    let child = Command::new(std::env::current_exe().expect("exe"))
        .args([
            "--exact",
            "child_neighbour",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .env("PARENT_PID", std::process::id().to_string())
        .spawn()
        .expect("spawn");
    // The neighbour's frames reach h0 (which also tells us it is up).
    let got = h0.recv_bytes_timeout(usize::from(TO_H0), Duration::from_secs(30));
    let idents: Vec<u16> = got
        .iter()
        .map(|f| {
            let (ident, ttl) = forwarded(f, H0, R0);
            assert_eq!(ttl, 63);
            ident
        })
        .collect();
    assert_eq!(idents, (0..TO_H0).collect::<Vec<_>>(), "all, in order");
    // And h0's frames for 198.19/16 go out over shm to the neighbour, paced so no
    // ring in between overflows.
    for seq in 0..VIA_NEIGHBOUR {
        let f = udp_frame(H0, R0, H0_IP, Ipv4Addr::new(198, 19, 7, 7), seq);
        assert!(h0.send_bytes(&f));
        if seq % 50 == 49 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let ok = finish(child, Duration::from_secs(40));
    let router = std::sync::Arc::clone(dp.router());
    dp.stop().expect("clean stop");
    assert!(ok, "the neighbour process failed (its output is above)");
    assert_eq!(
        router.counter(Counter::Forwarded),
        u64::from(TO_H0 + VIA_NEIGHBOUR)
    );
}
