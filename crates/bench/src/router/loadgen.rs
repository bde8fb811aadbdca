//! A paced UDP traffic generator and receiver, for RFC 2544 style measurements
//! through whatever forwards between two network namespaces (weft or the Linux
//! kernel: the same generator for both). The sender is an `AF_XDP` socket in copy
//! mode (`--tx-link afxdp`, the default): on veth it sends 64-byte frames about 1.3×
//! as fast on one core as the `TPACKET_V2` ring it used before (`--tx-link
//! afpacket`; docs/results/router.md §3.3g), so the search finds the forwarders'
//! limits rather than the generator's. The receiver is an `AF_PACKET` V2 ring. Sender and receiver are threads
//! of one process, each moved into its namespace, so one clock stamps both ends and
//! the latency is one-way: from the sender's stamp (the wall clock, just before its
//! send call) to the frame's arrival at the receiving host's socket, as the kernel
//! stamped it — the port of a hardware tester — not to the moment the generator's
//! reader, which shares its core with the sender, got round to it (that figure is
//! kept too, as `read_*`).
//!
//! RFC 2544 §26.1 throughput: the highest rate with no frame lost, found by binary
//! search; §26.2 latency at that rate. Trials are 1 s by default, not the RFC's 60 s:
//! two shared cores and a time budget (`--trial-secs 60`, scripts/router-e2e.sh
//! `--long`, gives the RFC's). [`run_rfc2544`] is `weft router rfc2544`: the search
//! per frame size, printed as a markdown table or, with `--json`, one JSON object per
//! frame size ([`Rfc2544Row`]); `weft report` plots and tabulates either.
//!
//! `--latency-at-kpps` also measures latency at given rates, one per frame size: the
//! end-to-end script passes the kernel's zero-loss rates of the same round, so every
//! forwarder's latency is also known at the kernel's rate (issue 18's comparison).
#![forbid(unsafe_code)]

use anyhow::{bail, Context};
use std::io;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use weft_link::afpacket::{setns_net, wall_clock, AfPacket, RingConfig, RingVersion};
use weft_link::afxdp::{AfXdpLink, XdpConfig, XdpMode};
use weft_link::{BufferPool, Link, PacketBuf};
use weft_wire::ethernet::EthernetFrame;
use weft_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use weft_wire::{EtherType, EthernetAddress, IpProtocol};

/// How long the receiver sleeps when its ring is empty (see its loop).
const RX_NAP: Duration = Duration::from_micros(200);

/// Frames per send call when paced: the pacing's granularity (a paced sender
/// that falls behind catches up in bursts of this size too, so no frame of a
/// latency trial waits behind a long burst of its own sender).
const PACED_BURST: usize = 32;
/// Frames per send call flat out: one system call each with `AF_XDP` on Linux
/// 6.17+ (`XDP_MAX_TX_SKB_BUDGET`), eight of 32 on older kernels.
const FLAT_OUT_BURST: usize = 256;

/// Marks our frames (UDP payload start).
const MAGIC: u32 = 0x7765_6674; // "weft"

static TRIAL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

/// Where traffic enters and leaves.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// Namespace of the sender (a name under /run/netns).
    pub tx_ns: String,
    /// Sender's interface.
    pub tx_dev: String,
    /// Namespace of the receiver.
    pub rx_ns: String,
    /// Receiver's interface.
    pub rx_dev: String,
    /// MAC of the forwarder's ingress port (the frames' destination).
    pub dst_mac: EthernetAddress,
    /// Source address.
    pub src_ip: Ipv4Addr,
    /// Destination address (routed by the forwarder towards the receiver).
    pub dst_ip: Ipv4Addr,
    /// The receiver's ring: `TPACKET_V2` sees each frame as the kernel writes it;
    /// `TPACKET_V3` (what the generator used before issue 18) adds its block fill
    /// time or retire timer to every latency, the forwarder's or not.
    pub rx_ring: RingVersion,
    /// The sender's socket.
    pub tx_link: TxLink,
    /// `AF_XDP` sender: its send buffer in MiB (0: the kernel's default). Frames
    /// queued in the forwarder's backlog (veth with RPS) count against it, so a small
    /// one slows the sender when the forwarder falls behind (docs/results/router.md
    /// §3.3g).
    pub tx_sndbuf_mib: u32,
    /// `AF_XDP` sender: its frames in flight (0: the old budget, a 2 048-slot
    /// transmit ring and the send buffer of `tx_sndbuf_mib`). With N > 0 the
    /// transmit and completion rings hold N slots and the send buffer is raised far
    /// enough never to bind, so at most N frames are between the sender's call and
    /// the kernel's freeing of their skbs, whatever the frame size: a send buffer in
    /// bytes holds ~90 frames of 1 518 B but ~280 of 64 B (docs/results/router.md
    /// §3.3k).
    pub tx_inflight: u32,
}

/// The sender's socket type (`--tx-link`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TxLink {
    /// `AF_PACKET` with a `TPACKET_V2` transmit ring (the generator before
    /// issue 18's §3.3g).
    AfPacket,
    /// `AF_XDP` in copy mode on the sender's interface (generic XDP).
    #[default]
    AfXdp,
}

impl std::str::FromStr for TxLink {
    type Err = String;
    fn from_str(s: &str) -> Result<TxLink, String> {
        match s {
            "afpacket" => Ok(TxLink::AfPacket),
            "afxdp" => Ok(TxLink::AfXdp),
            _ => Err(format!("unknown transmit link {s:?} (afpacket, afxdp)")),
        }
    }
}

impl std::fmt::Display for TxLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TxLink::AfPacket => "afpacket",
            TxLink::AfXdp => "afxdp",
        })
    }
}

/// One trial's outcome.
#[derive(Debug, Clone, Default)]
pub struct Trial {
    /// Frames sent.
    pub sent: u64,
    /// Of ours, received.
    pub received: u64,
    /// Frames that reached the receiving host but overflowed the receiver's own
    /// socket ring (the generator's receiver shares a core with its sender): they
    /// crossed the forwarder, so they do not count as lost.
    pub receiver_dropped: u64,
    /// Achieved send rate, frames per second.
    pub tx_pps: f64,
    /// One-way latencies in nanoseconds (every received frame): from the sender's
    /// stamp, taken just before its send call, to the frame's arrival at the
    /// receiving host's socket as the kernel stamped it. This is what a tester
    /// with a hardware timestamp at its port measures (RFC 2544 §26.2): the
    /// forwarder's latency, without the generator's own reader, which shares a core
    /// with the sender and wakes when the scheduler lets it.
    pub latency_ns: Vec<u64>,
    /// The same frames to the moment the receiver thread read them (the figure
    /// weft reported before: arrival plus the reader's wake-up and its ring).
    pub read_latency_ns: Vec<u64>,
    /// Busy time of each core (index = CPU number) over the trial, nanoseconds:
    /// `/proc/stat`'s user + nice + system + irq + softirq from the sender's first
    /// frame to 20 ms after its last. Every process on the machine counts, the
    /// generator's sender and receiver too (empty when `/proc/stat` was unreadable).
    pub cpu_busy_ns: Vec<u64>,
}

impl Trial {
    /// Frames lost.
    pub fn lost(&self) -> u64 {
        self.sent
            .saturating_sub(self.received)
            .saturating_sub(self.receiver_dropped)
    }

    /// Share of sent frames that crossed the forwarder.
    pub fn delivered_share(&self) -> f64 {
        (self.received + self.receiver_dropped) as f64 / self.sent.max(1) as f64
    }
    /// Share of the received frames that arrived within `us` microseconds of being
    /// sent, percent (NaN when none arrived).
    pub fn within_us(&self, us: f64) -> f64 {
        if self.latency_ns.is_empty() {
            return f64::NAN;
        }
        let bound = (us * 1e3) as u64;
        let n = self.latency_ns.iter().filter(|&&l| l <= bound).count();
        100.0 * n as f64 / self.latency_ns.len() as f64
    }

    /// Latency percentile `p` (0..=100) in microseconds, to arrival.
    pub fn latency_us(&self, p: f64) -> f64 {
        percentile_us(&self.latency_ns, p)
    }

    /// Latency percentile `p` (0..=100) in microseconds, to the receiver's read.
    pub fn read_latency_us(&self, p: f64) -> f64 {
        percentile_us(&self.read_latency_ns, p)
    }

    /// CPU time per frame that crossed the forwarder, nanoseconds: the busy time of
    /// core `core`, or of every core with `None`, over the trial ([`Trial::cpu_busy_ns`])
    /// divided by the frames delivered. `None` without CPU figures, without that core,
    /// or when nothing crossed.
    pub fn cpu_ns_per_pkt(&self, core: Option<usize>) -> Option<f64> {
        let delivered = self.received + self.receiver_dropped;
        if delivered == 0 || self.cpu_busy_ns.is_empty() {
            return None;
        }
        let busy: u64 = match core {
            Some(c) => *self.cpu_busy_ns.get(c)?,
            None => self.cpu_busy_ns.iter().sum(),
        };
        Some(busy as f64 / delivered as f64)
    }
}

/// Nanoseconds per `/proc/stat` tick: `USER_HZ`, which the kernel fixes at 100 in its
/// user-space ABI on every architecture this runs on (x86, arm64).
const NS_PER_TICK: u64 = 10_000_000;

/// Busy ticks per core from `/proc/stat`'s text: for each `cpuN` line (not the `cpu`
/// total), user + nice + system + irq + softirq (fields 1, 2, 3, 6, 7; idle, iowait,
/// steal and guest time are not busy time of this machine's work), at index N.
/// Lines that do not parse are skipped; a core without a line reads 0.
pub fn proc_stat_busy_ticks(text: &str) -> Vec<u64> {
    let mut busy = Vec::new();
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let Some(n) = f
            .next()
            .and_then(|name| name.strip_prefix("cpu"))
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let v: Vec<u64> = f.take(7).map_while(|x| x.parse().ok()).collect();
        if v.len() < 7 || n >= 4096 {
            continue;
        }
        if busy.len() <= n {
            busy.resize(n + 1, 0);
        }
        busy[n] = v[0] + v[1] + v[2] + v[5] + v[6];
    }
    busy
}

/// Busy nanoseconds per core between two [`proc_stat_busy_ticks`] readings (a core
/// missing in either reads 0; counters never go back, a smaller one gives 0).
pub fn busy_ns_between(before: &[u64], after: &[u64]) -> Vec<u64> {
    after
        .iter()
        .enumerate()
        .map(|(i, &a)| a.saturating_sub(before.get(i).copied().unwrap_or(a)) * NS_PER_TICK)
        .collect()
}

/// The busy ticks of every core now (empty when `/proc/stat` cannot be read).
fn busy_ticks_now() -> Vec<u64> {
    std::fs::read_to_string("/proc/stat")
        .map(|t| proc_stat_busy_ticks(&t))
        .unwrap_or_default()
}

/// Percentile `p` (0..=100) of nanosecond samples, in microseconds (NaN when none).
fn percentile_us(ns: &[u64], p: f64) -> f64 {
    if ns.is_empty() {
        return f64::NAN;
    }
    let mut v = ns.to_vec();
    v.sort_unstable();
    let i = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
    v[i.min(v.len() - 1)] as f64 / 1e3
}

/// The wall clock in nanoseconds since the epoch: the clock the kernel stamps
/// received frames with, so the sender's stamp and the arrival stamp compare.
fn wall_ns() -> u64 {
    wall_clock().as_nanos() as u64
}

fn enter(ns: &str) -> io::Result<()> {
    let f = std::fs::File::open(PathBuf::from("/run/netns").join(ns))?;
    use std::os::fd::AsRawFd;
    setns_net(f.as_raw_fd())
}

fn template(ep: &Endpoints, src_mac: [u8; 6], size: usize) -> Vec<u8> {
    let size = size.max(60);
    let mut f = vec![0u8; size];
    let mut e = EthernetFrame::new_unchecked(&mut f[..]);
    e.set_dst_addr(ep.dst_mac);
    e.set_src_addr(EthernetAddress(src_mac));
    e.set_tag_and_ethertype(None, EtherType::IPV4);
    let ip = Ipv4Repr {
        src_addr: ep.src_ip,
        dst_addr: ep.dst_ip,
        protocol: IpProtocol::UDP,
        payload_len: size - 34,
        ttl: 64,
        dscp_ecn: 0,
        ident: 0,
        dont_frag: true,
    };
    let _ = ip.emit(&mut Ipv4Packet::new_unchecked(&mut f[14..34]));
    let udp_len = (size - 34) as u16;
    f[34..36].copy_from_slice(&9999u16.to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&udp_len.to_be_bytes());
    f[42..46].copy_from_slice(&MAGIC.to_be_bytes());
    f
}

/// Send `rate` frames per second (`None`: as fast as possible) of `size` bytes (no
/// FCS) for `duration`; count what arrives.
pub fn trial(
    ep: &Endpoints,
    size: usize,
    rate: Option<f64>,
    duration: Duration,
) -> io::Result<Trial> {
    // Frames still queued from an earlier trial must not count in this one: each
    // trial stamps its own tag (and waits a moment for stragglers before starting).
    std::thread::sleep(Duration::from_millis(200));
    let t0 = Instant::now();
    let tag = (t0.elapsed().as_nanos() as u32)
        ^ (std::process::id() << 8)
        ^ TRIAL.fetch_add(0x9e37_79b9, Ordering::Relaxed);
    let ready = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicBool::new(false));
    let rx_thread = {
        let (ns, dev, rx_ring) = (ep.rx_ns.clone(), ep.rx_dev.clone(), ep.rx_ring);
        let (ready, done) = (Arc::clone(&ready), Arc::clone(&done));
        std::thread::spawn(move || -> io::Result<(u64, u64, Vec<u64>, Vec<u64>)> {
            enter(&ns)?;
            let pool = BufferPool::new(8192, 2048);
            let cfg = match rx_ring {
                // 4 096 slots: the receiver shares its core with the sender.
                RingVersion::V2 => RingConfig {
                    rx_frames: 4096,
                    ..RingConfig::default()
                },
                // Small blocks: a block becomes visible when full or when its timer
                // fires, so small ones keep the receiver's own delay low at high rates.
                RingVersion::V3 => RingConfig {
                    rx_block_size: 8192,
                    rx_blocks: 512,
                    ..RingConfig::v3()
                },
            };
            let mut link = AfPacket::with_config(&dev, pool, cfg)?;
            link.keep_arrivals(true);
            ready.store(true, Ordering::Release);
            let mut got = 0u64;
            let mut lat = Vec::new();
            let mut read_lat = Vec::new();
            let mut rx: Vec<PacketBuf> = Vec::with_capacity(64);
            let mut quiet_since: Option<Instant> = None;
            loop {
                rx.clear();
                let n = link.recv_burst(&mut rx, 64)?;
                let now = wall_ns();
                for (k, f) in rx.iter().enumerate() {
                    if f.len() >= 58
                        && f[12..14] == [8, 0]
                        && f[42..46] == MAGIC.to_be_bytes()
                        && f[46..50] == tag.to_be_bytes()
                    {
                        got += 1;
                        let ts = u64::from_be_bytes([
                            f[50], f[51], f[52], f[53], f[54], f[55], f[56], f[57],
                        ]);
                        read_lat.push(now.saturating_sub(ts));
                        // A frame without a kernel stamp (none here: no offloads)
                        // counts at its read.
                        let arrived = link
                            .arrivals()
                            .get(k)
                            .map(|d| d.as_nanos() as u64)
                            .filter(|&a| a != 0)
                            .unwrap_or(now);
                        lat.push(arrived.saturating_sub(ts));
                    }
                }
                if done.load(Ordering::Acquire) {
                    // Drain for 50 ms after the sender stopped.
                    let q = *quiet_since.get_or_insert_with(Instant::now);
                    if q.elapsed() > Duration::from_millis(50) {
                        break;
                    }
                }
                if n == 0 {
                    // Nap, do not wait on the socket: a reader asleep on it is
                    // woken by every frame the kernel queues, and that wake-up is
                    // paid on the core that delivers the frame — the forwarder's
                    // (a weft router's transmit runs host B's receive path) — and
                    // was 11-13 % of the router's core in a profile. The arrival
                    // stamps make the reader's delay irrelevant to the latency, and
                    // the ring (4 096 slots) covers 10 ms at 400 kpps. 200 µs, not
                    // 50: the naps' own timer wake-ups on the generator's core cost
                    // the kernel forwarder's figure (whose forwarding runs in the
                    // sender's system call there) 5-15 % at 50 µs, nothing at 200.
                    std::thread::sleep(RX_NAP);
                }
            }
            link.refresh_stats();
            Ok((got, link.stats().rx_dropped, lat, read_lat))
        })
    };
    let tx_thread = {
        let ep = ep.clone();
        let ready = Arc::clone(&ready);
        let done = Arc::clone(&done);
        std::thread::spawn(move || -> io::Result<(u64, f64, Vec<u64>)> {
            enter(&ep.tx_ns)?;
            let pool = BufferPool::new(4096, 2048);
            let mut link: Box<dyn Link> = match ep.tx_link {
                TxLink::AfPacket => Box::new(AfPacket::open(&ep.tx_dev, pool.clone())?),
                TxLink::AfXdp => {
                    let tx_frames = if ep.tx_inflight > 0 {
                        ep.tx_inflight
                    } else {
                        2048
                    };
                    let mut l = AfXdpLink::with_config(
                        &ep.tx_dev,
                        pool.clone(),
                        XdpConfig {
                            // Host A receives nothing of ours; a small receive side.
                            rx_frames: 64,
                            tx_frames,
                            mode: XdpMode::Generic,
                            ..XdpConfig::default()
                        },
                    )?;
                    // A flat-out burst in one system call where the kernel allows
                    // it (6.17+); 32 per call otherwise.
                    let _ = l.set_tx_budget((FLAT_OUT_BURST as u32).min(tx_frames));
                    if ep.tx_inflight > 0 {
                        // The completion ring is the budget: each frame holds a slot
                        // from the send call until its skb is freed. 8 KiB a frame
                        // (the kernel doubles it) is above any frame's skb truesize
                        // up to 1 518 B, so the send buffer never binds first.
                        l.set_send_buffer((ep.tx_inflight * 8192) as i32)?;
                    } else if ep.tx_sndbuf_mib > 0 {
                        l.set_send_buffer((ep.tx_sndbuf_mib << 20) as i32)?;
                    }
                    Box::new(l)
                }
            };
            let tpl = template(&ep, link.info().mac, size);
            let wait_ready = Instant::now();
            while !ready.load(Ordering::Acquire) && wait_ready.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(1));
            }
            let cpu_before = busy_ticks_now();
            let start = Instant::now();
            let mut sent = 0u64;
            let mut tx: Vec<PacketBuf> = Vec::with_capacity(FLAT_OUT_BURST);
            while start.elapsed() < duration {
                let due = match rate {
                    Some(r) => (start.elapsed().as_secs_f64() * r) as u64,
                    None => sent + FLAT_OUT_BURST as u64,
                };
                if due < sent + PACED_BURST as u64 && tx.is_empty() {
                    // Send in bursts of 32 and sleep until the next burst is due, so
                    // the sender leaves the core to the receiver in between.
                    if let Some(r) = rate {
                        let next = (sent + PACED_BURST as u64) as f64 / r;
                        let ahead = next - start.elapsed().as_secs_f64();
                        if ahead > 60e-6 {
                            std::thread::sleep(Duration::from_secs_f64(ahead - 50e-6));
                        } else {
                            std::thread::yield_now();
                        }
                    }
                    if due <= sent {
                        continue;
                    }
                }
                let burst = if rate.is_some() {
                    PACED_BURST
                } else {
                    FLAT_OUT_BURST
                };
                let want = (due.saturating_sub(sent) as usize).min(burst);
                while tx.len() < want {
                    let Some(mut b) = pool.alloc() else { break };
                    if b.copy_from(&tpl) {
                        b[46..50].copy_from_slice(&tag.to_be_bytes());
                        let ts = wall_ns();
                        b[50..58].copy_from_slice(&ts.to_be_bytes());
                        tx.push(b);
                    }
                }
                let before = tx.len();
                link.send_burst(&mut tx)?;
                sent += (before - tx.len()) as u64;
                // The receiver may share this core: let it run, or a flat-out sender
                // starves it and its losses would be charged to the forwarder.
                std::thread::yield_now();
            }
            let secs = start.elapsed().as_secs_f64();
            // Let the ring empty before closing the socket.
            std::thread::sleep(Duration::from_millis(20));
            let cpu = busy_ns_between(&cpu_before, &busy_ticks_now());
            done.store(true, Ordering::Release);
            Ok((sent, sent as f64 / secs, cpu))
        })
    };
    let tx = tx_thread
        .join()
        .map_err(|_| io::Error::other("sender panicked"))?;
    done.store(true, Ordering::Release);
    let rx = rx_thread
        .join()
        .map_err(|_| io::Error::other("receiver panicked"))?;
    let (sent, tx_pps, cpu_busy_ns) = tx?;
    let (received, receiver_dropped, latency_ns, read_latency_ns) = rx?;
    Ok(Trial {
        sent,
        received,
        receiver_dropped,
        tx_pps,
        latency_ns,
        read_latency_ns,
        cpu_busy_ns,
    })
}

/// RFC 2544 throughput for one frame size: binary search for the highest rate with no
/// loss, between 0 and what the sender manages flat out. Returns (the rate the sender
/// reached in the best lossless trial, that trial, the flat-out trial).
pub fn zero_loss(
    ep: &Endpoints,
    size: usize,
    trial_len: Duration,
    steps: u32,
) -> io::Result<(f64, Trial, Trial)> {
    let flat_out = trial(ep, size, None, trial_len)?;
    if flat_out.lost() == 0 {
        return Ok((flat_out.tx_pps, flat_out.clone(), flat_out));
    }
    let (mut lo, mut hi) = (0.0, flat_out.tx_pps);
    let mut best = Trial::default();
    for _ in 0..steps {
        let mid = (lo + hi) / 2.0;
        let t = trial(ep, size, Some(mid), trial_len)?;
        if t.lost() == 0 && t.sent > 0 {
            lo = mid;
            best = t;
        } else {
            hi = mid;
        }
    }
    // The rate the sender reached, not the one asked for: near its flat-out rate a
    // paced sender (32 frames per call) falls a few percent short, and the offered
    // load is what passed.
    let rate = if best.sent > 0 {
        best.tx_pps.min(lo)
    } else {
        lo
    };
    Ok((rate, best, flat_out))
}

/// `--tx-inflight`: 0, or a power of two from 32 to 2048 (an `AF_XDP` ring size).
fn parse_inflight(s: &str) -> Result<u32, String> {
    let n: u32 = s.parse().map_err(|e| format!("{e}"))?;
    if n == 0 || (n.is_power_of_two() && (32..=2048).contains(&n)) {
        Ok(n)
    } else {
        Err(format!("{n}: 0 or a power of two from 32 to 2048"))
    }
}

/// Arguments of `weft router rfc2544`.
#[derive(Debug, clap::Args)]
pub struct Rfc2544Args {
    /// Sender's namespace and interface.
    #[arg(long, default_value = "weft-ha")]
    tx_ns: String,
    #[arg(long, default_value = "weft-a0")]
    tx_dev: String,
    /// Receiver's namespace and interface.
    #[arg(long, default_value = "weft-hb")]
    rx_ns: String,
    #[arg(long, default_value = "weft-b0")]
    rx_dev: String,
    /// MAC of the forwarder's ingress port.
    #[arg(long)]
    dst_mac: String,
    #[arg(long, default_value = "198.18.1.2")]
    src_ip: Ipv4Addr,
    /// Routed towards the receiver but not owned by it (198.19.0.0/16 via host B), so
    /// the receiving host drops it silently after the capture sees it.
    #[arg(long, default_value = "198.19.0.2")]
    dst_ip: Ipv4Addr,
    /// The receiver's AF_PACKET ring: v2 (each frame seen as written) or v3 (blocks,
    /// the generator's ring before issue 18: adds up to the block timer to every
    /// latency).
    #[arg(long, default_value = "v2")]
    rx_ring: RingVersion,
    /// The sender's socket: afxdp (AF_XDP, copy mode) or afpacket (a TPACKET_V2
    /// transmit ring, the generator before §3.3g of docs/results/router.md).
    #[arg(long, default_value = "afxdp")]
    tx_link: TxLink,
    /// The AF_XDP sender's send buffer, MiB (0: the kernel's default, ~200 KiB, which
    /// lets a forwarder that queues frames slow the sender down; 64 removes that).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1024))]
    tx_sndbuf_mib: u32,
    /// The AF_XDP sender's frames in flight, a power of two from 32 to 2048 (0: the
    /// old budget, a 2048-slot ring limited by the send buffer, so ~280 frames of
    /// 64 B but ~90 of 1518 B). N: transmit and completion rings of N slots and a
    /// send buffer that never binds, so N frames at any size. Not with
    /// --tx-sndbuf-mib. Each frame's slot is freed where the kernel frees its skb,
    /// which differs between forwarders (docs/results/router.md §3.3k).
    #[arg(long, default_value_t = 0, value_parser = parse_inflight)]
    tx_inflight: u32,
    /// Frame sizes with FCS (RFC 2544 §9.1).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64,128,256,512,1024,1280,1518"
    )]
    sizes: Vec<usize>,
    /// Seconds per trial.
    #[arg(long, default_value_t = 1.0)]
    trial_secs: f64,
    /// Binary search steps.
    #[arg(long, default_value_t = 7)]
    steps: u32,
    /// Label for the output rows (the forwarder's name).
    #[arg(long, default_value = "")]
    label: String,
    /// Also measure latency at these rates (kpps), one per `--sizes` entry in order
    /// (0 skips a size): e.g. the kernel's zero-loss rates, so forwarders compare at
    /// one offered load.
    #[arg(long, value_delimiter = ',', conflicts_with = "latency_at_rows")]
    latency_at_kpps: Vec<f64>,
    /// Also measure latency at another forwarder's zero-loss rates, read from its
    /// `--json` rows in this file: the rows of `--reference` (same `--round` when
    /// given) for each frame size.
    #[arg(long)]
    latency_at_rows: Option<PathBuf>,
    /// The forwarder whose rows `--latency-at-rows` takes.
    #[arg(long, default_value = "linux kernel")]
    reference: String,
    /// The forwarder's core (CPU number), for the rows' `*_cpu_ns_per_pkt_router_core`:
    /// that core's busy time per delivered frame (scripts/router-e2e.sh: ROUTER_CPU).
    #[arg(long)]
    router_cpu: Option<usize>,
    /// Round number written into the JSON rows (scripts/router-e2e.sh alternates
    /// forwarders round by round).
    #[arg(long)]
    round: Option<u32>,
    /// One JSON object per frame size on stdout instead of the markdown table.
    #[arg(long)]
    json: bool,
}

/// One frame size's result of `weft router rfc2544 --json`.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Rfc2544Row {
    /// `--label`: who forwarded.
    pub forwarder: String,
    /// Frame size with FCS, bytes.
    pub frame: u64,
    /// Highest rate with no frame lost (RFC 2544 §26.1), thousand frames per second.
    pub zero_loss_kpps: f64,
    /// That rate in Mbit/s on the wire (frame + 20 bytes of preamble and gap).
    pub zero_loss_mbit_s: f64,
    /// Rate the generator reached sending flat out, kpps.
    pub flat_out_kpps: f64,
    /// Share of the flat-out frames that crossed the forwarder, percent.
    pub flat_out_delivered_pct: f64,
    /// One-way latency at the zero-loss rate, to the frame's arrival at the
    /// receiving host, microseconds (NaN → null when nothing crossed).
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    /// The rate of `--latency-at-kpps` for this size, and the latency and losses
    /// measured at it.
    pub at_kpps: Option<f64>,
    pub at_p50_us: Option<f64>,
    pub at_p99_us: Option<f64>,
    pub at_lost: Option<u64>,
    /// Of the frames of that trial, the share that crossed within 100 µs of being
    /// sent, percent (a low-rate probe's figure: a frame that waits for a block
    /// timer or a sleeping thread's timeout misses it).
    #[serde(default)]
    pub at_within_100us_pct: Option<f64>,
    /// The latencies above to the generator's read of each frame instead of its
    /// arrival (what `p50_us`/`p99_us` meant before: arrival plus the reader's
    /// wake-up on the core it shares with the sender).
    #[serde(default)]
    pub read_p50_us: Option<f64>,
    #[serde(default)]
    pub read_p99_us: Option<f64>,
    #[serde(default)]
    pub at_read_p50_us: Option<f64>,
    #[serde(default)]
    pub at_read_p99_us: Option<f64>,
    /// The rate the sender reached in the latency trial at the zero-loss rate, and
    /// in the trial at `at_kpps`, kpps: a paced sender that cannot keep up with the
    /// rate asked for shows it here.
    #[serde(default)]
    pub sent_kpps: Option<f64>,
    #[serde(default)]
    pub at_sent_kpps: Option<f64>,
    /// CPU time per delivered frame, nanoseconds, in the latency trial at the
    /// zero-loss rate: the busy time (`/proc/stat`: user + nice + system + irq +
    /// softirq) of **all cores, the generator's included** (its sender, receiver and
    /// host B's receive path as well as the forwarder), over the trial, divided by
    /// the frames that crossed. Resolution: 10 ms ticks (about 1 % of a 1-s trial
    /// on two cores). The kernel samples these at its timer tick: without
    /// `CONFIG_IRQ_TIME_ACCOUNTING` (this project's VM) softirq work that a core
    /// otherwise idle runs with its tick stopped (`NO_HZ_IDLE`), e.g. RPS backlog
    /// work on a forwarder's core that nothing else keeps awake, is under-counted.
    #[serde(default)]
    pub cpu_ns_per_pkt_all: Option<f64>,
    /// The same for the forwarder's core alone (`--router-cpu`; work there that is
    /// not forwarding, e.g. host B's receive when the forwarder's transmit runs it,
    /// counts too).
    #[serde(default)]
    pub cpu_ns_per_pkt_router_core: Option<f64>,
    /// `cpu_ns_per_pkt_all` and `_router_core` in the flat-out trial.
    #[serde(default)]
    pub flat_out_cpu_ns_per_pkt_all: Option<f64>,
    #[serde(default)]
    pub flat_out_cpu_ns_per_pkt_router_core: Option<f64>,
    /// `cpu_ns_per_pkt_all` and `_router_core` in the trial at `at_kpps`.
    #[serde(default)]
    pub at_cpu_ns_per_pkt_all: Option<f64>,
    #[serde(default)]
    pub at_cpu_ns_per_pkt_router_core: Option<f64>,
    /// Seconds per trial.
    pub trial_secs: f64,
    /// `--round`.
    pub round: Option<u32>,
}

/// `reference`'s zero-loss rate (kpps) for each of `sizes`, from JSON rows (other
/// lines are skipped): the row of that forwarder, frame size and, when given, round;
/// 0 (no latency trial) for a size it has no row for.
fn reference_rates(
    text: &str,
    reference: &str,
    round: Option<u32>,
    sizes: &[usize],
) -> anyhow::Result<Vec<f64>> {
    let rows: Vec<Rfc2544Row> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Rfc2544Row>(l).ok())
        .filter(|r| r.forwarder == reference && (round.is_none() || r.round == round))
        .collect();
    if rows.is_empty() {
        bail!("--latency-at-rows: no rows of {reference:?} (round {round:?})");
    }
    Ok(sizes
        .iter()
        .map(|&s| {
            rows.iter()
                .rev()
                .find(|r| r.frame == s as u64)
                .map_or(0.0, |r| r.zero_loss_kpps)
        })
        .collect())
}

/// A latency percentile as JSON wants it: `None` for NaN (nothing received).
fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

/// Runs `weft router rfc2544`.
pub fn run_rfc2544(mut a: Rfc2544Args) -> anyhow::Result<()> {
    if a.tx_inflight > 0 && a.tx_sndbuf_mib > 0 {
        // One would silently override the other (scripts/router-e2e.sh passes
        // --tx-inflight 256 unless TX_INFLIGHT=0).
        bail!("--tx-inflight and --tx-sndbuf-mib set the same budget: give one of them (--tx-inflight 0 for the send buffer)");
    }
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = a.dst_mac.trim().split(':').collect();
    if parts.len() != 6 {
        bail!("--dst-mac: expected aa:bb:cc:dd:ee:ff");
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).context("--dst-mac")?;
    }
    let ep = Endpoints {
        tx_ns: std::mem::take(&mut a.tx_ns),
        tx_dev: std::mem::take(&mut a.tx_dev),
        rx_ns: std::mem::take(&mut a.rx_ns),
        rx_dev: std::mem::take(&mut a.rx_dev),
        dst_mac: EthernetAddress(mac),
        src_ip: a.src_ip,
        dst_ip: a.dst_ip,
        rx_ring: a.rx_ring,
        tx_link: a.tx_link,
        tx_sndbuf_mib: a.tx_sndbuf_mib,
        tx_inflight: a.tx_inflight,
    };
    let len = Duration::from_secs_f64(a.trial_secs.max(0.1));
    if let Some(path) = &a.latency_at_rows {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--latency-at-rows {}", path.display()))?;
        a.latency_at_kpps = reference_rates(&text, &a.reference, a.round, &a.sizes)?;
    }
    if !a.latency_at_kpps.is_empty() && a.latency_at_kpps.len() != a.sizes.len() {
        bail!(
            "--latency-at-kpps: {} rates for {} sizes; give one per size (0 skips)",
            a.latency_at_kpps.len(),
            a.sizes.len()
        );
    }
    // Warm-up: let the forwarder resolve the next hop.
    let _ = trial(&ep, 60, Some(1000.0), Duration::from_millis(300))?;
    if !a.json {
        println!("| forwarder | frame (B) | zero-loss rate (kpps) | Mbit/s | flat-out sent (kpps) | flat-out delivered | latency p50 (us) | p99 (us) |");
        println!("|---|---|---|---|---|---|---|---|");
    }
    for (k, &size) in a.sizes.iter().enumerate() {
        eprintln!("rfc2544 {}: {size} B", a.label);
        let (rate, at, flat) = zero_loss(&ep, size.saturating_sub(4), len, a.steps)?;
        // Latency at the zero-loss rate, from a trial of its own.
        let lat = if rate > 0.0 {
            trial(&ep, size.saturating_sub(4), Some(rate), len)?
        } else {
            at
        };
        let at_kpps = a.latency_at_kpps.get(k).copied().filter(|&r| r > 0.0);
        let at_trial = match at_kpps {
            Some(r) => Some(trial(&ep, size.saturating_sub(4), Some(r * 1e3), len)?),
            None => None,
        };
        let row = Rfc2544Row {
            forwarder: a.label.clone(),
            frame: size as u64,
            zero_loss_kpps: rate / 1e3,
            zero_loss_mbit_s: rate * (size as f64 + 20.0) * 8.0 / 1e6,
            flat_out_kpps: flat.tx_pps / 1e3,
            flat_out_delivered_pct: 100.0 * flat.delivered_share(),
            p50_us: finite(lat.latency_us(50.0)),
            p99_us: finite(lat.latency_us(99.0)),
            at_kpps,
            at_p50_us: at_trial.as_ref().and_then(|t| finite(t.latency_us(50.0))),
            at_p99_us: at_trial.as_ref().and_then(|t| finite(t.latency_us(99.0))),
            at_lost: at_trial.as_ref().map(Trial::lost),
            at_within_100us_pct: at_trial.as_ref().and_then(|t| finite(t.within_us(100.0))),
            read_p50_us: finite(lat.read_latency_us(50.0)),
            read_p99_us: finite(lat.read_latency_us(99.0)),
            at_read_p50_us: at_trial
                .as_ref()
                .and_then(|t| finite(t.read_latency_us(50.0))),
            at_read_p99_us: at_trial
                .as_ref()
                .and_then(|t| finite(t.read_latency_us(99.0))),
            sent_kpps: (lat.sent > 0).then(|| lat.tx_pps / 1e3),
            at_sent_kpps: at_trial.as_ref().map(|t| t.tx_pps / 1e3),
            cpu_ns_per_pkt_all: lat.cpu_ns_per_pkt(None),
            cpu_ns_per_pkt_router_core: a.router_cpu.and_then(|c| lat.cpu_ns_per_pkt(Some(c))),
            flat_out_cpu_ns_per_pkt_all: flat.cpu_ns_per_pkt(None),
            flat_out_cpu_ns_per_pkt_router_core: a
                .router_cpu
                .and_then(|c| flat.cpu_ns_per_pkt(Some(c))),
            at_cpu_ns_per_pkt_all: at_trial.as_ref().and_then(|t| t.cpu_ns_per_pkt(None)),
            at_cpu_ns_per_pkt_router_core: at_trial
                .as_ref()
                .zip(a.router_cpu)
                .and_then(|(t, c)| t.cpu_ns_per_pkt(Some(c))),
            trial_secs: len.as_secs_f64(),
            round: a.round,
        };
        if a.json {
            println!("{}", serde_json::to_string(&row)?);
        } else {
            println!(
                "| {} | {size} | {:.1} | {:.1} | {:.1} | {:.1}% | {:.0} | {:.0} |",
                row.forwarder,
                row.zero_loss_kpps,
                row.zero_loss_mbit_s,
                row.flat_out_kpps,
                row.flat_out_delivered_pct,
                lat.latency_us(50.0),
                lat.latency_us(99.0),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_inflight_takes_zero_or_a_ring_size() {
        for ok in ["0", "32", "256", "2048"] {
            assert_eq!(parse_inflight(ok), Ok(ok.parse().unwrap()), "{ok}");
        }
        for bad in ["16", "300", "4096", "-1", "x", ""] {
            assert!(parse_inflight(bad).is_err(), "{bad}");
        }
    }

    fn row(who: &str, frame: u64, round: Option<u32>, kpps: f64) -> String {
        serde_json::to_string(&Rfc2544Row {
            forwarder: who.into(),
            frame,
            zero_loss_kpps: kpps,
            zero_loss_mbit_s: 0.0,
            flat_out_kpps: 0.0,
            flat_out_delivered_pct: 0.0,
            p50_us: None,
            p99_us: None,
            at_kpps: None,
            at_p50_us: None,
            at_p99_us: None,
            at_lost: None,
            at_within_100us_pct: None,
            trial_secs: 1.0,
            round,
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn proc_stat_busy_time_is_user_nice_system_irq_softirq_per_core() {
        let text = "cpu  10 20 30 4000 50 60 70 80 0 0\n\
                    cpu0 1 2 3 1000 5 6 7 8 0 0\n\
                    cpu1 10 0 20 2000 0 30 40 99 0 0\n\
                    cpu3 1 1 1 1 1 1 1\n\
                    cpu2 short 1\n\
                    intr 12345 1 2\n\
                    ctxt 999\n";
        // cpu0: 1+2+3+6+7, not idle (1000), iowait (5) or steal (8); cpu1: 10+20+30+40;
        // cpu2 does not parse (0); cpu3 has exactly the seven fields needed.
        assert_eq!(proc_stat_busy_ticks(text), vec![19, 100, 0, 5]);
        assert!(proc_stat_busy_ticks("intr 1\n").is_empty());
    }

    #[test]
    fn cpu_per_packet_is_busy_time_over_frames_delivered() {
        // 1 s trial: core 0 busy 30 ticks more, core 1 70 more; a third core appeared.
        let ns = busy_ns_between(&[100, 200], &[130, 270, 5]);
        assert_eq!(ns, vec![300_000_000, 700_000_000, 0]);
        // Counters never go back; if one seems to, it counts 0, not a wrap.
        assert_eq!(busy_ns_between(&[10], &[9]), vec![0]);
        let t = Trial {
            sent: 600_000,
            received: 400_000,
            receiver_dropped: 100_000,
            cpu_busy_ns: ns,
            ..Trial::default()
        };
        // 1 s of busy time over 500 000 delivered frames (the receiver's own drops
        // crossed the forwarder): 2 000 ns; core 1 alone: 1 400 ns.
        assert_eq!(t.cpu_ns_per_pkt(None), Some(2000.0));
        assert_eq!(t.cpu_ns_per_pkt(Some(1)), Some(1400.0));
        assert_eq!(t.cpu_ns_per_pkt(Some(7)), None, "no such core");
        let none = Trial {
            cpu_busy_ns: vec![1, 2],
            ..Trial::default()
        };
        assert_eq!(none.cpu_ns_per_pkt(None), None, "nothing crossed");
        let no_cpu = Trial {
            received: 5,
            ..Trial::default()
        };
        assert_eq!(no_cpu.cpu_ns_per_pkt(None), None, "no /proc/stat");
    }

    #[test]
    fn reference_rates_take_the_forwarders_row_of_the_round_per_size() {
        let text = [
            row("linux kernel", 64, Some(1), 100.0),
            row("linux kernel", 1518, Some(1), 50.0),
            row("weft push", 64, Some(1), 70.0),
            "not json".to_owned(),
            row("linux kernel", 64, Some(2), 120.0),
        ]
        .join("\n");
        let k = "linux kernel";
        assert_eq!(
            reference_rates(&text, k, Some(1), &[64, 128, 1518]).unwrap(),
            vec![100.0, 0.0, 50.0]
        );
        assert_eq!(
            reference_rates(&text, k, Some(2), &[64]).unwrap(),
            vec![120.0]
        );
        // Without a round, the last row of that size.
        assert_eq!(reference_rates(&text, k, None, &[64]).unwrap(), vec![120.0]);
        assert!(reference_rates(&text, k, Some(3), &[64]).is_err());
        assert!(reference_rates(&text, "nobody", None, &[64]).is_err());
    }
}
