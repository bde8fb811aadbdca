//! `weft router bench --cluster`: the interconnect of the scaled-out router measured
//! as the paper measures it (its Fig. "throughput per packet size and batch"): one
//! node sends packets to another over a weft-verbs UC queue pair, in one of three
//! modes, and the receiver splits the messages with the cluster's own splitter
//! (`weft_router::cluster::batch`).
//!
//! - `sge`: up to `batch` packets per SEND, one SGE per packet, pointing straight at
//!   the packet's buffer (header and frame in registered memory; no copy);
//! - `memcpy`: the same packets copied into one staging buffer, one SGE;
//! - `unbatched`: one SEND per packet;
//! - `router`: the router's own interconnect path — two real `VerbsFabric`s (the
//!   fabric a cluster node runs), packets in buffers of the pool the sending fabric
//!   registered, each header prepended in the buffer's headroom, up to `batch` per
//!   `Fabric::send`: the zero-copy gather, one SGE per buffer; the receiver polls its
//!   fabric, splits each message and copies each frame into a packet buffer, as a
//!   node's interconnect thread does;
//! - `router-copy`: the same, but the packets sit in a pool the fabric did not
//!   register, so it copies each one into a registered buffer before the SEND —
//!   what every packet cost before the pool was registered (the copy into a send
//!   slot), measured in the same binary.
//!
//! In `sge`/`memcpy`/`unbatched` the packets are built once and sit in registered
//! memory; in the two router modes each message's packets are written into freshly
//! allocated pool buffers first (what a port's receive does), in both modes alike.
//!
//! Both nodes run in this process, each with its own device (and engine thread), so
//! one clock serves both ends: a message's latency is the receiver's completion time
//! minus the time the sender posted it, taken under the offered load (the sender keeps
//! 32 messages in flight). `mpps` counts packets that arrived (UC drops a message
//! that finds no receive posted); `gbps` is `mpps × size × 8` (headers included, as
//! the paper counts).
#![forbid(unsafe_code)]

use anyhow::{bail, Context as _};
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_link::BufferPool;
use weft_router::cluster::batch::{prepend_header, split, PacketHeader, HEADER_LEN};
use weft_router::cluster::config::{Balance, ClusterPlan, Interconnect as Kind, Transport};
use weft_router::cluster::fabric::{Fabric, VerbsFabric};
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, CompletionQueue, Context, DeviceConfig, LinkKind, QpInitAttr, QpType, RecvWr, SendWr,
    WcStatus, WrOp,
};

/// Bytes per packet buffer (header and frame).
const SLOT: usize = 2048;
/// Packet buffers the sender cycles through.
const PACKETS: usize = 4096;
/// Messages in flight.
const WINDOW: usize = 32;
/// Receives posted.
const RECVS: usize = 256;

/// How packets are put into messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// One SGE per packet, straight from its buffer.
    Sge,
    /// Copied into one buffer, one SGE.
    Memcpy,
    /// One SEND per packet.
    Unbatched,
    /// The router's `VerbsFabric`, packets in its registered pool (no copy).
    Router,
    /// The router's `VerbsFabric`, packets in an unregistered pool (copied).
    #[serde(rename = "router-copy")]
    RouterCopy,
}

impl Mode {
    /// The name `--mode` takes.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Sge => "sge",
            Mode::Memcpy => "memcpy",
            Mode::Unbatched => "unbatched",
            Mode::Router => "router",
            Mode::RouterCopy => "router-copy",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Mode, String> {
        match s {
            "sge" => Ok(Mode::Sge),
            "memcpy" => Ok(Mode::Memcpy),
            "unbatched" => Ok(Mode::Unbatched),
            "router" => Ok(Mode::Router),
            "router-copy" => Ok(Mode::RouterCopy),
            _ => Err(format!(
                "unknown mode {s:?} (sge, memcpy, unbatched, router, router-copy)"
            )),
        }
    }
}

/// One configuration's result.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// udp or shm.
    pub interconnect: &'static str,
    /// Packet size in bytes.
    pub size: usize,
    /// Packets per message (1 for unbatched).
    pub batch: usize,
    /// The mode.
    pub mode: Mode,
    /// Million packets per second that arrived.
    pub mpps: f64,
    /// Gbit/s of packets that arrived (headers included).
    pub gbps: f64,
    /// Median message latency, µs.
    pub p50_us: f64,
    /// 99th percentile message latency, µs.
    pub p99_us: f64,
    /// Packets sent.
    pub sent: u64,
    /// Packets that arrived.
    pub received: u64,
    /// Messages the splitter refused (must be 0).
    pub malformed: u64,
    /// Which round (with `--repeat`).
    pub round: usize,
}

/// Measure one configuration for `secs`.
pub fn measure(
    link: LinkKind,
    size: usize,
    batch: usize,
    mode: Mode,
    secs: Duration,
) -> anyhow::Result<Row> {
    if !(14..=SLOT - HEADER_LEN).contains(&size) {
        bail!("--size {size} is not in 14..={}", SLOT - HEADER_LEN);
    }
    if !(1..=32).contains(&batch) {
        bail!("--batch {batch} is not in 1..=32");
    }
    if matches!(mode, Mode::Router | Mode::RouterCopy) {
        return measure_router(link, size, batch, mode, secs);
    }
    let batch = if mode == Mode::Unbatched { 1 } else { batch };
    let msg = batch * SLOT;
    let a = Context::open_with(DeviceConfig::local(link)).context("sender device")?;
    let b = Context::open_with(DeviceConfig::local(link)).context("receiver device")?;
    let pd_a = a.alloc_pd();
    let pd_b = b.alloc_pd();
    let mut scq = CompletionQueue::new(&a, WINDOW * 2, None);
    let mut rcq = CompletionQueue::new(&b, RECVS * 2, None);
    let attr = |recv| QpInitAttr {
        max_send_wr: WINDOW * 2,
        max_recv_wr: recv,
        ..QpInitAttr::new(QpType::Uc)
    };
    let mut qa = pd_a.create_qp(&scq, &scq, None, attr(4))?;
    let mut qb = pd_b.create_qp(&rcq, &rcq, None, attr(RECVS))?;
    let packets = pd_a.alloc_mr(PACKETS * SLOT, Access::LOCAL_WRITE);
    let staging = pd_a.alloc_mr(WINDOW * msg, Access::LOCAL_WRITE);
    let recv = pd_b.alloc_mr(RECVS * msg, Access::LOCAL_WRITE);
    // The packet buffers: header and a UDP-ish frame of `size` bytes each.
    let mut frame = vec![0u8; size];
    frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    for i in 0..PACKETS {
        for (j, b) in frame.iter_mut().enumerate().skip(14) {
            *b = (i + j) as u8;
        }
        let h = PacketHeader {
            hops: 0,
            len: size as u16,
            ingress_port: 0,
            origin: 1,
            bucket: (i % 4096) as u16,
            seq: i as u16,
        };
        packets.write(i * SLOT, &h.encode())?;
        packets.write(i * SLOT + HEADER_LEN, &frame)?;
    }
    let listener = Listener::bind(&b, SocketAddr::from(([127, 0, 0, 1], 0)))?;
    let at = listener.local_addr()?;
    let param = ConnParam::default();
    let accept = std::thread::spawn(
        move || -> anyhow::Result<(weft_verbs::QueuePair, cm::Connection)> {
            let req = listener.get_request(Duration::from_secs(10))?;
            let c = req.accept(&mut qb, &ConnParam::default())?;
            Ok((qb, c))
        },
    );
    let _ca = cm::connect(&mut qa, at, &param)?;
    let (mut qb, _cb) = accept
        .join()
        .map_err(|_| anyhow::anyhow!("accept thread panicked"))??;
    qb.post_recv((0..RECVS).map(|i| RecvWr::new(i as u64, recv.sge(i * msg, msg as u32))))?;

    let base = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let receiver = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || -> anyhow::Result<(u64, u64, Vec<u64>)> {
            let mut out = Vec::with_capacity(64);
            let mut buf = vec![0u8; msg];
            let (mut received, mut malformed) = (0u64, 0u64);
            let mut lat = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(600);
            while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
                out.clear();
                rcq.poll(&mut out, 64);
                let now = base.elapsed().as_nanos() as u64;
                let mut repost = Vec::with_capacity(out.len());
                for c in &out {
                    if c.status != WcStatus::Success {
                        bail!("receive completed with {:?}", c.status);
                    }
                    let i = c.wr_id as usize % RECVS;
                    let len = (c.byte_len as usize).min(msg);
                    recv.read(i * msg, &mut buf[..len])?;
                    let mut first = true;
                    for p in split(&buf[..len]) {
                        match p {
                            Ok((_, f)) => {
                                received += 1;
                                if first {
                                    first = false;
                                    let mut t = [0u8; 8];
                                    t.copy_from_slice(&f[size - 8..size]);
                                    lat.push(now.saturating_sub(u64::from_le_bytes(t)));
                                }
                            }
                            Err(_) => malformed += 1,
                        }
                    }
                    repost.push(RecvWr::new(i as u64, recv.sge(i * msg, msg as u32)));
                }
                if !repost.is_empty() {
                    qb.post_recv(repost)?;
                }
            }
            Ok((received, malformed, lat))
        })
    };

    let mut sent = 0u64;
    let mut in_flight = 0usize;
    let mut next_packet = 0usize;
    let mut next_msg = 0usize;
    let mut comps = Vec::with_capacity(WINDOW);
    let start = Instant::now();
    let end = start + secs;
    while Instant::now() < end {
        comps.clear();
        scq.poll(&mut comps, WINDOW);
        for c in &comps {
            if c.status != WcStatus::Success {
                bail!("send completed with {:?}", c.status);
            }
            in_flight -= 1;
        }
        if in_flight >= WINDOW {
            continue;
        }
        // The first packet of the message carries the time it is posted in its last 8
        // bytes.
        let first = next_packet;
        let stamp = base.elapsed().as_nanos() as u64;
        packets.write(first * SLOT + HEADER_LEN + size - 8, &stamp.to_le_bytes())?;
        let wr = match mode {
            Mode::Sge | Mode::Unbatched => {
                let sges: Vec<_> = (0..batch)
                    .map(|k| {
                        packets.sge(((first + k) % PACKETS) * SLOT, (HEADER_LEN + size) as u32)
                    })
                    .collect();
                SendWr::new(next_msg as u64, WrOp::Send { imm: None }, sges)
            }
            // (The router modes returned above.)
            Mode::Memcpy | Mode::Router | Mode::RouterCopy => {
                let g = next_msg % WINDOW;
                let mut tmp = vec![0u8; HEADER_LEN + size];
                for k in 0..batch {
                    packets.read(((first + k) % PACKETS) * SLOT, &mut tmp)?;
                    staging.write(g * msg + k * (HEADER_LEN + size), &tmp)?;
                }
                SendWr::new(
                    next_msg as u64,
                    WrOp::Send { imm: None },
                    staging.sge(g * msg, (batch * (HEADER_LEN + size)) as u32),
                )
            }
        };
        qa.post_send([wr])?;
        in_flight += 1;
        sent += batch as u64;
        next_packet = (next_packet + batch) % PACKETS;
        next_msg += 1;
    }
    let elapsed = start.elapsed();
    // Let the last messages land.
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Release);
    let (received, malformed, mut lat) = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("receiver panicked"))??;
    lat.sort_unstable();
    let pct = |q: f64| {
        if lat.is_empty() {
            0.0
        } else {
            lat[((lat.len() - 1) as f64 * q) as usize] as f64 / 1e3
        }
    };
    let mpps = received as f64 / elapsed.as_secs_f64() / 1e6;
    Ok(Row {
        interconnect: link.name(),
        size,
        batch,
        mode,
        mpps,
        gbps: mpps * size as f64 * 8.0 / 1e3,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        sent,
        received,
        malformed,
        round: 0,
    })
}

/// Two cluster nodes in this process, each a real `VerbsFabric` on a loopback
/// address of its own; node 1 registers `pool`.
fn router_nodes(
    link: LinkKind,
    batch: usize,
    pools: [&BufferPool; 2],
) -> anyhow::Result<(VerbsFabric, VerbsFabric)> {
    let net = (std::process::id() % 250) as u8;
    let cm_port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let plan = |me: u8| ClusterPlan {
        me,
        nodes: (1..=2u8)
            .map(|i| (i, std::net::IpAddr::from([127, 79, net, i])))
            .collect(),
        owner: vec![1, 2],
        interconnect: match link {
            LinkKind::Udp => Kind::Udp,
            LinkKind::Shm => Kind::Shm,
        },
        batch,
        balance: Balance::Direct,
        transport: Transport::Uc,
        delay: Duration::from_micros(50),
        cm_port,
    };
    let mut a = VerbsFabric::start(&plan(1), pools[0]).context("node 1")?;
    let mut b = VerbsFabric::start(&plan(2), pools[1]).context("node 2")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut sink = Vec::new();
    while !(a.is_up(2) && b.is_up(1)) {
        if Instant::now() >= deadline {
            bail!("the two router nodes did not connect in 10 s");
        }
        a.poll(&mut sink);
        b.poll(&mut sink);
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok((a, b))
}

/// `router` and `router-copy`: node 1's `VerbsFabric` sends `batch` packets per
/// message to node 2's for `secs`.
fn measure_router(
    link: LinkKind,
    size: usize,
    batch: usize,
    mode: Mode,
    secs: Duration,
) -> anyhow::Result<Row> {
    let registered = BufferPool::new(PACKETS * 2, SLOT);
    let unregistered = BufferPool::new(PACKETS * 2, SLOT);
    let receiving = BufferPool::new(PACKETS, SLOT);
    let (mut a, mut b) = router_nodes(link, batch, [&registered, &receiving])?;
    let src = if mode == Mode::RouterCopy {
        &unregistered
    } else {
        &registered
    };
    let base = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let receiver = {
        let stop = Arc::clone(&stop);
        let pool = receiving.clone();
        std::thread::spawn(move || -> (u64, u64, Vec<u64>) {
            let mut msgs = Vec::with_capacity(64);
            let (mut received, mut malformed) = (0u64, 0u64);
            let mut lat = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(600);
            while !stop.load(Ordering::Acquire) && Instant::now() < deadline {
                b.poll(&mut msgs);
                let now = base.elapsed().as_nanos() as u64;
                for (_, m) in msgs.drain(..) {
                    let mut first = true;
                    for p in split(&m) {
                        match p {
                            Ok((_, f)) => {
                                // What a node does with each packet it receives.
                                if let Some(mut buf) = pool.alloc() {
                                    if buf.copy_from(f) {
                                        received += 1;
                                    }
                                }
                                if first {
                                    first = false;
                                    let mut t = [0u8; 8];
                                    t.copy_from_slice(&f[size - 8..size]);
                                    lat.push(now.saturating_sub(u64::from_le_bytes(t)));
                                }
                            }
                            Err(_) => malformed += 1,
                        }
                    }
                    b.recycle(m);
                }
            }
            (received, malformed, lat)
        })
    };
    let mut frame = vec![0u8; size];
    frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    for (j, x) in frame.iter_mut().enumerate().skip(14) {
        *x = j as u8;
    }
    let mut sink = Vec::new();
    let mut bufs = Vec::with_capacity(batch);
    let (mut sent, mut seq) = (0u64, 0u16);
    let start = Instant::now();
    let end = start + secs;
    while Instant::now() < end {
        if a.in_flight(2) >= a.depth() {
            a.poll(&mut sink);
            continue;
        }
        if src.alloc_burst(batch, &mut bufs) < batch {
            bufs.clear();
            a.poll(&mut sink);
            continue;
        }
        let stamp = base.elapsed().as_nanos() as u64;
        for (k, b) in bufs.iter_mut().enumerate() {
            // The port's receive: the frame lands in a pool buffer.
            if !b.copy_from(&frame) {
                bail!("a {size}-byte frame does not fit a pool buffer");
            }
            if k == 0 {
                b[size - 8..size].copy_from_slice(&stamp.to_le_bytes());
            }
            seq = seq.wrapping_add(1);
            let h = PacketHeader {
                hops: 0,
                len: size as u16,
                ingress_port: 0,
                origin: 1,
                bucket: seq % 4096,
                seq,
            };
            if !prepend_header(b, &h) {
                bail!("no headroom for the header");
            }
        }
        match a.send(2, &mut bufs) {
            Ok(r) => sent += r.sent as u64,
            Err(e) => bail!("node 1 could not send: {e:?}"),
        }
    }
    let elapsed = start.elapsed();
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Release);
    let (received, malformed, mut lat) = receiver
        .join()
        .map_err(|_| anyhow::anyhow!("receiver panicked"))?;
    drop(a);
    lat.sort_unstable();
    let pct = |q: f64| {
        if lat.is_empty() {
            0.0
        } else {
            lat[((lat.len() - 1) as f64 * q) as usize] as f64 / 1e3
        }
    };
    let mpps = received as f64 / elapsed.as_secs_f64() / 1e6;
    Ok(Row {
        interconnect: link.name(),
        size,
        batch,
        mode,
        mpps,
        gbps: mpps * size as f64 * 8.0 / 1e3,
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        sent,
        received,
        malformed,
        round: 0,
    })
}

/// One row of `--copy-cost`.
#[derive(Debug, Clone, Serialize)]
pub struct CopyRow {
    /// Always "copy".
    pub kind: &'static str,
    /// Packet size in bytes.
    pub size: usize,
    /// Nanoseconds per packet: the fastest of 25 runs of 20 000 packets.
    pub ns_per_packet: f64,
}

/// What the router's interconnect thread did per packet before a SEND until its
/// pool was registered (`VerbsFabric::send` in weft-router): the 12-byte header and
/// the frame copied from the packet buffer into a registered send slot with
/// [`weft_verbs::MemoryRegion::write`], 64 slots of 32 packets cycled as the fabric
/// did. The cost the zero-copy gather saves. The fastest run is kept: on a
/// loaded machine the minimum is the run nobody interrupted.
pub fn copy_cost(size: usize) -> anyhow::Result<CopyRow> {
    if !(14..=SLOT - HEADER_LEN).contains(&size) {
        bail!("--size {size} is not in 14..={}", SLOT - HEADER_LEN);
    }
    let ctx = Context::open_with(DeviceConfig::local(LinkKind::Shm)).context("device")?;
    let pd = ctx.alloc_pd();
    let slots = 64 * 32;
    let mr = pd.alloc_mr(slots * SLOT, Access::LOCAL_WRITE);
    // Packet buffers as the ports' pool holds them: 2 KiB slots of one arena.
    let pool = BufferPool::new(256, 2048);
    let mut bufs = Vec::new();
    for i in 0..256 {
        let mut b = pool.alloc().context("pool")?;
        let frame: Vec<u8> = (0..size).map(|j| (i + j) as u8).collect();
        if !b.copy_from(&frame) {
            bail!("a {size}-byte frame does not fit a pool buffer");
        }
        bufs.push(b);
    }
    let h = PacketHeader {
        hops: 0,
        len: size as u16,
        ingress_port: 0,
        origin: 1,
        bucket: 1,
        seq: 1,
    };
    let n = 20_000;
    let mut best = f64::MAX;
    for _ in 0..25 {
        let t = Instant::now();
        for i in 0..n {
            let off = (i % slots) * SLOT;
            let b = &bufs[i % bufs.len()];
            mr.write(off, &h.encode())?;
            mr.write(off + HEADER_LEN, b)?;
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    Ok(CopyRow {
        kind: "copy",
        size,
        ns_per_packet: best,
    })
}

/// Every combination, one row (or JSON line) each; with `repeat` rounds per
/// (interconnect, size), the modes in the opposite order every other round, so
/// `sge` and `unbatched` alternate in time (ABAB) on a machine whose load drifts.
pub fn run(
    links: &[LinkKind],
    sizes: &[usize],
    batches: &[usize],
    modes: &[Mode],
    secs: Duration,
    repeat: usize,
    json: bool,
) -> anyhow::Result<()> {
    for &link in links {
        for &size in sizes {
            for round in 0..repeat.max(1) {
                let mut order = modes.to_vec();
                if round % 2 == 1 {
                    order.reverse();
                }
                for &mode in &order {
                    let bs: &[usize] = if mode == Mode::Unbatched {
                        &[1]
                    } else {
                        batches
                    };
                    for &batch in bs {
                        let mut r = measure(link, size, batch, mode, secs)?;
                        r.round = round;
                        if json {
                            println!("{}", serde_json::to_string(&r)?);
                        } else {
                            println!(
                            "{:3} {:5} B batch {:2} {:9} {:7.3} Mpps {:6.2} Gbit/s p50 {:8.1} us p99 {:8.1} us ({} of {} arrived)",
                            r.interconnect,
                            r.size,
                            r.batch,
                            r.mode.name(),
                            r.mpps,
                            r.gbps,
                            r.p50_us,
                            r.p99_us,
                            r.received,
                            r.sent
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
    fn the_copy_cost_is_measured_per_size() {
        let r = copy_cost(64).expect("64");
        assert!(
            r.ns_per_packet > 0.0 && r.ns_per_packet.is_finite(),
            "{r:?}"
        );
        assert!(copy_cost(4000).is_err());
    }

    #[test]
    fn every_mode_delivers_whole_batches_over_shm() {
        for mode in [Mode::Sge, Mode::Memcpy, Mode::Unbatched] {
            let r = measure(LinkKind::Shm, 64, 8, mode, Duration::from_millis(200)).expect("run");
            assert_eq!(r.malformed, 0, "{mode:?}");
            assert!(r.received > 0, "{mode:?}: {r:?}");
            assert!(r.received <= r.sent);
            assert_eq!(r.batch, if mode == Mode::Unbatched { 1 } else { 8 });
        }
        assert!(measure(LinkKind::Shm, 4000, 8, Mode::Sge, Duration::from_millis(10)).is_err());
        assert!(measure(LinkKind::Shm, 64, 33, Mode::Sge, Duration::from_millis(10)).is_err());
    }

    #[test]
    fn the_router_path_delivers_through_two_real_fabrics_over_shm() {
        for mode in [Mode::Router, Mode::RouterCopy] {
            let r = measure(LinkKind::Shm, 64, 8, mode, Duration::from_millis(200)).expect("run");
            assert_eq!(r.malformed, 0, "{mode:?}");
            assert!(r.received > 0, "{mode:?}: {r:?}");
            assert!(r.received <= r.sent, "{mode:?}: {r:?}");
            assert_eq!(r.batch, 8);
        }
    }
}
