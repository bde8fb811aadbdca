//! A deterministic network simulator: seeded fault-injecting links in virtual time, and
//! a two-endpoint harness (`Pair`) in the shape of quinn-proto's test pair — `step`
//! jumps time to the next event, `drive` runs until a condition holds.
//!
//! Nothing here reads a clock or an OS random source: a seed and the inputs decide
//! every run, so any failure replays exactly.

use crate::endpoint::{Config, Endpoint, QpInit, Transmit, TxBuffers, MAX_OVERHEAD};
use crate::memory::{Access, VecMemory};
use crate::qp::{Bringup, Mtu, QpType, Recovery};
use crate::time::Instant;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;
use weft_wire::roce::IcrcPath;

/// A small, fast, seedable generator (xoshiro256**, seeded through splitmix64).
///
/// Hand-rolled rather than `rand::SmallRng` on purpose: `SmallRng`'s algorithm may
/// change between `rand` releases, and the sweep table in `docs/results/` is a snapshot
/// that must replay bit for bit.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// Uniform in `[lo, hi)` (`lo` when empty).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo)
        }
    }
}

/// Faults and shape of one direction of a link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// Probability a packet is lost.
    pub loss: f64,
    /// Probability a packet is delivered twice.
    pub duplicate: f64,
    /// Probability a packet is held back by `reorder_delay_us` (so later ones pass it).
    pub reorder: f64,
    /// Extra delay of a reordered packet.
    pub reorder_delay_us: u64,
    /// Probability one byte of a packet is flipped.
    pub corrupt: f64,
    /// One-way propagation delay.
    pub delay_us: u64,
    /// Uniform extra delay in `[0, jitter_us]` (can reorder too).
    pub jitter_us: u64,
    /// Line rate in bytes per microsecond (1250 = 10 Gbit/s); 0 = unlimited.
    pub rate_bytes_per_us: u64,
    /// Largest UDP payload the link carries; larger packets are dropped.
    pub mtu: usize,
    /// Bytes the transmit queue holds (a switch port's buffer); a packet that finds
    /// it full is dropped (tail drop, [`LinkStats::queue_drops`]). 0: unbounded.
    /// Only a link with a line rate has a queue.
    pub queue_limit_bytes: u64,
}

impl Default for LinkConfig {
    fn default() -> LinkConfig {
        LinkConfig {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay_us: 20,
            corrupt: 0.0,
            delay_us: 5,
            jitter_us: 0,
            rate_bytes_per_us: 1250,
            mtu: 4096 + MAX_OVERHEAD,
            queue_limit_bytes: 0,
        }
    }
}

impl LinkConfig {
    /// A lossless link with `delay_us` one-way delay at 10 Gbit/s.
    pub fn clean(delay_us: u64) -> LinkConfig {
        LinkConfig {
            delay_us,
            ..LinkConfig::default()
        }
    }

    /// Same link with random loss `p`.
    pub fn with_loss(mut self, p: f64) -> LinkConfig {
        self.loss = p;
        self
    }
}

/// What a link did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct LinkStats {
    pub sent: u64,
    pub delivered: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    pub too_big: u64,
    /// Dropped because the transmit queue was full ([`LinkConfig::queue_limit_bytes`]).
    pub queue_drops: u64,
    /// The most bytes the transmit queue held (waiting or being serialised), the
    /// packet just queued included.
    pub max_queue_bytes: u64,
    /// The sum, over the packets that joined the queue, of the bytes each found
    /// queued (itself included): divided by `queued`, the mean occupancy an arriving
    /// packet sees.
    pub queued_bytes_total: u64,
    /// Packets that joined the queue (not dropped by it).
    pub queued: u64,
}

/// One direction of a simulated wire: serialises at the line rate, then applies delay
/// and the configured faults. A wrapper with a seed, not a separate world.
#[derive(Debug)]
pub struct Link {
    /// Faults and shape.
    pub config: LinkConfig,
    rng: Rng,
    busy_until_ns: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    packets: std::collections::HashMap<u64, (Vec<u8>, IcrcPath)>,
    /// Counters.
    pub stats: LinkStats,
    /// Drop exactly these packets (numbered from 1 in sending order): targeted loss for
    /// tests that need one specific packet gone.
    pub drop_nth: std::collections::BTreeSet<u64>,
}

impl Link {
    /// A link with its own seed.
    pub fn new(config: LinkConfig, seed: u64) -> Link {
        Link {
            config,
            rng: Rng::new(seed),
            busy_until_ns: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            packets: std::collections::HashMap::new(),
            stats: LinkStats::default(),
            drop_nth: std::collections::BTreeSet::new(),
        }
    }

    /// True when the transmitter is free (within one microsecond) at `now`: the
    /// harness polls an endpoint only then, like a NIC with a short TX ring.
    pub fn can_send(&self, now: Instant) -> bool {
        self.busy_until_ns <= now.micros() * 1000 + 1000
    }

    /// When the transmitter frees up.
    pub fn free_at(&self) -> Instant {
        Instant((self.busy_until_ns.saturating_sub(1000)).div_ceil(1000))
    }

    fn enqueue(&mut self, at_ns: u64, bytes: Vec<u8>, path: IcrcPath) {
        self.seq += 1;
        self.queue.push(Reverse((at_ns, self.seq)));
        self.packets.insert(self.seq, (bytes, path));
    }

    /// Put a packet on the wire at `now`.
    pub fn send(&mut self, now: Instant, path: IcrcPath, bytes: &[u8]) {
        self.stats.sent += 1;
        let now_ns = now.micros() * 1000;
        let rate = self.config.rate_bytes_per_us;
        if rate > 0 {
            // Bytes still to serialise: the queue this packet joins.
            let backlog = self
                .busy_until_ns
                .saturating_sub(now_ns)
                .saturating_mul(rate)
                / 1000;
            let occupancy = backlog.saturating_add(bytes.len() as u64);
            let limit = self.config.queue_limit_bytes;
            if limit > 0 && occupancy > limit {
                self.stats.queue_drops += 1;
                return;
            }
            self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(occupancy);
            self.stats.queued_bytes_total = self.stats.queued_bytes_total.saturating_add(occupancy);
            self.stats.queued += 1;
        }
        let start = self.busy_until_ns.max(now_ns);
        let ser = match rate {
            0 => 0,
            r => (bytes.len() as u64 * 1000).div_ceil(r),
        };
        self.busy_until_ns = start + ser;
        if bytes.len() > self.config.mtu {
            self.stats.too_big += 1;
            return;
        }
        if self.drop_nth.remove(&self.stats.sent) || self.rng.chance(self.config.loss) {
            self.stats.lost += 1;
            return;
        }
        let mut data = bytes.to_vec();
        if self.rng.chance(self.config.corrupt) && !data.is_empty() {
            let i = self.rng.range(0, data.len() as u64) as usize;
            data[i] ^= 1 << self.rng.range(0, 8);
            self.stats.corrupted += 1;
        }
        let mut at = self.busy_until_ns + self.config.delay_us * 1000;
        if self.config.jitter_us > 0 {
            at += self.rng.range(0, self.config.jitter_us * 1000 + 1);
        }
        if self.rng.chance(self.config.reorder) {
            at += self.config.reorder_delay_us * 1000;
            self.stats.reordered += 1;
        }
        if self.rng.chance(self.config.duplicate) {
            self.stats.duplicated += 1;
            let extra = self.rng.range(0, 3000);
            self.enqueue(at + extra, data.clone(), path);
        }
        self.enqueue(at, data, path);
    }

    /// When the next packet arrives.
    pub fn next_arrival(&self) -> Option<Instant> {
        self.queue
            .peek()
            .map(|Reverse((at, _))| Instant(at.div_ceil(1000)))
    }

    /// A packet that has arrived by `now`.
    pub fn receive(&mut self, now: Instant) -> Option<(IcrcPath, Vec<u8>)> {
        let Reverse((at, seq)) = *self.queue.peek()?;
        if at > now.micros() * 1000 {
            return None;
        }
        self.queue.pop();
        let (bytes, path) = self.packets.remove(&seq)?;
        self.stats.delivered += 1;
        Some((path, bytes))
    }

    /// Packets on the wire.
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }
}

/// Which side of a [`Pair`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Endpoint A.
    A,
    /// Endpoint B.
    B,
}

/// A packet as [`Pair::step_with`] shows it to its observer.
#[derive(Debug, Clone, Copy)]
pub enum Seen<'a> {
    /// An endpoint handed `bytes` to its link at `now`.
    Sent {
        /// The sender.
        from: Side,
        /// When.
        now: Instant,
        /// The packet.
        bytes: &'a [u8],
    },
    /// The link delivered `bytes` to an endpoint at `now` (before it handles them).
    Arrived {
        /// The receiver.
        to: Side,
        /// When.
        now: Instant,
        /// The packet.
        bytes: &'a [u8],
    },
}

/// Two endpoints joined by two links.
#[derive(Debug)]
pub struct Pair {
    /// Endpoint A (10.0.0.1).
    pub a: Endpoint<VecMemory>,
    /// Endpoint B (10.0.0.2).
    pub b: Endpoint<VecMemory>,
    /// A → B.
    pub ab: Link,
    /// B → A.
    pub ba: Link,
    /// Virtual time.
    pub now: Instant,
    buf: Vec<u8>,
    /// Transmit through [`Endpoint::poll_transmit_burst`], at most this many packets a
    /// call ([`Pair::transmit_in_bursts`]); `None`: one `poll_transmit` a packet.
    burst: Option<usize>,
    /// Packet by packet through [`Endpoint::poll_transmit_alone`], naming the slots
    /// `0..k` in turn ([`Pair::transmit_alone`]); `None`: `poll_transmit`.
    alone: Option<u32>,
    /// The next slot `alone` names.
    alone_next: u32,
    /// The shm rings of ring mode ([`Pair::use_rings`]), once a connection uses them.
    rings: Option<rings::Rings>,
}

/// [`Pair::step_with`]'s transmit, packet by packet or in bursts: the pair's one
/// buffer, lent while the side's link can send, each packet put on the link as it is
/// written.
struct SimTx<'a> {
    link: &'a mut Link,
    buf: &'a mut [u8],
    seen: &'a mut dyn FnMut(Seen<'_>),
    side: Side,
    now: Instant,
    left: usize,
    blocked: &'a mut Option<Instant>,
    /// Where ring-mode descriptors go ([`Transmit::ring`]), and which way.
    rings: Option<&'a mut rings::Rings>,
}

impl TxBuffers for SimTx<'_> {
    fn next_buffer(&mut self) -> Option<&mut [u8]> {
        if self.left == 0 {
            return None;
        }
        if !self.link.can_send(self.now) {
            let f = self.link.free_at();
            *self.blocked = Some(self.blocked.map_or(f, |b| b.min(f)));
            return None;
        }
        Some(&mut self.buf[..])
    }

    fn written(&mut self, t: Transmit) -> bool {
        let bytes = &self.buf[..t.len];
        (self.seen)(Seen::Sent {
            from: self.side,
            now: self.now,
            bytes,
        });
        match (t.ring, self.rings.as_deref_mut()) {
            (Some(tag), Some(r)) => {
                r.push(self.side == Side::A, self.now, bytes, Some(tag));
            }
            // A descriptor with no ring to take it goes on the wire, where the peer
            // counts it as a packet it cannot parse.
            _ => self.link.send(self.now, t.path, bytes),
        }
        self.left -= 1;
        self.left > 0
    }
}

/// Address of endpoint A.
pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// Address of endpoint B.
pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Options for [`Pair::connect`].
#[derive(Debug, Clone, Copy)]
pub struct ConnectOptions {
    /// Path MTU.
    pub mtu: Mtu,
    /// Recovery mode (RC).
    pub recovery: Recovery,
    /// PSNs in flight cap.
    pub max_inflight: u32,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// Transport retries.
    pub retry_cnt: u8,
    /// RNR retries.
    pub rnr_retry: u8,
    /// RNR timer code.
    pub min_rnr_timer: u8,
    /// READ/atomic depth both ways.
    pub rd_atomic: u8,
    /// Remote rights both QPs grant.
    pub access: Access,
    /// First PSN A sends (B's rq_psn) — the reverse direction uses `psn_b`.
    pub psn_a: u32,
    /// First PSN B sends.
    pub psn_b: u32,
    /// Send / receive queue depth.
    pub depth: usize,
    /// Use an SRQ on B.
    pub srq_b: bool,
    /// Each side learns the other's delayed-ACK bound ([`Config::ack_delay_us`]), as
    /// weft's connection manager tells it ([`crate::QpAttrs::peer_ack_delay_us`]).
    /// False: as toward a peer that never said (Linux rdma_rxe), so every message
    /// asks for its ACK.
    pub announce_ack_delay: bool,
}

impl Default for ConnectOptions {
    fn default() -> ConnectOptions {
        ConnectOptions {
            mtu: Mtu::M1024,
            recovery: Recovery::GoBackN,
            max_inflight: 64,
            timeout: 5,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            rd_atomic: 16,
            access: Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
            psn_a: 0xff_fff0, // close to the wrap, so every test crosses it
            psn_b: 0x12_3456,
            depth: 4096,
            srq_b: false,
            announce_ack_delay: true,
        }
    }
}

/// The two QPs [`Pair::connect`] created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Connection {
    /// QP on A.
    pub qpn_a: u32,
    /// QP on B.
    pub qpn_b: u32,
    /// B's SRQ, if any.
    pub srq_b: Option<u32>,
}

impl Pair {
    /// Two endpoints with `mem_size`-byte memories; links seeded from `seed`.
    pub fn new(config: Config, mem_size: usize, ab: LinkConfig, ba: LinkConfig, seed: u64) -> Pair {
        let mut rng = Rng::new(seed);
        let mut ca = config.clone();
        ca.qpn_seed = rng.next_u64();
        let mut cb = config;
        cb.qpn_seed = rng.next_u64();
        Pair {
            a: Endpoint::new(
                ca,
                VecMemory::new(0x10_0000, mem_size, 0xEE, rng.next_u64() as u32),
            ),
            b: Endpoint::new(
                cb,
                VecMemory::new(0x80_0000, mem_size, 0xDD, rng.next_u64() as u32),
            ),
            ab: Link::new(ab, rng.next_u64()),
            ba: Link::new(ba, rng.next_u64()),
            now: Instant::ZERO,
            buf: vec![0; 4096 + MAX_OVERHEAD],
            burst: None,
            alone: None,
            alone_next: 0,
            rings: None,
        }
    }

    /// Put connection `c`'s two QPs in the shm ring mode ([`crate::ring`]): their SENDs
    /// and WRITEs of up to one MTU travel as descriptors through a ring each way, which
    /// loses and corrupts nothing; the consumer takes each item `delay_us` after its
    /// push plus a seeded lag of up to `lag_us` (in order). READs, atomics and longer
    /// messages still take the links, with their faults. The rings are made by the first
    /// call (later calls keep them); `seed` seeds the lag.
    pub fn use_rings(&mut self, c: &Connection, delay_us: u64, lag_us: u64, seed: u64) {
        assert!(self.a.set_ring_mode(c.qpn_a, true) && self.b.set_ring_mode(c.qpn_b, true));
        if self.rings.is_none() {
            self.rings = Some(rings::Rings::new(delay_us, lag_us, seed));
        }
    }

    /// What the rings carried ([`Pair::use_rings`]; `None` without rings).
    pub fn ring_stats(&self) -> Option<RingStats> {
        self.rings.as_ref().map(|r| r.stats)
    }

    /// The shm connection dies: what is on the rings is gone, and each side learns that
    /// its descriptors not yet released never will be.
    pub fn kill_rings(&mut self) {
        if let Some(r) = &mut self.rings {
            r.kill();
        }
    }

    /// Let both endpoints transmit in bursts of at most `k` packets a call
    /// ([`Endpoint::poll_transmit_burst`]), or packet by packet (`None`, the default).
    /// The packets must be the same either way; a test compares the two.
    pub fn transmit_in_bursts(&mut self, k: Option<usize>) {
        self.burst = k.map(|k| k.max(1));
    }

    /// Let both endpoints transmit packet by packet through
    /// [`Endpoint::poll_transmit_alone`], each call naming the next of the slots
    /// `0..k` in turn (a guess that is sometimes the lone queued QP's, sometimes
    /// another's or none), or through `poll_transmit` (`None`, the default). The
    /// packets must be the same either way; a test compares the two.
    pub fn transmit_alone(&mut self, k: Option<u32>) {
        self.alone = k.map(|k| k.max(1));
    }

    /// The path from `side` to the other side.
    pub fn path(side: Side, qpn: u32) -> IcrcPath {
        // RoCEv2 puts flow entropy in the UDP source port; derive it from the QPN.
        let port = 0xc000 | (qpn as u16 & 0x3fff);
        match side {
            Side::A => IcrcPath::v4(ADDR_A, ADDR_B, port),
            Side::B => IcrcPath::v4(ADDR_B, ADDR_A, port),
        }
    }

    /// Create and connect a QP on each side (RESET → INIT → RTR → RTS), both in
    /// protection domain 1.
    pub fn connect(&mut self, qp_type: QpType, o: &ConnectOptions) -> Connection {
        let srq_b = o.srq_b.then(|| self.b.create_srq(1, o.depth));
        let init = |srq| QpInit {
            qp_type,
            pd: 1,
            max_send_wr: o.depth,
            max_recv_wr: o.depth,
            srq,
        };
        let qpn_a = self.a.create_qp(init(None)).expect("create");
        let qpn_b = self.b.create_qp(init(srq_b)).expect("create");
        // Both endpoints run one `Config` (`Pair::new`), so the peer's bound is A's.
        let peer_ack_delay_us = if o.announce_ack_delay {
            u32::try_from(self.a.config().ack_delay_us).unwrap_or(u32::MAX)
        } else {
            0
        };
        let setup =
            |ep: &mut Endpoint<VecMemory>, me: u32, peer: u32, side: Side, rq: u32, sq: u32| {
                let b = Bringup {
                    access: o.access,
                    qkey: 0x1111_1111,
                    path_mtu: o.mtu,
                    path: Some(Pair::path(side, me)),
                    dest_qpn: peer,
                    rq_psn: rq,
                    sq_psn: sq,
                    max_rd_atomic: o.rd_atomic,
                    max_dest_rd_atomic: o.rd_atomic,
                    min_rnr_timer: o.min_rnr_timer,
                    timeout: o.timeout,
                    retry_cnt: o.retry_cnt,
                    rnr_retry: o.rnr_retry,
                    recovery: o.recovery,
                    max_inflight: o.max_inflight,
                    peer_ack_delay_us,
                };
                for s in &b.steps(qp_type) {
                    ep.modify_qp(me, s).expect("modify");
                }
            };
        setup(&mut self.a, qpn_a, qpn_b, Side::A, o.psn_b, o.psn_a);
        setup(&mut self.b, qpn_b, qpn_a, Side::B, o.psn_a, o.psn_b);
        Connection {
            qpn_a,
            qpn_b,
            srq_b,
        }
    }

    /// Do everything due at the current time; if nothing was, jump to the next event.
    /// Returns false when nothing will ever happen again (idle, no timers).
    pub fn step(&mut self) -> bool {
        self.step_with(None, &mut |_| {})
    }

    /// [`Pair::step`], showing `seen` every packet an endpoint sends and every packet
    /// the link delivers, and jumping no further than `until` when nothing is due
    /// (then it returns false only once time has reached `until`). The tests that
    /// check what travels (AckReq bits, when ACKs leave) drive the pair with this.
    pub fn step_with(&mut self, until: Option<Instant>, seen: &mut dyn FnMut(Seen<'_>)) -> bool {
        let now = self.now;
        let mut busy = false;
        let mut blocked = None::<Instant>;
        for side in [Side::A, Side::B] {
            let (ep, link) = match side {
                Side::A => (&mut self.a, &mut self.ab),
                Side::B => (&mut self.b, &mut self.ba),
            };
            let mut out = SimTx {
                link: &mut *link,
                buf: &mut self.buf,
                seen: &mut *seen,
                side,
                now,
                left: self.burst.unwrap_or(usize::MAX),
                blocked: &mut blocked,
                rings: self.rings.as_mut(),
            };
            match self.burst {
                // Bursts of at most k packets while each comes back full.
                Some(k) => loop {
                    out.left = k;
                    let n = ep.poll_transmit_burst(now, &mut out);
                    busy |= n > 0;
                    if n < k {
                        break;
                    }
                },
                // One `poll_transmit` a packet, into the same buffer and bookkeeping.
                None => {
                    while let Some(buf) = out.next_buffer() {
                        let t = match self.alone {
                            Some(k) => {
                                let slot = self.alone_next % k;
                                self.alone_next = self.alone_next.wrapping_add(1);
                                ep.poll_transmit_alone(now, slot, buf)
                            }
                            None => ep.poll_transmit(now, buf),
                        };
                        let Some(t) = t else {
                            break;
                        };
                        out.written(t);
                        busy = true;
                    }
                }
            }
        }
        while let Some((path, bytes)) = self.ab.receive(now) {
            seen(Seen::Arrived {
                to: Side::B,
                now,
                bytes: &bytes,
            });
            self.b.handle_packet(now, &path, &bytes);
            busy = true;
        }
        while let Some((path, bytes)) = self.ba.receive(now) {
            seen(Seen::Arrived {
                to: Side::A,
                now,
                bytes: &bytes,
            });
            self.a.handle_packet(now, &path, &bytes);
            busy = true;
        }
        if let Some(r) = &mut self.rings {
            busy |= r.serve(true, &mut self.a, now);
            busy |= r.serve(false, &mut self.b, now);
        }
        for ep in [&mut self.a, &mut self.b] {
            if ep.poll_timeout().is_some_and(|t| t <= now) {
                ep.handle_timeout(now);
                busy = true;
            }
        }
        if busy {
            return true;
        }
        let next = [
            self.ab.next_arrival(),
            self.ba.next_arrival(),
            self.a.poll_timeout(),
            self.b.poll_timeout(),
            blocked,
            self.rings.as_ref().and_then(|r| r.next_event()),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|t| t.max(Instant(now.micros() + 1)));
        let next = match (next, until) {
            (Some(t), Some(u)) => Some(t.min(u)),
            (t, u) => t.or(u),
        };
        match next {
            Some(t) if t > now => {
                self.now = t;
                true
            }
            _ => false,
        }
    }

    /// Step until `done(self)` or until nothing can happen or `deadline` passes.
    /// Returns whether `done` held.
    pub fn drive(&mut self, deadline: Instant, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if self.now > deadline || !self.step() {
                return done(self);
            }
        }
    }

    /// The endpoint on `side`.
    pub fn ep(&mut self, side: Side) -> &mut Endpoint<VecMemory> {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }
}

mod rings;
pub use rings::RingStats;
mod incast;
pub use incast::{incast_table, run_incast, IncastConfig, IncastReport};
mod workload;
pub use workload::{run_mix, run_stream, MixConfig, MixReport, OpMix, StreamConfig, StreamReport};

/// One point of the goodput sweep: a 10 Gbit/s link with 20 µs one-way delay and random
/// loss `loss` in both directions, MTU 4096, 64 PSNs in flight, local ACK timeout
/// exponent 7 (≈ 524 µs); A WRITEs `messages` messages of `msg_len` bytes to B.
pub fn sweep_point(
    loss: f64,
    recovery: Recovery,
    msg_len: u32,
    messages: u64,
    seed: u64,
) -> StreamReport {
    let link = LinkConfig {
        delay_us: 20,
        ..LinkConfig::default()
    }
    .with_loss(loss);
    let window = (256 * 1024 / msg_len.max(1) as usize).clamp(2, 64);
    let mem = msg_len as usize * window + (1 << 16);
    let mut p = Pair::new(Config::default(), mem, link, link, seed);
    let o = ConnectOptions {
        mtu: Mtu::M4096,
        recovery,
        max_inflight: 64,
        timeout: 7,
        ..ConnectOptions::default()
    };
    let c = p.connect(QpType::Rc, &o);
    run_stream(
        &mut p,
        &c,
        &StreamConfig {
            msg_len,
            messages,
            window,
            time_limit_us: 60_000_000,
        },
    )
}

/// The sweep table (markdown): goodput and retransmissions for loss × mode × size.
/// `scale` divides the message counts (1 = the checked-in snapshot).
pub fn sweep_table(seed: u64, scale: u64) -> String {
    let mut out = String::from(
        "| loss | mode | message | messages | goodput (Gbit/s) | retransmitted packets | packets sent | virtual time (ms) |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for &(size, count, label) in &[(4096u32, 4000u64, "4 KiB"), (1 << 20, 32, "1 MiB")] {
        for &loss in &[0.0, 0.001, 0.01, 0.05, 0.10] {
            for &(mode, name) in &[
                (Recovery::GoBackN, "go-back-N"),
                (Recovery::Selective, "selective"),
            ] {
                let n = (count / scale.max(1)).max(2);
                let r = sweep_point(loss, mode, size, n, seed);
                out.push_str(&format!(
                    "| {:.1} % | {} | {} | {} | {:.3} | {} | {} | {:.2} |\n",
                    loss * 100.0,
                    name,
                    label,
                    r.completed,
                    r.goodput_gbps,
                    r.retransmissions,
                    r.packets,
                    r.elapsed_us as f64 / 1000.0
                ));
            }
        }
    }
    out
}

mod fuzz;
pub use fuzz::fuzz_qp_pair;
