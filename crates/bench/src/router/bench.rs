//! In-memory benchmarks: the per-packet pipeline on one core with a full BGP table,
//! and the three data-plane architectures between generator and sink links (the
//! traffic patterns of the P2PNIC paper's Fig. 10, as far as two cores allow).
//! Programs that report numbers; nothing here asserts a time.
#![forbid(unsafe_code)]

use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_link::{BufferPool, Link, LinkInfo, LinkStats, PacketBuf};
use weft_router::dataplane::{Architecture, Dataplane, Options};
use weft_router::fib::{IpPrefix, NextHop};
use weft_router::pipeline::{PortSpec, Router, RouterConfig};
use weft_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use weft_wire::ethernet::EthernetFrame;
use weft_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use weft_wire::{EtherType, EthernetAddress, IpProtocol};

/// `prefix asn` lines (iptrie's `bgpas.lpm`); IPv4 and IPv6 prefixes.
pub fn load_bgpas(path: &Path) -> io::Result<Vec<(IpPrefix, u64)>> {
    let text = std::fs::read_to_string(path)?;
    let mut v = Vec::new();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        if let (Some(p), Some(a)) = (f.next(), f.next()) {
            if let (Ok(p), Ok(a)) = (p.parse::<IpPrefix>(), a.parse::<u64>()) {
                v.push((p, a));
            }
        }
    }
    Ok(v)
}

/// Where cargo unpacked iptrie 0.11's BGP table, if it did.
pub fn find_bgpas() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))?;
    let src = home.join("registry").join("src");
    for idx in std::fs::read_dir(src).ok()?.flatten() {
        for krate in std::fs::read_dir(idx.path()).ok()?.flatten() {
            let name = krate.file_name();
            if name.to_string_lossy().starts_with("iptrie-0.11") {
                let p = krate.path().join("benches").join("bgpas.lpm");
                if p.exists() {
                    return Some(p);
                }
            }
        }
    }
    None
}

/// xorshift64* for reproducible destinations.
#[derive(Debug, Clone)]
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

const RMAC: [EthernetAddress; 4] = [
    EthernetAddress([2, 0, 0, 0, 1, 1]),
    EthernetAddress([2, 0, 0, 0, 2, 1]),
    EthernetAddress([2, 0, 0, 0, 3, 1]),
    EthernetAddress([2, 0, 0, 0, 4, 1]),
];

fn host_mac(port: usize) -> EthernetAddress {
    EthernetAddress([2, 0, 0, 0, port as u8 + 1, 2])
}
fn host_ip(port: usize) -> Ipv4Addr {
    Ipv4Addr::new(198, 18, port as u8 + 1, 2)
}

/// A router with `ports` ports (198.18.{i+1}.1/24), the table's IPv4 routes spread
/// over the next hops of `egress` by AS number, and every neighbour already known.
pub fn bench_router(table: &[(IpPrefix, u64)], ports: usize, egress: &[usize]) -> Arc<Router> {
    let specs = (0..ports)
        .map(|i| PortSpec {
            name: format!("p{i}"),
            mac: RMAC[i % RMAC.len()],
            v4: vec![(Ipv4Addr::new(198, 18, i as u8 + 1, 1), 24)],
            v6: vec![],
            max_frame: 1514,
        })
        .collect();
    let router = Router::new(specs, RouterConfig::default());
    let routes = table
        .iter()
        .filter(|(p, _)| p.addr().is_ipv4())
        .map(|&(p, asn)| {
            let port = egress[(asn % egress.len() as u64) as usize];
            (
                p,
                NextHop {
                    port,
                    via: Some(IpAddr::V4(host_ip(port))),
                },
            )
        });
    router
        .bulk_insert(routes)
        .expect("one next hop per port: the next-hop table cannot be full");
    // Teach the router every host with an ARP request from it.
    let pool = BufferPool::new(64, 2048);
    let mut w = router.worker(pool.clone());
    let now = Instant::now();
    for i in 0..ports {
        let mut b = pool.alloc().expect("fresh pool");
        let mut f = vec![0u8; 42];
        let mut e = EthernetFrame::new_unchecked(&mut f[..]);
        e.set_dst_addr(EthernetAddress::BROADCAST);
        e.set_src_addr(host_mac(i));
        e.set_tag_and_ethertype(None, EtherType::ARP);
        let _ = ArpRepr {
            operation: ArpOperation::REQUEST,
            source_hardware_addr: host_mac(i),
            source_protocol_addr: host_ip(i),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(198, 18, i as u8 + 1, 1),
        }
        .emit(&mut ArpPacket::new_unchecked(&mut f[14..]));
        if b.copy_from(&f) {
            let mut out = Vec::new();
            w.process_burst(i, [b], now, &mut out);
        }
    }
    router
}

/// A UDP frame of `size` bytes (without FCS: 60 for "64-byte packets") from the host
/// on `ingress` to `dst`.
pub fn udp_frame(ingress: usize, dst: Ipv4Addr, size: usize) -> Vec<u8> {
    let size = size.max(42);
    let ip = Ipv4Repr {
        src_addr: host_ip(ingress),
        dst_addr: dst,
        protocol: IpProtocol::UDP,
        payload_len: size - 34,
        ttl: 64,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: false,
    };
    let mut f = vec![0u8; size];
    let mut e = EthernetFrame::new_unchecked(&mut f[..]);
    e.set_dst_addr(RMAC[ingress % RMAC.len()]);
    e.set_src_addr(host_mac(ingress));
    e.set_tag_and_ethertype(None, EtherType::IPV4);
    let _ = ip.emit(&mut Ipv4Packet::new_unchecked(&mut f[14..34]));
    let udp_len = (size - 34) as u16;
    f[34..36].copy_from_slice(&1234u16.to_be_bytes());
    f[36..38].copy_from_slice(&5678u16.to_be_bytes());
    f[38..40].copy_from_slice(&udp_len.to_be_bytes());
    f
}

/// `n` destinations inside random IPv4 prefixes of `table` whose next hop is one of
/// `want` (all when empty), uniformly over prefixes, random host bits.
pub fn destinations(
    router: &Router,
    table: &[(IpPrefix, u64)],
    n: usize,
    want: &[usize],
    seed: u64,
) -> Vec<Ipv4Addr> {
    let v4: Vec<&IpPrefix> = table
        .iter()
        .filter(|(p, _)| p.addr().is_ipv4())
        .map(|(p, _)| p)
        .collect();
    let fib = router.fib();
    let mut rng = Rng(seed | 1);
    let mut out = Vec::with_capacity(n);
    let mut tries = 0usize;
    while out.len() < n && !v4.is_empty() && tries < n * 1000 {
        tries += 1;
        let p = v4[(rng.next() % v4.len() as u64) as usize];
        let IpAddr::V4(base) = p.addr() else { continue };
        let host = if p.len() >= 32 {
            0
        } else {
            (rng.next() as u32) & (u32::MAX >> p.len())
        };
        let d = Ipv4Addr::from(u32::from(base) | host);
        // Only what a router forwards: no martians, no multicast, nothing connected.
        let o = d.octets();
        if o[0] == 0 || o[0] == 127 || o[0] >= 224 || (o[0] == 198 && (o[1] & 0xfe) == 18) {
            continue;
        }
        match fib.lookup_v4(d) {
            Some(nh) if want.is_empty() || want.contains(&nh.port) => out.push(d),
            _ => {}
        }
    }
    out
}

/// What [`pipeline_rate`] measured.
#[derive(Debug, Clone, Copy)]
pub struct PipelineResult {
    /// Packets pushed through.
    pub packets: u64,
    /// Of which forwarded.
    pub forwarded: u64,
    /// Seconds.
    pub secs: f64,
    /// Million packets per second on this core.
    pub mpps: f64,
    /// FIB lookups alone on the same destinations, million per second.
    pub lookup_mlps: f64,
    /// Heap allocations during the timed loop, as the caller's counter saw them (0
    /// from [`pipeline_rate`], which has no counter).
    pub allocations: u64,
}

/// The whole pipeline on the calling thread: for each burst of 32, take buffers from
/// the pool, copy the frames in (what a receive does), classify and finish, and drop
/// the results back to the pool (what a transmit does).
pub fn pipeline_rate(
    router: &Arc<Router>,
    frames: &[Vec<u8>],
    duration: Duration,
) -> PipelineResult {
    pipeline_rate_counting(router, frames, duration, &|| 0)
}

/// [`pipeline_rate`], reading `heap_allocations` (a process-wide allocation count,
/// such as a counting global allocator keeps) before and after the timed loop. One
/// pass over all frames first warms the worker's neighbour cache and output list, so
/// what is left is what every packet costs: the issue asks for none.
pub fn pipeline_rate_counting(
    router: &Arc<Router>,
    frames: &[Vec<u8>],
    duration: Duration,
    heap_allocations: &dyn Fn() -> u64,
) -> PipelineResult {
    let pool = BufferPool::new(4096, 2048);
    let mut w = router.worker(pool.clone());
    let mut bufs: Vec<PacketBuf> = Vec::with_capacity(32);
    let mut out = Vec::with_capacity(64);
    let mut i = 0usize;
    let mut burst = |w: &mut weft_router::Worker, i: &mut usize| {
        pool.alloc_burst(32, &mut bufs);
        for b in &mut bufs {
            let _ = b.copy_from(&frames[*i % frames.len()]);
            *i += 1;
        }
        let n = bufs.len() as u64;
        let now = Instant::now();
        w.process_burst(0, bufs.drain(..), now, &mut out);
        pool.free_burst(out.drain(..).map(|(_, b)| b));
        n
    };
    while i < frames.len() {
        burst(&mut w, &mut i);
    }
    let allocs0 = heap_allocations();
    let start = Instant::now();
    let mut packets = 0u64;
    let fwd0 = w.counters().get(weft_router::Counter::Forwarded);
    while start.elapsed() < duration {
        for _ in 0..64 {
            packets += burst(&mut w, &mut i);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let allocations = heap_allocations().saturating_sub(allocs0);
    let forwarded = w.counters().get(weft_router::Counter::Forwarded) - fwd0;
    // Lookups alone.
    let dsts: Vec<Ipv4Addr> = frames
        .iter()
        .filter_map(|f| Ipv4Packet::new_checked(&f[14..]).ok().map(|p| p.dst_addr()))
        .collect();
    let fib = router.fib();
    let t = Instant::now();
    let mut hits = 0u64;
    let mut n = 0u64;
    while t.elapsed() < duration / 2 && !dsts.is_empty() {
        for d in &dsts {
            hits += u64::from(fib.lookup_v4(*d).is_some());
        }
        n += dsts.len() as u64;
    }
    let lsecs = t.elapsed().as_secs_f64();
    std::hint::black_box(hits);
    PipelineResult {
        packets,
        forwarded,
        secs,
        mpps: packets as f64 / secs / 1e6,
        lookup_mlps: n as f64 / lsecs.max(1e-9) / 1e6,
        allocations,
    }
}

/// A link that receives an endless stream of frames (cycling through `frames`) and
/// counts and discards what it is asked to send: a traffic generator and sink in one.
#[derive(Debug)]
pub struct BenchLink {
    info: LinkInfo,
    pool: BufferPool,
    frames: Vec<Vec<u8>>,
    next: usize,
    generated: Arc<AtomicU64>,
    sunk: Arc<AtomicU64>,
    stats: LinkStats,
}

impl BenchLink {
    /// A port that generates `frames` (none: a pure sink). The counters are shared so
    /// the caller can read them while the link runs on another thread.
    pub fn new(
        name: &str,
        mac: EthernetAddress,
        pool: BufferPool,
        frames: Vec<Vec<u8>>,
    ) -> (BenchLink, Arc<AtomicU64>, Arc<AtomicU64>) {
        let generated = Arc::new(AtomicU64::new(0));
        let sunk = Arc::new(AtomicU64::new(0));
        (
            BenchLink {
                info: LinkInfo {
                    name: name.to_string(),
                    mac: mac.0,
                    max_frame: 1514,
                },
                pool,
                frames,
                next: 0,
                generated: Arc::clone(&generated),
                sunk: Arc::clone(&sunk),
                stats: LinkStats::default(),
            },
            generated,
            sunk,
        )
    }
}

impl Link for BenchLink {
    fn info(&self) -> &LinkInfo {
        &self.info
    }
    fn pool(&self) -> &BufferPool {
        &self.pool
    }
    fn recv_burst(&mut self, out: &mut Vec<PacketBuf>, max: usize) -> io::Result<usize> {
        if self.frames.is_empty() {
            return Ok(0);
        }
        let start = out.len();
        self.pool.alloc_burst(max, out);
        for b in &mut out[start..] {
            let _ = b.copy_from(&self.frames[self.next]);
            self.next = (self.next + 1) % self.frames.len();
        }
        let n = out.len() - start;
        self.generated.fetch_add(n as u64, Ordering::Relaxed);
        self.stats.rx_frames += n as u64;
        Ok(n)
    }
    fn send_burst(&mut self, frames: &mut Vec<PacketBuf>) -> io::Result<usize> {
        let n = frames.len();
        self.pool.free_burst(frames.drain(..));
        self.sunk.fetch_add(n as u64, Ordering::Relaxed);
        self.stats.tx_frames += n as u64;
        Ok(n)
    }
    fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        if self.frames.is_empty() {
            std::thread::sleep(timeout.min(Duration::from_micros(50)));
            return Ok(false);
        }
        Ok(true)
    }
    fn stats(&self) -> LinkStats {
        self.stats
    }
}

/// A traffic pattern of the paper's Fig. 10.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Ports 0 and 1 receive; port 0's traffic leaves on port 2, port 1's on port 3.
    TwoInTwoOut,
    /// As above, but each ingress sends half to port 2 and half to port 3 (flows
    /// merge on each egress).
    TwoInTwoOutMix,
    /// Port 0 receives, port 1 sends.
    OneInOneOut,
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pattern::TwoInTwoOut => "2in-2out",
            Pattern::TwoInTwoOutMix => "2in-2out-mix",
            Pattern::OneInOneOut => "1in-1out",
        })
    }
}

/// What [`architecture_rate`] measured.
#[derive(Debug, Clone, Copy)]
pub struct ArchResult {
    /// Frames delivered to sinks per second, millions.
    pub mpps: f64,
    /// Frames generated per second, millions.
    pub offered_mpps: f64,
    /// Share of generated frames that were delivered.
    pub delivered_share: f64,
}

/// Run the data plane in `arch` between generator and sink links for `duration`.
pub fn architecture_rate(
    table: &[(IpPrefix, u64)],
    arch: Architecture,
    pattern: Pattern,
    size: usize,
    duration: Duration,
) -> io::Result<ArchResult> {
    // (ports, egress ports, [(ingress, its egress ports)])
    type Plan = (usize, Vec<usize>, Vec<(usize, Vec<usize>)>);
    let (ports, egress, plan): Plan = match pattern {
        Pattern::OneInOneOut => (2, vec![1], vec![(0, vec![1])]),
        Pattern::TwoInTwoOut => (4, vec![2, 3], vec![(0, vec![2]), (1, vec![3])]),
        Pattern::TwoInTwoOutMix => (4, vec![2, 3], vec![(0, vec![2, 3]), (1, vec![2, 3])]),
    };
    let router = bench_router(table, ports, &egress);
    let pool = BufferPool::new(16384, 2048);
    let mut links: Vec<Box<dyn Link>> = Vec::new();
    let mut generated = Vec::new();
    let mut sunk = Vec::new();
    for (p, &mac) in RMAC.iter().enumerate().take(ports) {
        let frames = match plan.iter().find(|(i, _)| *i == p) {
            Some((_, outs)) => {
                // Equal shares of each egress, interleaved.
                let per: Vec<Vec<Ipv4Addr>> = outs
                    .iter()
                    .map(|&e| {
                        destinations(&router, table, 2048, &[e], 7 + p as u64 * 31 + e as u64)
                    })
                    .collect();
                let mut f = Vec::new();
                for k in 0..2048 {
                    for d in &per {
                        if let Some(a) = d.get(k) {
                            f.push(udp_frame(p, *a, size));
                        }
                    }
                }
                f
            }
            None => Vec::new(),
        };
        let (l, g, s) = BenchLink::new(&format!("p{p}"), mac, pool.clone(), frames);
        links.push(Box::new(l));
        generated.push(g);
        sunk.push(s);
    }
    let dp = Dataplane::start(
        Arc::clone(&router),
        links,
        Options {
            arch,
            ..Options::default()
        },
    )?;
    // Warm up, then measure a window.
    std::thread::sleep(duration / 5);
    let g0: u64 = generated.iter().map(|g| g.load(Ordering::Relaxed)).sum();
    let s0: u64 = sunk.iter().map(|s| s.load(Ordering::Relaxed)).sum();
    let t0 = Instant::now();
    std::thread::sleep(duration);
    let g1: u64 = generated.iter().map(|g| g.load(Ordering::Relaxed)).sum();
    let s1: u64 = sunk.iter().map(|s| s.load(Ordering::Relaxed)).sum();
    let secs = t0.elapsed().as_secs_f64();
    dp.stop()?;
    let (g, s) = (g1 - g0, s1 - s0);
    Ok(ArchResult {
        mpps: s as f64 / secs / 1e6,
        offered_mpps: g as f64 / secs / 1e6,
        delivered_share: if g == 0 { 0.0 } else { s as f64 / g as f64 },
    })
}

/// A synthetic table for machines without the BGP file: `n` random IPv4 prefixes
/// (/8 to /24) with random AS numbers.
pub fn synthetic_table(n: usize, seed: u64) -> Vec<(IpPrefix, u64)> {
    let mut rng = Rng(seed | 1);
    (0..n)
        .filter_map(|_| {
            let len = 8 + (rng.next() % 17) as u8;
            IpPrefix::new(IpAddr::V4(Ipv4Addr::from(rng.next() as u32)), len)
                .map(|p| (p, rng.next() % 65536))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pipeline_bench_forwards_what_it_generates() {
        let table = synthetic_table(2000, 3);
        let router = bench_router(&table, 2, &[1]);
        let dsts = destinations(&router, &table, 256, &[1], 9);
        assert_eq!(dsts.len(), 256);
        let frames: Vec<Vec<u8>> = dsts.iter().map(|d| udp_frame(0, *d, 60)).collect();
        assert_eq!(frames[0].len(), 60);
        let r = pipeline_rate(&router, &frames, Duration::from_millis(50));
        assert!(r.packets > 0);
        assert_eq!(
            r.forwarded, r.packets,
            "every destination is routed and resolved"
        );
    }

    #[test]
    fn every_architecture_delivers_in_the_mixed_pattern() {
        let table = synthetic_table(2000, 4);
        for arch in [
            Architecture::Push,
            Architecture::Pull,
            Architecture::Central,
        ] {
            let r = architecture_rate(
                &table,
                arch,
                Pattern::TwoInTwoOutMix,
                60,
                Duration::from_millis(100),
            )
            .expect("run");
            assert!(r.mpps > 0.0, "{arch}: {r:?}");
        }
    }
}
