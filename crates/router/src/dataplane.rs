//! The data plane: threads that move frames between ports, in one of three
//! architectures (the P2PNIC paper's, §3.2 and §4, done with threads and SPSC rings
//! instead of NICs and PCIe):
//!
//! - **push** (P2PNIC-Wr): each port's worker receives a burst, runs the whole
//!   pipeline (classify *and* finish), and writes the finished frame into the egress
//!   port's descriptor ring for (this ingress, that egress); one doorbell per ring per
//!   burst. The egress worker only transmits.
//! - **pull** (P2PNIC-Rd): the ingress worker only classifies (validate, LPM, next
//!   hop) and posts a descriptor; the egress worker fetches it and does the rest
//!   (TTL, checksum, MACs) before transmitting.
//! - **central** (the CPU-driven baseline): port threads only move frames between
//!   their link and a ring; every packet passes one forwarding thread.
//!
//! Rings are SPSC, one per (producer, consumer) pair, so no ring has two writers.
//!
//! Port workers: a port's "worker" above is a role; the threads that play it are
//! [`Options::workers`] port workers, each serving its share of the ports run to
//! completion (a burst from each of its ports in turn, the pipeline, then each
//! port's transmit). Between two ports of one worker there is no ring and no
//! doorbell: a frame goes straight onto the egress port's transmit list (pull's
//! egress half runs there too). The default is one worker per port up to the CPUs
//! the process may run on ([`worker_count`]): more spinning threads than CPUs only
//! take turns, spinning, yielding and waking each other through doorbells. Each port
//! keeps its own pipeline [`Worker`] (counters, neighbour cache) and link counters.
//! Central's port threads are grouped the same way; its forwarding thread stays one.
//!
//! Waiting: a thread with nothing to do polls (yielding the CPU between polls) for
//! [`Options::busy_poll`], then blocks on all of its links' descriptors and its own
//! doorbell (an eventfd, `Doorbell`) together ([`Link::arm_wait`] for more than one
//! link). A producer that posts into a sleeping
//! thread's ring rings its doorbell after the ring's own (Release) doorbell, so a
//! lone packet waits for one wake-up, never for a timeout; a frame arriving on the
//! link wakes the thread through the link's descriptor (`TPACKET_V2` rings: per
//! frame). `thread_sleeps` and `doorbell_wakeups` count both sides.
#![forbid(unsafe_code)]

use crate::counters::Counter;
use crate::fib::PortId;
use crate::pipeline::{Outbox, Router, Worker};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::str::FromStr;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use weft_link::spsc::{self, Consumer, Producer};
use weft_link::wake::{poll_raw_readable, EventFd};
use weft_link::{Armed, Link, PacketBuf};
use weft_wire::EthernetAddress;

/// How packets get from the ingress port to the egress port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Architecture {
    /// Ingress does everything and writes into the egress ring (P2PNIC-Wr).
    Push,
    /// Ingress classifies, egress fetches and finishes (P2PNIC-Rd).
    Pull,
    /// One forwarding thread for every packet (CPU-driven baseline).
    Central,
}

impl FromStr for Architecture {
    type Err = String;
    fn from_str(s: &str) -> Result<Architecture, String> {
        match s {
            "push" => Ok(Architecture::Push),
            "pull" => Ok(Architecture::Pull),
            "central" => Ok(Architecture::Central),
            _ => Err(format!("unknown architecture {s:?} (push, pull, central)")),
        }
    }
}

impl std::fmt::Display for Architecture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Architecture::Push => "push",
            Architecture::Pull => "pull",
            Architecture::Central => "central",
        })
    }
}

/// Tuning of the data plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Architecture.
    pub arch: Architecture,
    /// Frames per receive burst and per ring pop.
    pub burst: usize,
    /// Slots per descriptor ring.
    pub ring_slots: usize,
    /// Idle loops (each yielding the CPU) before napping (the cluster's
    /// interconnect thread, whose fabric has no descriptor to block on).
    pub spin_before_wait: u32,
    /// How long a port thread keeps polling (yielding the CPU between polls) after
    /// its last work before it blocks on its link and its doorbell. Longer costs CPU
    /// when traffic is sparse; shorter adds a wake-up (tens of µs) to the first
    /// frame after a pause. Zero blocks at once.
    pub busy_poll: Duration,
    /// Longest block when idle (timers: neighbour resolution, counters).
    pub wait: Duration,
    /// Port workers (threads that serve ports; push, pull and central's port
    /// threads): each serves its share of the ports, run to completion. `None`:
    /// one per port up to the CPUs this process may run on ([`worker_count`]), so
    /// a router confined to one CPU (`taskset`) runs one worker for all its ports
    /// instead of threads that take turns on it.
    pub workers: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            arch: Architecture::Push,
            burst: 32,
            ring_slots: 1024,
            spin_before_wait: 200,
            busy_poll: Duration::from_micros(50),
            wait: Duration::from_millis(10),
            workers: None,
        }
    }
}

/// How many port workers serve `ports` ports: `requested` when given (at least one,
/// at most one per port), else one per port up to `cpus`, the CPUs this process may
/// run on. More workers than CPUs would only take turns on them: spin and yield
/// against each other, and sleep and wake through doorbells, where one worker
/// hands frames from port to port directly. Zero ports, zero workers.
pub fn worker_count(requested: Option<usize>, ports: usize, cpus: usize) -> usize {
    if ports == 0 {
        return 0;
    }
    requested.unwrap_or(cpus).clamp(1, ports)
}

/// The CPUs this process may run on: its affinity mask (what `taskset` sets), as
/// [`std::thread::available_parallelism`] reads it; 1 when it cannot tell.
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// Deal `ports` out to `workers` workers in turn (port i to worker i mod workers):
/// one list of ports per worker, none empty.
pub fn assign_ports(ports: &[PortId], workers: usize) -> Vec<Vec<PortId>> {
    let workers = workers.min(ports.len());
    let mut groups = vec![Vec::new(); workers];
    for (i, &p) in ports.iter().enumerate() {
        groups[i % workers].push(p);
    }
    groups
}

/// A descriptor in a ring between threads.
#[derive(Debug)]
pub(crate) enum Desc {
    /// A finished frame: transmit as is.
    Ready(PacketBuf),
    /// A classified frame for the egress to finish (pull): its next hop's MAC.
    Classified(PacketBuf, EthernetAddress),
    /// A frame as received (central: port thread → forwarding thread).
    Raw(PacketBuf),
    /// Cluster: an unfinished frame for port `egress` of another node, which entered
    /// the cluster on port `ingress` (port worker → interconnect thread).
    Remote {
        /// The frame.
        buf: PacketBuf,
        /// Its egress port (another node's).
        egress: PortId,
        /// The port it entered the cluster on.
        ingress: PortId,
    },
}

impl Desc {
    fn into_buf(self) -> PacketBuf {
        match self {
            Desc::Ready(b) | Desc::Classified(b, _) | Desc::Raw(b) => b,
            Desc::Remote { buf, .. } => buf,
        }
    }
}

/// The running data plane; [`Dataplane::stop`] ends it.
#[derive(Debug)]
pub struct Dataplane {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<io::Result<()>>>,
    /// Every thread's doorbell, rung on stop so no thread sleeps through it.
    bells: Vec<Arc<Doorbell>>,
    router: Arc<Router>,
}

impl Dataplane {
    /// Start threads for `links` (index = port id) in the chosen architecture.
    pub fn start(
        router: Arc<Router>,
        links: Vec<Box<dyn Link>>,
        opts: Options,
    ) -> io::Result<Dataplane> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut bells = Vec::new();
        let threads = match opts.arch {
            Architecture::Push | Architecture::Pull => {
                let links = links.into_iter().map(Some).collect();
                start_distributed(&router, links, None, opts, &stop, &mut bells)?
            }
            Architecture::Central => start_central(&router, links, opts, &stop, &mut bells)?,
        };
        Ok(Dataplane {
            stop,
            threads,
            bells,
            router,
        })
    }

    /// Start one node of a cluster: `links[i]` is port `i`'s link on this node
    /// (`None` for another node's port), and `interconnect` runs on a thread of its
    /// own that is one more participant of the ring grid: port workers post frames
    /// for other nodes' ports to it, it posts frames from other nodes to the ports.
    /// Push and pull only (central is refused).
    pub fn start_cluster(
        router: Arc<Router>,
        links: Vec<Option<Box<dyn Link>>>,
        interconnect: crate::cluster::node::Interconnect,
        opts: Options,
    ) -> io::Result<Dataplane> {
        if opts.arch == Architecture::Central {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a cluster node runs the push or pull architecture, not central",
            ));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let mut bells = Vec::new();
        let threads =
            start_distributed(&router, links, Some(interconnect), opts, &stop, &mut bells)?;
        Ok(Dataplane {
            stop,
            threads,
            bells,
            router,
        })
    }

    /// The router the threads serve (FIB updates, counters).
    pub fn router(&self) -> &Arc<Router> {
        &self.router
    }

    /// The flag that stops the threads when set.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// True while every thread is running.
    pub fn is_running(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }

    /// Stop every thread and wait for them; the first error any of them hit.
    pub fn stop(self) -> io::Result<()> {
        self.stop.store(true, Ordering::Release);
        for b in &self.bells {
            b.fd.notify();
        }
        let mut first = Ok(());
        for t in self.threads {
            let r = t
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("data plane thread panicked")));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

/// Per-(from, to) rings: `producers[from][to]`, `consumers[to][from]`.
type RingGrid = (
    Vec<Vec<Option<Producer<Desc>>>>,
    Vec<Vec<Option<Consumer<Desc>>>>,
);

fn ring_grid(n: usize, slots: usize) -> RingGrid {
    let mut prod: Vec<Vec<Option<Producer<Desc>>>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    let mut cons: Vec<Vec<Option<Consumer<Desc>>>> =
        (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
    for from in 0..n {
        for to in 0..n {
            if from != to {
                let (p, c) = spsc::ring(slots);
                prod[from][to] = Some(p);
                cons[to][from] = Some(c);
            }
        }
    }
    (prod, cons)
}

/// Idle back-off of a loop with nothing to block on (the cluster's interconnect
/// thread, which polls its fabric): yield a while, then nap 50 µs at a time, and
/// after 10 ms without work tell the caller it may block or nap longer. Port
/// threads use [`Rest`] and their [`Doorbell`] instead.
#[derive(Debug)]
pub(crate) struct Idle {
    spins: u32,
    limit: u32,
    since: Option<Instant>,
}

impl Idle {
    pub(crate) fn new(limit: u32) -> Idle {
        Idle {
            spins: 0,
            limit,
            since: None,
        }
    }
    pub(crate) fn busy(&mut self) {
        self.spins = 0;
        self.since = None;
    }
    /// True when it is time to block in the link.
    pub(crate) fn idle(&mut self) -> bool {
        self.spins = self.spins.saturating_add(1);
        if self.spins <= self.limit {
            std::thread::yield_now();
            return false;
        }
        let since = *self.since.get_or_insert_with(Instant::now);
        if since.elapsed() < Duration::from_millis(10) {
            std::thread::sleep(Duration::from_micros(50));
            return false;
        }
        true
    }
}

/// A thread's doorbell: producers posting into its rings ring it while it sleeps.
///
/// The sleeper sets `asleep`, then looks at its rings once more before it blocks;
/// a producer publishes its ring index, then reads `asleep`. A `SeqCst` fence on
/// each side between the store and the load (Dekker's pattern) means at least one
/// of them sees the other: either the sleeper finds the descriptor or the producer
/// finds it asleep and writes the eventfd.
#[derive(Debug)]
pub(crate) struct Doorbell {
    fd: EventFd,
    asleep: AtomicBool,
}

impl Doorbell {
    pub(crate) fn new() -> io::Result<Arc<Doorbell>> {
        Ok(Arc::new(Doorbell {
            fd: EventFd::new()?,
            asleep: AtomicBool::new(false),
        }))
    }

    /// Producer side, after the ring's doorbell: wake the consumer if it sleeps.
    /// True when it did (one eventfd write).
    fn ring(&self) -> bool {
        fence(Ordering::SeqCst);
        if self.asleep.load(Ordering::Relaxed) && self.asleep.swap(false, Ordering::AcqRel) {
            self.fd.notify();
            return true;
        }
        false
    }

    /// Consumer side, before the last look at its rings.
    fn going_to_sleep(&self) {
        self.asleep.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// Consumer side, after the block (or instead of it).
    fn awake(&self) {
        self.asleep.store(false, Ordering::Relaxed);
        self.fd.drain();
    }
}

/// When a port thread with nothing to do polls on and when it blocks.
#[derive(Debug, Default)]
struct Rest {
    /// When the current busy-poll window began (reset by work and by a wake-up).
    polling_since: Option<Instant>,
}

impl Rest {
    fn busy(&mut self) {
        self.polling_since = None;
    }

    /// After a block: poll a window again before the next one.
    fn woke(&mut self) {
        self.polling_since = None;
    }

    /// True while the busy-poll window lasts (the caller yields and polls again);
    /// false when it is time to block.
    fn poll_on(&mut self, window: Duration) -> bool {
        let now = Instant::now();
        let from = *self.polling_since.get_or_insert(now);
        if now.duration_since(from) < window {
            std::thread::yield_now();
            return true;
        }
        false
    }
}

/// Transmit `tx`, keeping at most `keep` frames that did not fit for the next round.
fn transmit(
    link: &mut dyn Link,
    tx: &mut Vec<PacketBuf>,
    worker: &Worker,
    keep: usize,
) -> io::Result<()> {
    if tx.is_empty() {
        return Ok(());
    }
    let sent = link.send_burst(tx)?;
    worker.count(Counter::TxFrames, sent as u64);
    if tx.len() > keep {
        let excess = tx.len() - keep;
        tx.drain(..excess);
        worker.count(Counter::DropTxRingFull, excess as u64);
    }
    Ok(())
}

fn start_distributed(
    router: &Arc<Router>,
    links: Vec<Option<Box<dyn Link>>>,
    interconnect: Option<crate::cluster::node::Interconnect>,
    opts: Options,
    stop: &Arc<AtomicBool>,
    all_bells: &mut Vec<Arc<Doorbell>>,
) -> io::Result<Vec<JoinHandle<io::Result<()>>>> {
    let n = links.len();
    // Ring slot `n` is the interconnect's (a cluster node's); without one, nothing
    // posts there.
    let slots = n + usize::from(interconnect.is_some());
    let (mut prod, mut cons) = ring_grid(slots, opts.ring_slots);
    // The ports with a link here, grouped onto port workers (threads).
    let here: Vec<PortId> = (0..n).filter(|&i| links[i].is_some()).collect();
    let groups = assign_ports(
        &here,
        worker_count(opts.workers, here.len(), available_cpus()),
    );
    let mut owner: Vec<Option<usize>> = vec![None; slots];
    for (g, ports) in groups.iter().enumerate() {
        for &p in ports {
            owner[p] = Some(g);
        }
    }
    // Rings between two ports of one worker stay unused: it hands frames from one to
    // the other directly.
    for from in 0..n {
        for to in 0..n {
            if from != to && owner[from].is_some() && owner[from] == owner[to] {
                prod[from][to] = None;
                cons[to][from] = None;
            }
        }
    }
    // A doorbell per port worker, shared by its ports. The interconnect thread has
    // none: it polls its fabric and naps (cluster::node), and it rings none either,
    // so in a cluster a port worker blocks at most 1 ms at a time to see what the
    // interconnect posted.
    let group_bells = groups
        .iter()
        .map(|_| Doorbell::new())
        .collect::<io::Result<Vec<Arc<Doorbell>>>>()?;
    all_bells.extend(group_bells.iter().cloned());
    let bells: Vec<Option<Arc<Doorbell>>> = owner
        .iter()
        .map(|g| g.map(|g| Arc::clone(&group_bells[g])))
        .collect();
    let interconnect_present = interconnect.is_some();
    let block = if interconnect_present {
        opts.wait.min(Duration::from_millis(1))
    } else {
        opts.wait
    };
    let mut threads = Vec::new();
    if let Some(ic) = interconnect {
        // The interconnect posts into the port threads' rings and rings their
        // doorbells, as a port thread does, so they may block at once when idle.
        let to = Outbound::with_bells(std::mem::take(&mut prod[n]), bells.clone());
        let from: Vec<Consumer<Desc>> =
            std::mem::take(&mut cons[n]).into_iter().flatten().collect();
        let worker = router.worker(ic.pool().clone());
        let stop = Arc::clone(stop);
        threads.push(
            std::thread::Builder::new()
                .name("weft-interconnect".into())
                .spawn(move || crate::cluster::node::run(n, ic, worker, to, from, opts, &stop))?,
        );
    }
    let mut links = links;
    for (ports, bell) in groups.into_iter().zip(group_bells) {
        let mut sides = Vec::with_capacity(ports.len());
        for id in ports {
            let link = links[id]
                .take()
                .ok_or_else(|| io::Error::other("a port given to two workers"))?;
            let worker = router.worker(link.pool().clone());
            let to = Outbound::with_bells(std::mem::take(&mut prod[id]), bells.clone());
            let from: Vec<Consumer<Desc>> = std::mem::take(&mut cons[id])
                .into_iter()
                .flatten()
                .collect();
            sides.push(PortSide {
                id,
                link,
                worker,
                to,
                from,
                publish: Publish::default(),
            });
        }
        let names: Vec<&str> = sides.iter().map(|s| s.link.info().name.as_str()).collect();
        let name = format!("weft-port-{}", names.join("+"));
        let stop = Arc::clone(stop);
        let waiting = Waiting { bell, block };
        threads.push(
            std::thread::Builder::new()
                .name(name)
                .spawn(move || port_loop(sides, waiting, opts, &stop))?,
        );
    }
    Ok(threads)
}

/// A port as a worker's idle path sees it: the link to block on, the rings other
/// threads feed it, and whose counters count the sleep.
trait Served {
    fn parts(&mut self) -> (&mut dyn Link, &mut [Consumer<Desc>], &Worker);
}

impl Served for PortSide {
    fn parts(&mut self) -> (&mut dyn Link, &mut [Consumer<Desc>], &Worker) {
        (&mut *self.link, &mut self.from, &self.worker)
    }
}

impl Served for IoSide {
    fn parts(&mut self) -> (&mut dyn Link, &mut [Consumer<Desc>], &Worker) {
        (
            &mut *self.link,
            std::slice::from_mut(&mut self.down),
            &self.worker,
        )
    }
}

/// How a thread blocks when idle: its doorbell, and the longest block.
#[derive(Debug)]
struct Waiting {
    bell: Arc<Doorbell>,
    block: Duration,
}

impl Waiting {
    /// Block on the link and the doorbell, unless a ring in `from` has something
    /// (looked at after announcing the sleep, so no post is missed).
    fn block(
        &self,
        link: &mut dyn Link,
        from: &mut [Consumer<Desc>],
        worker: &Worker,
        errors: &mut ErrorLog,
    ) {
        self.bell.going_to_sleep();
        if from.iter_mut().all(|c| c.is_empty()) {
            worker.count(Counter::Sleeps, 1);
            survive(
                link.wait_also(self.bell.fd.as_fd(), self.block),
                worker,
                errors,
            );
        }
        self.bell.awake();
    }

    /// Block on every port's link and the doorbell at once, unless a ring in some
    /// port's `from` has something or a link has frames already. A link with no
    /// descriptor to block on ([`weft_link::Armed::NoFd`]) shortens the block to
    /// 1 ms. One port: [`Waiting::block`].
    fn block_all<S: Served>(&self, sides: &mut [S], fds: &mut Vec<RawFd>, errors: &mut ErrorLog) {
        if let [s] = sides {
            let (link, from, worker) = s.parts();
            self.block(link, from, worker, errors);
            return;
        }
        if sides.is_empty() {
            return;
        }
        self.bell.going_to_sleep();
        if sides
            .iter_mut()
            .all(|s| s.parts().1.iter_mut().all(|c| c.is_empty()))
        {
            fds.clear();
            let mut ready = false;
            let mut short = false;
            let mut armed = 0;
            for s in sides.iter_mut() {
                armed += 1;
                let (link, _, worker) = s.parts();
                match survive(link.arm_wait(fds).map(Some), worker, errors) {
                    Some(Armed::Ready) => {
                        ready = true;
                        break;
                    }
                    Some(Armed::Fds) => {}
                    Some(Armed::NoFd) | None => short = true,
                }
            }
            if !ready {
                let (_, _, worker) = sides[0].parts();
                worker.count(Counter::Sleeps, 1);
                fds.push(self.bell.fd.as_fd().as_raw_fd());
                let block = if short {
                    self.block.min(Duration::from_millis(1))
                } else {
                    self.block
                };
                survive(poll_raw_readable(fds, block), worker, errors);
            }
            for s in sides.iter_mut().take(armed) {
                s.parts().0.disarm_wait();
            }
        }
        self.bell.awake();
    }
}

/// One port of a port worker: its link, its pipeline worker (counters, neighbour
/// cache, ICMP budget: per port, as with a thread per port) and its rings to and
/// from the ports of other workers.
struct PortSide {
    id: PortId,
    link: Box<dyn Link>,
    worker: Worker,
    /// Rings to ports of other workers (and the interconnect).
    to: Outbound,
    /// Rings from ports of other workers (and the interconnect).
    from: Vec<Consumer<Desc>>,
    publish: Publish,
}

/// A port worker in push or pull mode, run to completion over its ports: each round
/// it receives a burst on each port in turn and runs the pipeline; a frame for
/// another port of this worker goes straight onto that port's transmit list (no
/// ring, no doorbell: pull's egress half runs here too, as that port's worker),
/// a frame for another worker's port into the ring to it. Then, port by port, it
/// fetches what other workers posted for the port and transmits.
fn port_loop(
    mut sides: Vec<PortSide>,
    waiting: Waiting,
    opts: Options,
    stop: &AtomicBool,
) -> io::Result<()> {
    let Some(first) = sides.first() else {
        return Ok(());
    };
    let router = Arc::clone(first.worker.router());
    // Port id → its index in `sides`, for this worker's ports.
    let mut local: Vec<Option<usize>> = Vec::new();
    for (k, s) in sides.iter().enumerate() {
        if local.len() <= s.id {
            local.resize(s.id + 1, None);
        }
        local[s.id] = Some(k);
    }
    let local_index = |p: PortId| local.get(p).copied().flatten();
    let mut txs: Vec<Vec<PacketBuf>> = sides
        .iter()
        .map(|_| Vec::with_capacity(opts.burst * 4))
        .collect();
    let mut errors = ErrorLog::default();
    let mut rx = Vec::with_capacity(opts.burst);
    let mut out: Outbox = Vec::new();
    let mut descs = Vec::with_capacity(opts.burst);
    let mut fds = Vec::new();
    let mut rest = Rest::default();
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        let mut progress = false;
        // Flow control: while a transmit list of this worker is long, receive
        // nothing (nor on a port whose ring to another worker is full); frames wait
        // in the kernel's ring (and are dropped and counted there if it overflows),
        // as a NIC drops at its port.
        let tx_long = txs.iter().any(|t| t.len() >= opts.burst * 4);
        for s in &mut sides {
            let id = s.id;
            s.to.flush();
            let got = if s.to.blocked() || tx_long {
                0
            } else {
                survive(
                    s.link.recv_burst(&mut rx, opts.burst),
                    &s.worker,
                    &mut errors,
                )
            };
            let own = local_index(id).unwrap_or(0);
            if got > 0 {
                progress = true;
                s.worker.count(Counter::RxBursts, 1);
                let fib = router.fib();
                for buf in rx.drain(..) {
                    let Some(mut f) = s.worker.classify(&fib, id, buf, now, &mut out) else {
                        continue;
                    };
                    if router.is_remote(f.egress) {
                        s.to.post_remote(id, f.buf, f.egress, &mut txs[own], &s.worker);
                        continue;
                    }
                    if let Some(j) = local_index(f.egress) {
                        router.finish(&mut f.buf, f.egress, f.dst_mac);
                        txs[j].push(f.buf);
                        continue;
                    }
                    let desc = match opts.arch {
                        Architecture::Pull => Desc::Classified(f.buf, f.dst_mac),
                        _ => {
                            router.finish(&mut f.buf, f.egress, f.dst_mac);
                            Desc::Ready(f.buf)
                        }
                    };
                    s.to.post(id, f.egress, desc, &mut txs[own], &s.worker);
                }
            }
            s.worker.tick(now, &mut out);
            for (e, b) in out.drain(..) {
                if router.is_remote(e) {
                    s.to.post_remote(id, b, e, &mut txs[own], &s.worker);
                } else if let Some(j) = local_index(e) {
                    txs[j].push(b);
                } else {
                    s.to.post(id, e, Desc::Ready(b), &mut txs[own], &s.worker);
                }
            }
            // The batched doorbell: one Release store per ring per burst (and an
            // eventfd write for a worker that sleeps).
            let woke = s.to.doorbells();
            if woke > 0 {
                s.worker.count(Counter::DoorbellWakeups, woke);
            }
        }
        // Egress, port by port: fetch what other workers posted for it, while the
        // link keeps up, and transmit.
        for (s, tx) in sides.iter_mut().zip(&mut txs) {
            let mut fetched = 0;
            for c in &mut s.from {
                if tx.len() >= opts.burst * 2 {
                    break;
                }
                fetched += c.pop_burst(&mut descs, opts.burst);
                for d in descs.drain(..) {
                    match d {
                        Desc::Classified(mut b, mac) => {
                            router.finish(&mut b, s.id, mac);
                            tx.push(b);
                        }
                        d => tx.push(d.into_buf()),
                    }
                }
            }
            let sent_before = tx.len();
            let r = transmit(&mut *s.link, tx, &s.worker, TX_BACKLOG_MAX);
            survive(r, &s.worker, &mut errors);
            s.publish.maybe(s.id, &mut *s.link, &router, now);
            if fetched > 0 || tx.len() < sent_before {
                progress = true;
            }
        }
        if progress {
            rest.busy();
        } else if rest.poll_on(opts.busy_poll) {
            // Polling on: the next round looks again.
        } else if sides.iter().any(|s| s.to.blocked()) || txs.iter().any(|t| !t.is_empty()) {
            // Waiting for room (a full ring or transmit ring): nothing to block on
            // that would say when; let the consumer run.
            std::thread::yield_now();
        } else {
            waiting.block_all(&mut sides, &mut fds, &mut errors);
            rest.woke();
        }
    }
    Ok(())
}

/// When a link call last failed and was reported.
#[derive(Debug, Default)]
struct ErrorLog {
    last_report: Option<Instant>,
}

/// A router does not stop because one call on one link failed (an interface going
/// down and up, a transient ENOBUFS): count it, say so on stderr at most once a
/// second, back off 10 ms, and carry on with the value's default.
fn survive<T: Default>(r: io::Result<T>, worker: &Worker, log: &mut ErrorLog) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            worker.count(Counter::LinkErrors, 1);
            let now = Instant::now();
            if log
                .last_report
                .is_none_or(|t| now >= t + Duration::from_secs(1))
            {
                log.last_report = Some(now);
                eprintln!("weft router: link error (continuing): {e}");
            }
            std::thread::sleep(Duration::from_millis(10));
            T::default()
        }
    }
}

/// Publishes a port's link counters to the router every 100 ms.
#[derive(Debug, Default)]
struct Publish {
    last: Option<Instant>,
}

impl Publish {
    fn maybe(&mut self, id: PortId, link: &mut dyn Link, router: &Router, now: Instant) {
        if self
            .last
            .is_some_and(|l| now < l + Duration::from_millis(100))
        {
            return;
        }
        self.last = Some(now);
        link.refresh_stats();
        router.publish_link_stats(id, link.stats());
    }
}

/// Frames a port may hold for its link before dropping (only reached when the link
/// stops taking frames altogether: flow control stops feeding it long before).
const TX_BACKLOG_MAX: usize = 4096;
/// Descriptors waiting for room in one ring before dropping.
const RING_BACKLOG_MAX: usize = 256;

/// The rings a producer feeds, each with a short backlog for descriptors that found
/// it full: a full ring pauses the producer instead of dropping (the paper's PCIe
/// switch does the same with credit-based flow control, §3.2).
#[derive(Debug)]
pub(crate) struct Outbound {
    rings: Vec<Option<Producer<Desc>>>,
    backlog: Vec<VecDeque<Desc>>,
    /// Each ring's consumer's doorbell, where it has one.
    bells: Vec<Option<Arc<Doorbell>>>,
}

impl Outbound {
    /// Rings and their consumers' doorbells (`bells[i]` for `rings[i]`).
    pub(crate) fn with_bells(
        rings: Vec<Option<Producer<Desc>>>,
        bells: Vec<Option<Arc<Doorbell>>>,
    ) -> Outbound {
        let backlog = rings.iter().map(|_| VecDeque::new()).collect();
        Outbound {
            rings,
            backlog,
            bells,
        }
    }

    /// True while any descriptor waits for room.
    pub(crate) fn blocked(&self) -> bool {
        self.backlog.iter().any(|b| !b.is_empty())
    }

    /// Move waiting descriptors into their rings, in order, as room allows.
    pub(crate) fn flush(&mut self) {
        for (ring, backlog) in self.rings.iter_mut().zip(&mut self.backlog) {
            let Some(p) = ring else { continue };
            while let Some(d) = backlog.pop_front() {
                if let Err(d) = p.push(d) {
                    backlog.push_front(d);
                    break;
                }
            }
        }
    }

    /// Put a descriptor on the way to `egress`: straight into our own transmit list
    /// when it is our port (`id`), else into the (id → egress) ring, behind anything
    /// already waiting for it.
    pub(crate) fn post(
        &mut self,
        id: PortId,
        egress: PortId,
        d: Desc,
        tx: &mut Vec<PacketBuf>,
        worker: &Worker,
    ) {
        if egress == id {
            tx.push(d.into_buf());
            return;
        }
        let (Some(Some(p)), Some(backlog)) =
            (self.rings.get_mut(egress), self.backlog.get_mut(egress))
        else {
            worker.count(Counter::DropEgressRingFull, 1);
            return;
        };
        let d = if backlog.is_empty() {
            match p.push(d) {
                Ok(()) => return,
                Err(d) => d,
            }
        } else {
            d
        };
        if backlog.len() < RING_BACKLOG_MAX {
            backlog.push_back(d);
        } else {
            worker.count(Counter::DropEgressRingFull, 1);
        }
    }

    /// A cluster node: hand an unfinished frame for another node's port `egress` to
    /// the interconnect thread (the last ring of the grid).
    fn post_remote(
        &mut self,
        id: PortId,
        buf: PacketBuf,
        egress: PortId,
        tx: &mut Vec<PacketBuf>,
        worker: &Worker,
    ) {
        let slot = self.rings.len().saturating_sub(1);
        worker.count(Counter::ClusterSent, 1);
        let d = Desc::Remote {
            buf,
            egress,
            ingress: id,
        };
        self.post(id, slot, d, tx, worker);
    }

    /// Publish what was posted since the last call (one Release store per ring) and
    /// wake the consumers that sleep; returns how many were woken.
    pub(crate) fn doorbells(&mut self) -> u64 {
        let mut woke = 0;
        for (i, ring) in self.rings.iter_mut().enumerate() {
            let Some(p) = ring else { continue };
            if p.pending() > 0 {
                p.doorbell();
                if let Some(Some(bell)) = self.bells.get(i) {
                    woke += u64::from(bell.ring());
                }
            }
        }
        woke
    }
}

fn start_central(
    router: &Arc<Router>,
    links: Vec<Box<dyn Link>>,
    opts: Options,
    stop: &Arc<AtomicBool>,
    all_bells: &mut Vec<Arc<Doorbell>>,
) -> io::Result<Vec<JoinHandle<io::Result<()>>>> {
    let mut threads = Vec::new();
    let mut to_central = Vec::new();
    let mut from_central = Vec::new();
    let pool = links
        .first()
        .map(|l| l.pool().clone())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no ports"))?;
    let central_bell = Doorbell::new()?;
    all_bells.push(Arc::clone(&central_bell));
    // The port threads: `workers` of them, each serving its share of the ports.
    let ids: Vec<PortId> = (0..links.len()).collect();
    let groups = assign_ports(
        &ids,
        worker_count(opts.workers, ids.len(), available_cpus()),
    );
    let group_bells = groups
        .iter()
        .map(|_| Doorbell::new())
        .collect::<io::Result<Vec<Arc<Doorbell>>>>()?;
    all_bells.extend(group_bells.iter().cloned());
    let mut io_bells = vec![None; links.len()];
    for (ports, bell) in groups.iter().zip(&group_bells) {
        for &p in ports {
            io_bells[p] = Some(Arc::clone(bell));
        }
    }
    let mut sides: Vec<Option<IoSide>> = Vec::new();
    for (id, link) in links.into_iter().enumerate() {
        let (in_p, in_c) = spsc::ring::<Desc>(opts.ring_slots);
        let (out_p, out_c) = spsc::ring::<Desc>(opts.ring_slots);
        to_central.push(in_c);
        from_central.push(Some(out_p));
        let worker = router.worker(link.pool().clone());
        sides.push(Some(IoSide {
            id,
            link,
            worker,
            up: in_p,
            down: out_c,
            backlog: VecDeque::new(),
            tx: Vec::with_capacity(opts.burst * 4),
            publish: Publish::default(),
        }));
    }
    for (ports, bell) in groups.into_iter().zip(group_bells) {
        let mine = ports
            .iter()
            .map(|&p| sides[p].take())
            .collect::<Option<Vec<IoSide>>>()
            .ok_or_else(|| io::Error::other("a port given to two workers"))?;
        let names: Vec<&str> = mine.iter().map(|s| s.link.info().name.as_str()).collect();
        let name = format!("weft-io-{}", names.join("+"));
        let stop = Arc::clone(stop);
        let waiting = Waiting {
            bell,
            block: opts.wait,
        };
        let central = Arc::clone(&central_bell);
        threads.push(
            std::thread::Builder::new()
                .name(name)
                .spawn(move || io_loop(mine, central, waiting, opts, &stop))?,
        );
    }
    let worker = router.worker(pool);
    let stop = Arc::clone(stop);
    let outbound = Outbound::with_bells(from_central, io_bells);
    threads.push(
        std::thread::Builder::new()
            .name("weft-central".into())
            .spawn(move || {
                central_loop(worker, to_central, outbound, &central_bell, opts, &stop)
            })?,
    );
    Ok(threads)
}

/// One port of a central mode port thread: its link, the ring up to the
/// forwarding thread and the ring down from it.
struct IoSide {
    id: PortId,
    link: Box<dyn Link>,
    worker: Worker,
    up: Producer<Desc>,
    down: Consumer<Desc>,
    /// Received frames waiting for room in `up`.
    backlog: VecDeque<Desc>,
    tx: Vec<PacketBuf>,
    publish: Publish,
}

/// Central mode port thread: link → ring, ring → link for each of its ports in turn;
/// no packet processing. `central` is the forwarding thread's doorbell.
fn io_loop(
    mut sides: Vec<IoSide>,
    central: Arc<Doorbell>,
    waiting: Waiting,
    opts: Options,
    stop: &AtomicBool,
) -> io::Result<()> {
    let mut errors = ErrorLog::default();
    let mut rx = Vec::with_capacity(opts.burst);
    let mut descs = Vec::with_capacity(opts.burst);
    let mut fds = Vec::new();
    let mut rest = Rest::default();
    while !stop.load(Ordering::Acquire) {
        let mut progress = false;
        for s in &mut sides {
            while let Some(d) = s.backlog.pop_front() {
                if let Err(d) = s.up.push(d) {
                    s.backlog.push_front(d);
                    break;
                }
            }
            let got = if s.backlog.is_empty() && s.tx.len() < opts.burst * 4 {
                survive(
                    s.link.recv_burst(&mut rx, opts.burst),
                    &s.worker,
                    &mut errors,
                )
            } else {
                0
            };
            for b in rx.drain(..) {
                let d = Desc::Raw(b);
                if !s.backlog.is_empty() {
                    s.backlog.push_back(d);
                } else if let Err(d) = s.up.push(d) {
                    s.backlog.push_back(d);
                }
            }
            if got > 0 {
                s.worker.count(Counter::RxBursts, 1);
            }
            if s.up.pending() > 0 {
                s.up.doorbell();
                if central.ring() {
                    s.worker.count(Counter::DoorbellWakeups, 1);
                }
            }
            let fetched = if s.tx.len() < opts.burst * 2 {
                s.down.pop_burst(&mut descs, opts.burst)
            } else {
                0
            };
            for d in descs.drain(..) {
                s.tx.push(d.into_buf());
            }
            let before = s.tx.len();
            let r = transmit(&mut *s.link, &mut s.tx, &s.worker, TX_BACKLOG_MAX);
            survive(r, &s.worker, &mut errors);
            s.publish
                .maybe(s.id, &mut *s.link, s.worker.router(), Instant::now());
            if got > 0 || fetched > 0 || s.tx.len() < before {
                progress = true;
            }
        }
        if progress {
            rest.busy();
        } else if rest.poll_on(opts.busy_poll) {
            // Polling on: the next round looks again.
        } else if sides
            .iter()
            .any(|s| !s.backlog.is_empty() || !s.tx.is_empty())
        {
            std::thread::yield_now();
        } else {
            waiting.block_all(&mut sides, &mut fds, &mut errors);
            rest.woke();
        }
    }
    Ok(())
}

/// The one forwarding thread of the central architecture.
fn central_loop(
    mut worker: Worker,
    mut inbound: Vec<Consumer<Desc>>,
    mut outbound: Outbound,
    bell: &Doorbell,
    opts: Options,
    stop: &AtomicBool,
) -> io::Result<()> {
    let router = Arc::clone(worker.router());
    // The central thread is no port: posts never go to a "local" transmit list.
    let mut no_local_tx = Vec::new();
    let mut descs = Vec::with_capacity(opts.burst);
    let mut out: Outbox = Vec::new();
    let mut rest = Rest::default();
    while !stop.load(Ordering::Acquire) {
        let now = Instant::now();
        let mut work = 0;
        outbound.flush();
        for (ingress, c) in inbound.iter_mut().enumerate() {
            if outbound.blocked() {
                break;
            }
            let n = c.pop_burst(&mut descs, opts.burst);
            work += n;
            if n == 0 {
                continue;
            }
            let fib = router.fib();
            for d in descs.drain(..) {
                let b = d.into_buf();
                if let Some(mut f) = worker.classify(&fib, ingress, b, now, &mut out) {
                    router.finish(&mut f.buf, f.egress, f.dst_mac);
                    out.push((f.egress, f.buf));
                }
            }
        }
        worker.tick(now, &mut out);
        for (e, b) in out.drain(..) {
            outbound.post(usize::MAX, e, Desc::Ready(b), &mut no_local_tx, &worker);
        }
        let woke = outbound.doorbells();
        if woke > 0 {
            worker.count(Counter::DoorbellWakeups, woke);
        }
        if work > 0 {
            rest.busy();
        } else if rest.poll_on(opts.busy_poll) {
            // Polling on.
        } else if outbound.blocked() {
            std::thread::yield_now();
        } else {
            // No link: the doorbell alone (the io threads ring it).
            bell.going_to_sleep();
            if inbound.iter_mut().all(|c| c.is_empty()) {
                worker.count(Counter::Sleeps, 1);
                weft_link::wake::poll_readable(&[bell.fd.as_fd()], opts.wait)?;
            }
            bell.awake();
            rest.woke();
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_a_worker_per_port_up_to_the_cpus() {
        // The e2e benchmark's pinning: one CPU, two ports: one worker for both.
        assert_eq!(worker_count(None, 2, 1), 1);
        assert_eq!(worker_count(None, 2, 2), 2);
        assert_eq!(worker_count(None, 2, 8), 2);
        assert_eq!(worker_count(None, 5, 3), 3);
        assert_eq!(worker_count(None, 0, 4), 0);
    }

    #[test]
    fn a_requested_count_is_kept_between_one_and_the_ports() {
        assert_eq!(worker_count(Some(1), 4, 8), 1);
        assert_eq!(
            worker_count(Some(3), 4, 1),
            3,
            "asked for: more than the CPUs"
        );
        assert_eq!(worker_count(Some(9), 4, 8), 4);
        assert_eq!(worker_count(Some(0), 4, 8), 1);
    }

    #[test]
    fn ports_are_dealt_out_in_turn() {
        assert_eq!(assign_ports(&[0, 1], 1), vec![vec![0, 1]]);
        assert_eq!(assign_ports(&[0, 1, 2], 2), vec![vec![0, 2], vec![1]]);
        // A cluster node's own ports (others are another node's).
        assert_eq!(assign_ports(&[1, 3], 2), vec![vec![1], vec![3]]);
        assert_eq!(assign_ports(&[0, 1], 5), vec![vec![0], vec![1]]);
        assert!(assign_ports(&[], 2).is_empty());
    }
}
