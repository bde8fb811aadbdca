//! `weft router bench --cluster --latency`: one-way latency as the paper measures it,
//! with symmetric timestamps. Node A writes t1 into a probe just before it posts it;
//! node B takes t2 just after its receive returns and t3 just before it posts the
//! probe back; A takes t4 just after its receive returns. The one-way latency is
//! `((t4 − t1) − (t3 − t2)) / 2` ([`one_way_ns`]): t1/t4 are A's clock and t2/t3
//! B's, so any offset between the two clocks cancels (here each side counts from its
//! own origin, a different `Instant`, so the cancellation is exercised, not assumed).
//! Low load: one probe in flight, and a pause between probes.
//!
//! Two paths, one row each per (interconnect, size, batch):
//! - `interconnect`: the paper's Fig. 10. The probe is one SEND of `batch` packets of
//!   `size` bytes, one SGE per packet, over a weft-verbs UC queue pair; B answers
//!   with the same message. What a full batch costs in latency.
//! - `router`: through two real cluster nodes (`Dataplane::start_cluster` over the
//!   real `VerbsFabric`) with `batch` in the plan: a host behind node 1's port sends
//!   a UDP probe to a host behind node 2's port, which answers. One way is host →
//!   node 1 → interconnect → node 2 → host: the router's gatherer decides when the
//!   probe leaves (full batch, end of the ingress burst, delay bound). This is the
//!   row the "at low load batching adds ≤ 10 % to p50" is about.
#![forbid(unsafe_code)]

use anyhow::{bail, Context as _};
use serde::Serialize;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_link::sim::{self, SimLink};
use weft_link::{BufferPool, Link, PacketBuf};
use weft_router::cluster::batch::{split, PacketHeader, HEADER_LEN};
use weft_router::cluster::config::{Balance, ClusterPlan, Interconnect as Kind, Transport};
use weft_router::cluster::fabric::VerbsFabric;
use weft_router::cluster::node::Interconnect;
use weft_router::{Dataplane, Options, PortSpec, Router, RouterConfig};
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, CompletionQueue, Context, DeviceConfig, LinkKind, QpInitAttr, QpType, RecvWr, SendWr,
    WcStatus, WrOp,
};
use weft_wire::ethernet::EthernetFrame;
use weft_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use weft_wire::{EtherType, EthernetAddress, IpProtocol};

/// Bytes per packet slot (header and frame).
const SLOT: usize = 2048;
/// Where in a frame the timestamps sit: after Ethernet, IPv4 and UDP headers.
const STAMPS: usize = 42;
/// A probe that has not come back in this time is lost (UC drops, a busy machine).
const PROBE_TIMEOUT: Duration = Duration::from_millis(200);

/// Sets the answering thread's stop flag when dropped, so an early return (an error
/// on A's side) does not leave the other side polling.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// The paper's one-way latency from symmetric timestamps: t1 (A sends) and t4 (A
/// receives) on A's clock, t2 (B receives) and t3 (B sends) on B's. `None` when the
/// stamps are inconsistent (B's turnaround longer than A's round trip).
pub fn one_way_ns(t1: u64, t2: u64, t3: u64, t4: u64) -> Option<u64> {
    let round = t4.checked_sub(t1)?;
    let turnaround = t3.checked_sub(t2)?;
    round.checked_sub(turnaround).map(|d| d / 2)
}

/// One configuration's latency.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyRow {
    /// Always "latency" (tells these rows from throughput rows).
    pub kind: &'static str,
    /// `interconnect` (one SEND of a full batch) or `router` (through two nodes).
    pub path: &'static str,
    /// udp or shm.
    pub interconnect: &'static str,
    /// Packet size in bytes.
    pub size: usize,
    /// Packets per SEND (interconnect: in every probe; router: the plan's batch).
    pub batch: usize,
    /// Median one-way latency, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Probes answered.
    pub probes: usize,
    /// Probes lost (not back within 200 ms).
    pub lost: usize,
    /// Which round (with `--repeat`).
    pub round: usize,
    /// Router path: packets per interconnect message the two nodes sent (their
    /// `show interconnect` counters) — 1.0 says every probe left alone, not waiting
    /// for a batch to fill, whatever the plan's batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets_per_message: Option<f64>,
}

fn percentile(sorted_ns: &[u64], q: f64) -> f64 {
    if sorted_ns.is_empty() {
        return f64::NAN;
    }
    sorted_ns[((sorted_ns.len() - 1) as f64 * q) as usize] as f64 / 1e3
}

/// Nanoseconds since `origin`: one node's clock.
fn clock(origin: Instant) -> u64 {
    origin.elapsed().as_nanos() as u64
}

fn put(buf: &mut [u8], at: usize, v: u64) {
    if let Some(b) = buf.get_mut(at..at + 8) {
        b.copy_from_slice(&v.to_le_bytes());
    }
}

fn get(buf: &[u8], at: usize) -> u64 {
    buf.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// The interconnect path: full-batch probes over one UC queue pair each way.
pub fn interconnect(
    link: LinkKind,
    size: usize,
    batch: usize,
    secs: Duration,
    gap: Duration,
) -> anyhow::Result<LatencyRow> {
    if !(64..=SLOT - HEADER_LEN).contains(&size) {
        bail!("--size {size} is not in 64..={}", SLOT - HEADER_LEN);
    }
    if !(1..=32).contains(&batch) {
        bail!("--batch {batch} is not in 1..=32");
    }
    let msg = batch * SLOT;
    let a = Context::open_with(DeviceConfig::local(link)).context("device A")?;
    let b = Context::open_with(DeviceConfig::local(link)).context("device B")?;
    let (pd_a, pd_b) = (a.alloc_pd(), b.alloc_pd());
    let mut cq_a = CompletionQueue::new(&a, 64, None);
    let mut cq_b = CompletionQueue::new(&b, 64, None);
    let attr = QpInitAttr {
        max_send_wr: 8,
        max_recv_wr: 8,
        ..QpInitAttr::new(QpType::Uc)
    };
    let mut qa = pd_a.create_qp(&cq_a, &cq_a, None, attr)?;
    let mut qb = pd_b.create_qp(&cq_b, &cq_b, None, attr)?;
    // Each side: its packets (one slot each) and one receive buffer per posted receive.
    let send_a = pd_a.alloc_mr(msg, Access::LOCAL_WRITE);
    let recv_a = pd_a.alloc_mr(4 * msg, Access::LOCAL_WRITE);
    let send_b = pd_b.alloc_mr(msg, Access::LOCAL_WRITE);
    let recv_b = pd_b.alloc_mr(4 * msg, Access::LOCAL_WRITE);
    let mut frame = vec![0u8; size];
    frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    for k in 0..batch {
        let h = PacketHeader {
            hops: 0,
            len: size as u16,
            ingress_port: 0,
            origin: 1,
            bucket: k as u16,
            seq: k as u16,
        };
        send_a.write(k * SLOT, &h.encode())?;
        send_a.write(k * SLOT + HEADER_LEN, &frame)?;
    }
    let listener = Listener::bind(&b, SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let at = listener.local_addr()?;
    let accept = std::thread::spawn(
        move || -> anyhow::Result<(weft_verbs::QueuePair, cm::Connection)> {
            let req = listener.get_request(Duration::from_secs(10))?;
            let c = req.accept(&mut qb, &ConnParam::default())?;
            Ok((qb, c))
        },
    );
    let _ca = cm::connect(&mut qa, at, &ConnParam::default())?;
    let (mut qb, _cb) = accept
        .join()
        .map_err(|_| anyhow::anyhow!("accept thread panicked"))??;
    qa.post_recv((0..4).map(|i| RecvWr::new(i, recv_a.sge(i as usize * msg, msg as u32))))?;
    qb.post_recv((0..4).map(|i| RecvWr::new(i, recv_b.sge(i as usize * msg, msg as u32))))?;
    let sges = |mr: &weft_verbs::MemoryRegion| -> Vec<weft_transport::Sge> {
        (0..batch)
            .map(|k| mr.sge(k * SLOT, (HEADER_LEN + size) as u32))
            .collect()
    };
    // Where a stamp sits (t1, t2, t3, probe number) in packet 0's frame, after its
    // Ethernet header: the same offset in a slot as sent and in the message as
    // received (packet 0 first).
    let stamp_at = |i: usize| HEADER_LEN + 14 + 8 * i;

    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_drop = StopOnDrop(Arc::clone(&stop));
    // B: answer every probe with the same message, t2 and t3 written into it.
    let answer = {
        let stop = Arc::clone(&stop);
        let origin_b = Instant::now() - Duration::from_secs(1000);
        let sg = sges(&send_b);
        std::thread::spawn(move || -> anyhow::Result<u64> {
            let mut out = Vec::with_capacity(8);
            let mut buf = vec![0u8; msg];
            let mut bad = 0u64;
            let deadline = Instant::now() + Duration::from_secs(600);
            while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
                out.clear();
                if cq_b.poll(&mut out, 8) == 0 {
                    std::thread::yield_now();
                    continue;
                }
                let t2 = clock(origin_b);
                for c in &out {
                    if c.status != WcStatus::Success {
                        bail!("completion with {:?}", c.status);
                    }
                    if !c.opcode.is_recv() {
                        continue;
                    }
                    let i = c.wr_id as usize % 4;
                    let len = (c.byte_len as usize).min(msg);
                    recv_b.read(i * msg, &mut buf[..len])?;
                    qb.post_recv([RecvWr::new(i as u64, recv_b.sge(i * msg, msg as u32))])?;
                    // The receiver splits the message as the cluster does.
                    let mut n = 0;
                    for p in split(&buf[..len]) {
                        match p {
                            Ok(_) => n += 1,
                            Err(_) => bad += 1,
                        }
                    }
                    if n != batch {
                        bad += 1;
                        continue;
                    }
                    // Back to back on arrival; back into slots to send.
                    for k in 0..batch {
                        let from = k * (HEADER_LEN + size);
                        send_b.write(k * SLOT, &buf[from..from + HEADER_LEN + size])?;
                    }
                    let mut s = [0u8; 16];
                    put(&mut s, 0, t2);
                    let t3 = clock(origin_b);
                    put(&mut s, 8, t3);
                    send_b.write(stamp_at(1), &s)?;
                    qb.post_send([SendWr::new(0, WrOp::Send { imm: None }, sg.clone())])?;
                }
            }
            Ok(bad)
        })
    };

    let origin_a = Instant::now();
    let sg = sges(&send_a);
    let mut lat = Vec::new();
    let mut lost = 0usize;
    let mut out = Vec::with_capacity(8);
    let mut buf = vec![0u8; msg];
    let end = Instant::now() + secs;
    let mut probe = 0u64;
    while Instant::now() < end && lat.len() < 100_000 {
        probe += 1;
        send_a.write(stamp_at(3), &probe.to_le_bytes())?;
        let t1 = clock(origin_a);
        send_a.write(stamp_at(0), &t1.to_le_bytes())?;
        qa.post_send([SendWr::new(probe, WrOp::Send { imm: None }, sg.clone())])?;
        let give_up = Instant::now() + PROBE_TIMEOUT;
        let mut answered = false;
        while !answered && Instant::now() < give_up {
            out.clear();
            if cq_a.poll(&mut out, 8) == 0 {
                std::thread::yield_now();
                continue;
            }
            let t4 = clock(origin_a);
            for c in &out {
                if c.status != WcStatus::Success {
                    bail!("completion with {:?}", c.status);
                }
                if !c.opcode.is_recv() {
                    continue;
                }
                let i = c.wr_id as usize % 4;
                let len = (c.byte_len as usize).min(msg);
                recv_a.read(i * msg, &mut buf[..len])?;
                qa.post_recv([RecvWr::new(i as u64, recv_a.sge(i * msg, msg as u32))])?;
                // A late answer to an earlier (lost) probe is not this one.
                if get(&buf, stamp_at(3)) != probe {
                    continue;
                }
                let (t1, t2, t3) = (
                    get(&buf, stamp_at(0)),
                    get(&buf, stamp_at(1)),
                    get(&buf, stamp_at(2)),
                );
                if let Some(d) = one_way_ns(t1, t2, t3, t4) {
                    lat.push(d);
                }
                answered = true;
            }
        }
        if !answered {
            lost += 1;
        }
        if !gap.is_zero() {
            std::thread::sleep(gap);
        }
    }
    stop.store(true, Ordering::Release);
    let bad = answer
        .join()
        .map_err(|_| anyhow::anyhow!("answering thread panicked"))??;
    if bad > 0 {
        bail!("{bad} probes arrived split wrong");
    }
    lat.sort_unstable();
    Ok(LatencyRow {
        kind: "latency",
        path: "interconnect",
        interconnect: link.name(),
        size,
        batch,
        p50_us: percentile(&lat, 0.5),
        p99_us: percentile(&lat, 0.99),
        probes: lat.len(),
        lost,
        round: 0,
        packets_per_message: None,
    })
}

fn rmac(i: usize) -> EthernetAddress {
    EthernetAddress([2, 0, 0, 0x77, i as u8 + 1, 1])
}
fn hmac(i: usize) -> EthernetAddress {
    EthernetAddress([2, 0, 0, 0x77, i as u8 + 1, 2])
}
fn host_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, i as u8 + 1, 2)
}

/// A UDP frame of `size` bytes from host `from` to host `to`, through the router.
fn probe_frame(from: usize, to: usize, size: usize) -> Vec<u8> {
    let ip = Ipv4Repr {
        src_addr: host_ip(from),
        dst_addr: host_ip(to),
        protocol: IpProtocol::UDP,
        payload_len: size - 34,
        ttl: 64,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: true,
    };
    let mut f = vec![0u8; size];
    let mut e = EthernetFrame::new_unchecked(&mut f[..]);
    e.set_dst_addr(rmac(from));
    e.set_src_addr(hmac(from));
    e.set_tag_and_ethertype(None, EtherType::IPV4);
    let _ = ip.emit(&mut Ipv4Packet::new_unchecked(&mut f[14..34]));
    f[34..36].copy_from_slice(&7000u16.to_be_bytes());
    f[36..38].copy_from_slice(&7001u16.to_be_bytes());
    f[38..40].copy_from_slice(&((size - 34) as u16).to_be_bytes());
    f
}

/// A gratuitous ARP request from host `i` for its port's address, so the owner
/// learns the host's MAC.
fn arp_request(i: usize) -> Vec<u8> {
    use weft_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
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
    let _ = r.emit(&mut ArpPacket::new_unchecked(&mut f[14..]));
    f
}

/// Receive one frame on a host link, spinning (then yielding) until `until`.
fn recv_one(h: &mut SimLink, until: Instant, v: &mut Vec<PacketBuf>) -> Option<PacketBuf> {
    loop {
        if v.is_empty() {
            let _ = h.recv_burst(v, 8);
        }
        if !v.is_empty() {
            return Some(v.remove(0));
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::yield_now();
    }
}

/// Running nodes, stopped when dropped (also on an early return).
struct Nodes(Vec<Dataplane>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for d in self.0.drain(..) {
            let _ = d.stop();
        }
    }
}

/// Two cluster nodes over the real interconnect, one host behind each.
struct TwoNodes {
    hosts: [SimLink; 2],
    nodes: Nodes,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn two_nodes(kind: Kind, batch: usize) -> anyhow::Result<TwoNodes> {
    let pool = BufferPool::new(4096, 2048);
    let specs: Vec<PortSpec> = (0..2)
        .map(|i| PortSpec {
            name: format!("p{i}"),
            mac: rmac(i),
            v4: vec![(Ipv4Addr::new(198, 18, i as u8 + 1, 1), 24)],
            v6: vec![],
            max_frame: 1514,
        })
        .collect();
    // Loopback addresses of their own (127/8 is all loopback), one per process run.
    let net = (std::process::id() % 200) as u8 + 20;
    let nodes_at: Vec<(u8, IpAddr)> = (1..=2u8)
        .map(|i| (i, IpAddr::V4(Ipv4Addr::new(127, 77, net, i))))
        .collect();
    let cm_port = free_port()?;
    let mut hosts = Vec::new();
    let mut dps = Nodes(Vec::new());
    for me in 1..=2u8 {
        let i = usize::from(me - 1);
        let (r, h) = sim::pair(
            &pool,
            (&format!("r{i}"), rmac(i).0),
            (&format!("h{i}"), hmac(i).0),
            4096,
        );
        hosts.push(h);
        let mut links: Vec<Option<Box<dyn Link>>> = vec![None, None];
        links[i] = Some(Box::new(r));
        let remote = (0..2).map(|p| p != i).collect();
        let router = Router::with_remote_ports(specs.clone(), RouterConfig::default(), remote);
        let plan = ClusterPlan {
            me,
            nodes: nodes_at.clone(),
            owner: vec![1, 2],
            interconnect: kind,
            batch,
            balance: Balance::Direct,
            transport: Transport::Uc,
            delay: Duration::from_micros(50),
            cm_port,
        };
        let fabric = VerbsFabric::start(&plan, &pool).context("interconnect")?;
        let ic = Interconnect::new(Box::new(fabric), plan, pool.clone());
        dps.0.push(Dataplane::start_cluster(
            router,
            links,
            ic,
            Options::default(),
        )?);
    }
    let [h0, h1]: [SimLink; 2] = hosts.try_into().map_err(|_| anyhow::anyhow!("two hosts"))?;
    let mut c = TwoNodes {
        hosts: [h0, h1],
        nodes: dps,
    };
    for (i, h) in c.hosts.iter_mut().enumerate() {
        if !h.send_bytes(&arp_request(i)) {
            bail!("host {i}: ARP not sent");
        }
        if h.recv_bytes_timeout(1, Duration::from_secs(5)).is_empty() {
            bail!("host {i}: no ARP reply from its port's owner");
        }
    }
    Ok(c)
}

/// The router path: probes from host 0 (behind node 1) to host 1 (behind node 2) and
/// back, `batch` packets per SEND in the plan.
pub fn router(
    link: LinkKind,
    size: usize,
    batch: usize,
    secs: Duration,
    gap: Duration,
) -> anyhow::Result<LatencyRow> {
    // Four stamps after the UDP header.
    if !(STAMPS + 32..=1514).contains(&size) {
        bail!(
            "--size {size} is not in {}..=1514 on the router path",
            STAMPS + 32
        );
    }
    if !(1..=32).contains(&batch) {
        bail!("--batch {batch} is not in 1..=32");
    }
    let kind = match link {
        LinkKind::Udp => Kind::Udp,
        LinkKind::Shm => Kind::Shm,
    };
    let TwoNodes {
        hosts: [mut h0, mut h1],
        mut nodes,
    } = two_nodes(kind, batch)?;
    let stop = Arc::new(AtomicBool::new(false));
    let _stop_on_drop = StopOnDrop(Arc::clone(&stop));
    // Host 1 answers every probe, t2 and t3 written into it.
    let answer = {
        let stop = Arc::clone(&stop);
        let origin_b = Instant::now() - Duration::from_secs(1000);
        let reply = probe_frame(1, 0, size);
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let mut f = reply;
            let deadline = Instant::now() + Duration::from_secs(600);
            while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
                let Some(p) = recv_one(&mut h1, Instant::now() + Duration::from_millis(20), &mut v)
                else {
                    continue;
                };
                let t2 = clock(origin_b);
                if p.len() != size {
                    continue;
                }
                f[STAMPS..STAMPS + 8].copy_from_slice(&p[STAMPS..STAMPS + 8]);
                f[STAMPS + 24..STAMPS + 32].copy_from_slice(&p[STAMPS + 24..STAMPS + 32]);
                put(&mut f, STAMPS + 8, t2);
                drop(p);
                let t3 = clock(origin_b);
                put(&mut f, STAMPS + 16, t3);
                let _ = h1.send_bytes(&f);
            }
        })
    };
    let origin_a = Instant::now();
    let mut f = probe_frame(0, 1, size);
    let mut v = Vec::new();
    let mut lat = Vec::new();
    let mut lost = 0usize;
    // Warm-up: until a probe comes back (the nodes connect in the background).
    let warm_until = Instant::now() + Duration::from_secs(10);
    let mut measuring = false;
    let end = Instant::now() + secs;
    let mut probe = 0u64;
    loop {
        let now = Instant::now();
        if measuring && (now >= end || lat.len() >= 100_000) {
            break;
        }
        if !measuring && now >= warm_until {
            stop.store(true, Ordering::Release);
            let _ = answer.join();
            bail!(
                "{} over {}: no probe came back in 10 s",
                "router",
                link.name()
            );
        }
        probe += 1;
        put(&mut f, STAMPS + 24, probe);
        let t1 = clock(origin_a);
        put(&mut f, STAMPS, t1);
        if !h0.send_bytes(&f) {
            bail!("host 0 could not send");
        }
        let give_up = Instant::now() + PROBE_TIMEOUT;
        let mut answered = false;
        while let Some(p) = recv_one(&mut h0, give_up, &mut v) {
            let t4 = clock(origin_a);
            if p.len() != size || get(&p, STAMPS + 24) != probe {
                continue;
            }
            answered = true;
            if measuring {
                let (t1, t2, t3) = (get(&p, STAMPS), get(&p, STAMPS + 8), get(&p, STAMPS + 16));
                if let Some(d) = one_way_ns(t1, t2, t3, t4) {
                    lat.push(d);
                }
            }
            break;
        }
        if answered && !measuring {
            // Ten more unmeasured probes, then measure.
            if probe >= 10 {
                measuring = true;
            }
        } else if !answered && measuring {
            lost += 1;
        }
        std::thread::sleep(gap);
    }
    stop.store(true, Ordering::Release);
    let _ = answer.join();
    // The interconnect threads publish their counters every 100 ms.
    std::thread::sleep(Duration::from_millis(250));
    let (mut packets, mut messages) = (0u64, 0u64);
    for d in &nodes.0 {
        for (_, rows) in d.router().interconnect_stats() {
            for (k, v) in rows {
                match k {
                    "tx_packets" => packets += v,
                    "tx_messages" => messages += v,
                    _ => {}
                }
            }
        }
    }
    for d in nodes.0.drain(..) {
        d.stop()?;
    }
    lat.sort_unstable();
    Ok(LatencyRow {
        kind: "latency",
        path: "router",
        interconnect: link.name(),
        size,
        batch,
        p50_us: percentile(&lat, 0.5),
        p99_us: percentile(&lat, 0.99),
        probes: lat.len(),
        lost,
        round: 0,
        packets_per_message: (messages > 0).then(|| packets as f64 / messages as f64),
    })
}

/// Every combination, both paths, `repeat` rounds with the batch order reversed
/// every other round; one row (or JSON line) each.
#[allow(clippy::too_many_arguments)]
pub fn run(
    links: &[LinkKind],
    sizes: &[usize],
    batches: &[usize],
    paths: &[&str],
    secs: Duration,
    gap: Duration,
    repeat: usize,
    json: bool,
) -> anyhow::Result<()> {
    for round in 0..repeat.max(1) {
        for &link in links {
            for &size in sizes {
                let mut bs = batches.to_vec();
                if round % 2 == 1 {
                    bs.reverse();
                }
                for &path in paths {
                    for &batch in &bs {
                        let mut r = match path {
                            "interconnect" => interconnect(link, size, batch, secs, gap)?,
                            "router" => router(link, size, batch, secs, gap)?,
                            other => bail!("unknown latency path {other:?}"),
                        };
                        r.round = round;
                        if json {
                            println!("{}", serde_json::to_string(&r)?);
                        } else {
                            println!(
                                "{:12} {:3} {:5} B batch {:2} one-way p50 {:8.2} us p99 {:8.2} us ({} probes, {} lost{})",
                                r.path, r.interconnect, r.size, r.batch, r.p50_us, r.p99_us, r.probes, r.lost,
                                r.packets_per_message.map_or(String::new(), |p| format!(", {p:.2} packets per message"))
                            );
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_formula_cancels_the_clock_offset() {
        // 5 µs each way, 3 µs turnaround at B; B's clock is 1 s ahead of A's.
        let off = 1_000_000_000;
        let (t1, t2, t3, t4) = (100, 5_100 + off, 8_100 + off, 13_100);
        assert_eq!(one_way_ns(t1, t2, t3, t4), Some(5_000));
        // And behind: the same answer.
        assert_eq!(
            one_way_ns(t1 + 2 * off, t2 - off, t3 - off, t4 + 2 * off),
            Some(5_000)
        );
        // Asymmetric paths: the formula gives the mean of the two directions.
        assert_eq!(one_way_ns(0, 7_000, 7_000, 10_000), Some(5_000));
        // Inconsistent stamps are refused, not wrapped.
        assert_eq!(one_way_ns(0, 10, 15, 5), Some(0));
        assert_eq!(one_way_ns(10, 0, 50, 20), None);
        assert_eq!(one_way_ns(10, 5, 0, 20), None);
        assert_eq!(one_way_ns(20, 0, 0, 10), None);
    }

    #[test]
    fn interconnect_probes_come_back_over_shm() {
        let r = interconnect(
            LinkKind::Shm,
            128,
            4,
            Duration::from_millis(200),
            Duration::ZERO,
        )
        .expect("run");
        assert!(r.probes > 0, "{r:?}");
        assert!(r.p50_us > 0.0 && r.p50_us <= r.p99_us, "{r:?}");
        assert!(interconnect(LinkKind::Shm, 64, 33, Duration::ZERO, Duration::ZERO).is_err());
    }

    #[test]
    fn router_probes_cross_two_real_nodes_over_shm() {
        let r = router(
            LinkKind::Shm,
            128,
            8,
            Duration::from_millis(300),
            Duration::from_micros(200),
        )
        .expect("run");
        assert!(r.probes > 0, "{r:?}");
        assert!(r.p50_us > 0.0 && r.p50_us <= r.p99_us, "{r:?}");
        // One probe in flight: every message carried one packet (the gatherer sent it
        // at the end of the burst, not when 8 had gathered).
        assert_eq!(r.packets_per_message, Some(1.0), "{r:?}");
    }
}
