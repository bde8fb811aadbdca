//! `weft perf TEST`: perftest for weft. Latency (send-lat, write-lat, read-lat,
//! atomic-lat) and bandwidth (send-bw, write-bw, read-bw) of weft-verbs over the udp
//! or shm link, with the harness `weft baseline` uses, so records line up.
//!
//! Like perftest: without a host this is the server (it serves runs until the client
//! says it is done); with a host it is the client; `--local` runs the server as a
//! child process. Each message size is one connection through weft's connection
//! manager; the request's private data says what to run, the answer's carries the
//! server's buffer address and rkey.
//!
//! - send-lat: ping-pong of SENDs (RC, UC or UD); one-way = half the round trip, or
//!   with `--symmetric` ((t4 − t1) − (t3 − t2)) / 2 with the server's turnaround times
//!   sent back at the end of the run.
//! - write-lat: each side WRITEs into the other's buffer and polls the last byte for
//!   the round's marker (perftest's method; RC and UC).
//! - read-lat, atomic-lat: one READ / fetch-and-add at a time against the passive
//!   server; the latency is the full round trip (post to completion), as perftest
//!   reports READ and atomics (method "rtt"; send-lat and write-lat are "rtt/2").
//! - every rate carries the CPU time of both processes over the measured phase (the
//!   server's when it is the `--local` child): CPU µs per operation and operations
//!   per CPU-second, so a spinning side shows beside a sleeping one.
//! - *-bw: `--tx-depth` work requests in flight, a completion requested every 16;
//!   the time runs from the first post to the last completion (for RC: the last
//!   acknowledgement, so delivered data).
//! - write-send-lat, and read-lat / send-lat with `--outstanding N`: N operations in
//!   flight, each timed from its post until its data is here (method "rtt"), with
//!   the rate of completed operations; `--poll-memory` (READ-Poll), `--bulk-size`
//!   (a background WRITE flow on a second QP of the device) and `--scheduler fifo`
//!   serve `weft study` (the window module).

use std::ffi::OsString;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::incast_cmd::CcArg;
use crate::perf::local::{announce_ready, LocalServer};
use crate::perf::record::Meta;
use crate::perf::run::{self, LoopOpts, Progress as Prog, Round};
use crate::perf::table::Output;
use crate::perf::{bandwidth_record, latency_record, round_trip_record};
use anyhow::{anyhow, bail, Context as _};
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Access, Completion, CompletionChannel, CompletionQueue, Context, DeviceConfig, LinkKind,
    MemoryRegion, Mtu, Progress, ProtectionDomain, QpInitAttr, QpState, QpType, QueuePair, RecvWr,
    RemoteAddr, SendWr, WaitMode, Waiter, WcStatus, WrOp, GRH_LEN,
};

mod qps;
mod window;

/// A perf test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Test {
    SendLat,
    SendBw,
    WriteLat,
    WriteBw,
    ReadLat,
    ReadBw,
    AtomicLat,
    /// A compound read (Kalia et al.'s, as the cluster-configuration paper runs it): a
    /// small WRITE carries the request into the server's memory, the server polls its
    /// memory for it and answers with a SEND of `--size` bytes.
    WriteSendLat,
}

const TESTS: [Test; 8] = [
    Test::SendLat,
    Test::SendBw,
    Test::WriteLat,
    Test::WriteBw,
    Test::ReadLat,
    Test::ReadBw,
    Test::AtomicLat,
    Test::WriteSendLat,
];

impl Test {
    fn name(self) -> &'static str {
        match self {
            Test::SendLat => "send-lat",
            Test::SendBw => "send-bw",
            Test::WriteLat => "write-lat",
            Test::WriteBw => "write-bw",
            Test::ReadLat => "read-lat",
            Test::ReadBw => "read-bw",
            Test::AtomicLat => "atomic-lat",
            Test::WriteSendLat => "write-send-lat",
        }
    }
    fn code(self) -> u8 {
        TESTS.iter().position(|t| *t == self).unwrap_or(0) as u8
    }
    fn from_code(c: u8) -> Option<Test> {
        TESTS.get(usize::from(c)).copied()
    }
    fn is_lat(self) -> bool {
        matches!(
            self,
            Test::SendLat | Test::WriteLat | Test::ReadLat | Test::AtomicLat | Test::WriteSendLat
        )
    }
    fn is_send(self) -> bool {
        matches!(self, Test::SendLat | Test::SendBw)
    }
}

/// Transport service of the QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Qp {
    Rc,
    Uc,
    Ud,
}

impl Qp {
    fn qp_type(self) -> QpType {
        match self {
            Qp::Rc => QpType::Rc,
            Qp::Uc => QpType::Uc,
            Qp::Ud => QpType::Ud,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Qp::Rc => "rc",
            Qp::Uc => "uc",
            Qp::Ud => "ud",
        }
    }
}

/// The link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Link {
    Udp,
    Shm,
}

/// The send scheduler between a device's QPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scheduler {
    /// Deficit round robin over bytes with the transport's default quantum.
    Drr,
    /// First come, first served: DRR with a quantum no QP can use up (u32::MAX
    /// bytes), so a QP keeps its turn until it has nothing left to send.
    Fifo,
}

impl Scheduler {
    /// The transport's `drr_quantum` for this scheduler.
    pub fn quantum(self) -> u32 {
        match self {
            Scheduler::Drr => weft_transport::Config::default().drr_quantum,
            Scheduler::Fifo => u32::MAX,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::Drr => "drr",
            Scheduler::Fifo => "fifo",
        }
    }
}

/// The order of posts over the QPs of a `--qps` run (`--qps-order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum QpsOrder {
    /// perftest's `-q` loop: a QP's window is filled before the next QP's.
    Burst,
    /// One message to each QP in turn.
    Spread,
}

impl QpsOrder {
    pub fn name(self) -> &'static str {
        match self {
            QpsOrder::Burst => "burst",
            QpsOrder::Spread => "spread",
        }
    }
}

/// Who drives the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// The polling thread runs the engine (lowest latency; one busy thread a side).
    Inline,
    /// A dedicated engine thread.
    Thread,
}

/// How the application waits (`--wait`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WaitArg {
    /// Busy-poll the completion queue.
    Poll,
    /// Sleep on the completion channel.
    Block,
    /// Spin for a learned budget, then sleep on the channel.
    Adaptive,
}

impl WaitArg {
    pub fn name(self) -> &'static str {
        match self {
            WaitArg::Poll => "poll",
            WaitArg::Block => "block",
            WaitArg::Adaptive => "adaptive",
        }
    }
}

impl Args {
    /// The application's wait: `--wait`, or `block` for `--event`, else `poll`.
    pub fn wait_mode(&self) -> WaitMode {
        match (self.wait, self.event) {
            (Some(WaitArg::Adaptive), _) => WaitMode::Adaptive,
            (Some(WaitArg::Block), _) | (None, true) => WaitMode::Block,
            _ => WaitMode::Poll,
        }
    }

    /// Whether the application may sleep in its waits (block or adaptive).
    pub fn may_block(&self) -> bool {
        self.wait_mode() != WaitMode::Poll
    }
}

/// Arguments of `weft perf`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The test.
    #[arg(value_enum)]
    pub test: Test,
    /// Server to connect to (its connection-manager address). Without it (and without
    /// --local) this is the server.
    pub host: Option<String>,
    /// Connection-manager TCP port (server: 0 picks one and prints it).
    #[arg(short, long, default_value_t = 18515)]
    pub port: u16,
    /// IP address of the connection-manager listener (server) and of this side's
    /// device, on RoCEv2's port 4791 (udp: the socket's address; shm: part of its
    /// name). A loopback address (the default) gives each device a loopback address
    /// of its own (127.x.y.z:4791), so client and server on one host never clash.
    #[arg(long, default_value = "127.0.0.1")]
    pub ip: IpAddr,
    /// Run the server as a child process on this host and the client here.
    #[arg(long, conflicts_with = "host")]
    pub local: bool,
    /// Link: udp or shm.
    #[arg(long, value_enum, default_value_t = Link::Udp)]
    pub link: Link,
    /// Queue pair type: rc, uc or ud.
    #[arg(long, value_enum, default_value_t = Qp::Rc)]
    pub qp: Qp,
    /// Message size in bytes (default: 2 for latency, 65536 for bandwidth; atomics 8).
    #[arg(short, long)]
    pub size: Option<u64>,
    /// Sweep 2 B … 8 MiB in powers of two (UD: up to the path MTU).
    #[arg(short, long, conflicts_with = "size")]
    pub all: bool,
    /// These message sizes, in this order (comma-separated bytes).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["size", "all"])]
    pub sizes: Vec<u64>,
    /// Measured iterations per size (default: 1000 latency, 5000 bandwidth).
    #[arg(short = 'n', long)]
    pub iters: Option<u64>,
    /// Unmeasured iterations first (default: a tenth of --iters, 10 to 1000).
    #[arg(long)]
    pub warmup: Option<u64>,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(long, default_value_t = 4096)]
    pub mtu: usize,
    /// Work requests in flight in bandwidth tests (per QP with --qps, as perftest's -t).
    #[arg(long, default_value_t = 128)]
    pub tx_depth: usize,
    /// send-bw, write-bw: this many QPs (perftest's -q), each with --tx-depth in
    /// flight (perftest's per-QP -t; -n stays the run's total); reports the memory
    /// per QP.
    #[arg(long, default_value_t = 1)]
    pub qps: usize,
    /// With --qps: the order of posts over the QPs. `burst` (perftest's): post to
    /// one QP while its window has room, then to the next; `spread`: one message to
    /// each QP in turn, so consecutive messages never share a QP (the hardest case
    /// for per-QP state in caches). The same when one request fits a QP's window.
    /// Default `burst`; refused without --qps above 1.
    #[arg(long, value_enum)]
    pub qps_order: Option<QpsOrder>,
    /// Send messages up to this size inline (copied at post time; at most 256).
    #[arg(long, default_value_t = 220)]
    pub inline: u64,
    /// Wait on a completion channel instead of busy polling (`--wait block`).
    #[arg(long, conflicts_with = "wait")]
    pub event: bool,
    /// How the application waits for completions: `poll` (busy polling, perftest's
    /// default), `block` (the completion channel, as --event) or `adaptive` (spin for a
    /// budget learned from the recent waits, then block: weft-verbs' `Waiter`). Both
    /// processes.
    #[arg(long, value_enum)]
    pub wait: Option<WaitArg>,
    /// Latency tests without --outstanding: sleep this many µs after each round
    /// (outside its timing), so the processes idle between rounds, as a sparse
    /// request stream does; the rate and CPU then count the pauses.
    #[arg(long, default_value_t = 0)]
    pub pause_us: u64,
    /// read-lat, send-lat, write-send-lat: keep this many operations in flight (RC)
    /// and time each from its post to its completion (the whole round trip, method
    /// "rtt"), with the rate of completed operations. send-lat then sends
    /// `--request-size` byte requests and `--size` byte replies (a compound read).
    /// Without it read-lat and send-lat run perftest's one-at-a-time loops;
    /// write-send-lat always runs this way (default 1).
    #[arg(long)]
    pub outstanding: Option<usize>,
    /// read-lat with --outstanding: learn that a READ's data arrived by polling the
    /// last byte of the local buffer, not the completion queue (the paper's
    /// READ-Poll); a completion is requested every 16 READs only to free queue slots.
    #[arg(long)]
    pub poll_memory: bool,
    /// send-lat with --outstanding, write-send-lat: bytes of each request.
    #[arg(long, default_value_t = 16)]
    pub request_size: u64,
    /// The send scheduler between QPs: `drr` (the transport's deficit round robin,
    /// quantum 4096 B) or `fifo` (an unbounded quantum: the QP at the head of the
    /// queue sends everything it has before the next one's turn). Both sides.
    #[arg(long, value_enum, default_value_t = Scheduler::Drr)]
    pub scheduler: Scheduler,
    /// Latency tests with --outstanding: a background flow of RDMA WRITEs of this
    /// many bytes on a second RC QP of the same device, `--bulk-depth` in flight, for
    /// the whole run; its rate is reported beside the latency (`bulk_mb_per_s`).
    #[arg(long)]
    pub bulk_size: Option<u64>,
    /// WRITEs of the background flow in flight.
    #[arg(long, default_value_t = 4)]
    pub bulk_depth: usize,
    /// Who drives the engine.
    #[arg(long, value_enum, default_value_t = ProgressMode::Inline)]
    pub progress: ProgressMode,
    /// shm: carry no ICRC (both sides must agree).
    #[arg(long)]
    pub no_icrc: bool,
    /// udp: no segmentation offload (one datagram per system-call slot, no UDP GSO or
    /// GRO), for comparing against the default.
    #[arg(long)]
    pub no_gso: bool,
    /// shm: no one-copy path (large WRITE payloads travel through the rings instead of
    /// being pulled by cross-memory attach), for comparing against the default. Both
    /// processes.
    #[arg(long)]
    pub no_one_copy: bool,
    /// shm: allocate the test's buffers as ordinary memory instead of sealed memfds
    /// the peer maps (weft-verbs' `alloc_shared_mr`), so one-copy WRITEs fall back to
    /// `process_vm_readv` when sent by reference, for comparing against the default.
    /// Both processes.
    #[arg(long)]
    pub no_shared_buffers: bool,
    /// shm: the smallest WRITE sent by reference from memory the peer has not mapped
    /// (`process_vm_readv`; default: weft-verbs' `ONE_COPY_CMA_MIN`, 1 MiB). Both
    /// processes.
    #[arg(long)]
    pub one_copy_cma_min: Option<u64>,
    /// shm: the smallest WRITE sent by reference (default: weft-verbs' `ONE_COPY_MIN`;
    /// never one of a path MTU or less).
    #[arg(long)]
    pub one_copy_min: Option<u64>,
    /// While several QPs send, how long (µs) one engine pass may go on transmitting
    /// after a round of the deficit round robin (weft-verbs' `DeviceConfig::
    /// shared_pass`; default 16). Both processes.
    #[arg(long)]
    pub shared_pass_us: Option<u64>,
    /// Congestion control of the RC QPs: off (a fixed window of the connection's
    /// `max_inflight` PSNs) or delay (weft-transport's delay-based window). Both
    /// processes.
    #[arg(long, value_enum, default_value_t = CcArg::Off)]
    pub cc: CcArg,
    /// --cc delay: the round-trip time (µs) the window steers to. Both processes.
    #[arg(long, default_value_t = weft_verbs::DelayControl::default().target_delay_us)]
    pub cc_target_us: u64,
    /// send-lat: one-way latency by the symmetric timestamp method.
    #[arg(long)]
    pub symmetric: bool,
    /// Seconds a latency size may run before it stops with what it has.
    #[arg(long, default_value_t = 5.0)]
    pub time_limit: f64,
    /// One JSON object per size instead of a table.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(short, long)]
    pub quiet: bool,
    /// Print the engine's, transport's and link's counters after each size (stderr);
    /// a server prints its own after each run it serves.
    #[arg(long)]
    pub stats: bool,
    /// Server: give up when no client connects within this many seconds.
    #[arg(long, default_value_t = 120.0)]
    pub idle_timeout: f64,
}

/// Deadline for any single wait inside a run: a peer that stops answering ends the
/// run with an error, never a hang.
const WAIT: Duration = Duration::from_secs(10);
/// Receive buffers the server keeps posted in send-bw: at most this many, and at most
/// 64 MiB of them.
const RX_SLOTS: usize = 256;
const RX_BYTES: u64 = 64 << 20;
/// A completion is requested every this many bandwidth work requests.
const SIGNAL_EVERY: u64 = 16;

/// Run `weft perf`.
pub fn run(args: Args) -> anyhow::Result<()> {
    check(&args)?;
    qps::check(&args)?;
    if args.local {
        return local(&args);
    }
    match &args.host {
        None => serve(&args),
        Some(h) => {
            let at = (h.as_str(), args.port)
                .to_socket_addrs()
                .with_context(|| format!("resolving {h}"))?
                .next()
                .ok_or_else(|| anyhow!("{h} has no address"))?;
            client(&args, at, None)
        }
    }
}

fn check(a: &Args) -> anyhow::Result<()> {
    if Mtu::from_bytes(a.mtu).is_none() {
        bail!("--mtu must be 256, 512, 1024, 2048 or 4096");
    }
    match (a.qp, a.test) {
        (Qp::Ud, t) if !t.is_send() => bail!("UD carries SENDs only"),
        (Qp::Uc, Test::ReadLat | Test::ReadBw | Test::AtomicLat) => {
            bail!("UC has no READ or atomics")
        }
        _ => {}
    }
    if a.symmetric && (a.test != Test::SendLat || a.qp != Qp::Rc) {
        bail!("--symmetric applies to send-lat over RC (the report travels reliably)");
    }
    if let Some(s) = a.size {
        if s == 0 || s > 1 << 30 {
            bail!("--size must be 1 B … 1 GiB");
        }
        if a.qp == Qp::Ud && s > a.mtu as u64 {
            bail!("a UD message fits one packet: --size at most --mtu");
        }
    }
    if a.tx_depth == 0 {
        bail!("--tx-depth must be at least 1");
    }
    if a.sizes.iter().any(|&s| s == 0 || s > 1 << 30) {
        bail!("--sizes must be 1 B … 1 GiB each");
    }
    window::check(a)
}

fn local(a: &Args) -> anyhow::Result<()> {
    let mut sargs: Vec<String> = vec![
        "perf".into(),
        a.test.name().into(),
        "--port".into(),
        "0".into(),
        "--link".into(),
        format!("{:?}", a.link).to_lowercase(),
        "--qp".into(),
        a.qp.name().into(),
        "--progress".into(),
        format!("{:?}", a.progress).to_lowercase(),
        "--mtu".into(),
        a.mtu.to_string(),
        "--inline".into(),
        a.inline.to_string(),
        "--scheduler".into(),
        a.scheduler.name().into(),
        "--idle-timeout".into(),
        "30".into(),
        "--quiet".into(),
    ];
    if a.stats {
        sargs.push("--stats".into());
    }
    if a.no_icrc {
        sargs.push("--no-icrc".into());
    }
    if a.no_gso {
        sargs.push("--no-gso".into());
    }
    if a.no_one_copy {
        sargs.push("--no-one-copy".into());
    }
    if a.no_shared_buffers {
        sargs.push("--no-shared-buffers".into());
    }
    if let Some(m) = a.one_copy_cma_min {
        sargs.push("--one-copy-cma-min".into());
        sargs.push(m.to_string());
    }
    if let Some(m) = a.one_copy_min {
        sargs.push("--one-copy-min".into());
        sargs.push(m.to_string());
    }
    if let Some(us) = a.shared_pass_us {
        sargs.push("--shared-pass-us".into());
        sargs.push(us.to_string());
    }
    sargs.extend([
        "--cc".into(),
        a.cc.name().into(),
        "--cc-target-us".into(),
        a.cc_target_us.to_string(),
    ]);
    if let Some(w) = a.wait {
        sargs.push("--wait".into());
        sargs.push(w.name().into());
    } else if a.event {
        sargs.push("--event".into());
    }
    let sargs: Vec<OsString> = sargs.into_iter().map(OsString::from).collect();
    let server = LocalServer::spawn(&sargs, Duration::from_secs(30))?;
    let result = client(a, SocketAddr::new(a.ip, server.port), server.pid());
    let reaped = server.reap(Duration::from_secs(20));
    result?;
    reaped.map(|_| ())
}

/// What one run is, as the client asks for it (the request's private data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    done: bool,
    test: Test,
    size: u64,
    /// Warm-up plus measured rounds or messages.
    count: u64,
    symmetric: bool,
    /// The client's buffer (write-lat).
    remote: RemoteAddr,
    /// Operations the client keeps in flight (0: the classic one-at-a-time loop).
    depth: u32,
    /// Bytes of a request (write-send-lat, windowed send-lat).
    request: u32,
    /// A background flow's connection: accept it and keep it until the next run ends.
    background: bool,
}

impl Plan {
    fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(38);
        b.push(
            u8::from(self.done)
                | (u8::from(self.symmetric) << 1)
                | (u8::from(self.background) << 2),
        );
        b.push(self.test.code());
        b.extend_from_slice(&self.size.to_be_bytes());
        b.extend_from_slice(&self.count.to_be_bytes());
        b.extend_from_slice(&self.remote.addr.to_be_bytes());
        b.extend_from_slice(&self.remote.rkey.to_be_bytes());
        b.extend_from_slice(&self.depth.to_be_bytes());
        b.extend_from_slice(&self.request.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> anyhow::Result<Plan> {
        if b.len() != 38 {
            bail!("run request of {} bytes, expected 38", b.len());
        }
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        Ok(Plan {
            done: b[0] & 1 != 0,
            symmetric: b[0] & 2 != 0,
            background: b[0] & 4 != 0,
            test: Test::from_code(b[1]).ok_or_else(|| anyhow!("unknown test code {}", b[1]))?,
            size: u64_at(2),
            count: u64_at(10),
            remote: RemoteAddr {
                addr: u64_at(18),
                rkey: u32_at(26),
            },
            depth: u32_at(30),
            request: u32_at(34),
        })
    }
}

fn remote_of(private: &[u8]) -> anyhow::Result<RemoteAddr> {
    if private.len() < 12 {
        bail!("server answered without its buffer");
    }
    Ok(RemoteAddr {
        addr: u64::from_be_bytes(private[..8].try_into()?),
        rkey: u32::from_be_bytes(private[8..12].try_into()?),
    })
}

fn remote_bytes(mr: &MemoryRegion, offset: u64) -> Vec<u8> {
    let r = mr.remote(offset as usize);
    let mut v = r.addr.to_be_bytes().to_vec();
    v.extend_from_slice(&r.rkey.to_be_bytes());
    v
}

/// One side's queues on a device.
struct Side {
    ctx: Context,
    cq: CompletionQueue,
    channel: Option<CompletionChannel>,
    waiter: Waiter,
    out: Vec<Completion>,
    /// A batch held flushed work requests: the peer hung up ([`sift`]).
    hung_up: bool,
}

fn device(a: &Args) -> anyhow::Result<Context> {
    let link = match a.link {
        Link::Udp => LinkKind::Udp,
        Link::Shm => LinkKind::Shm,
    };
    // On loopback (the default) each side's device takes a loopback address of its
    // own with RoCEv2's port 4791, so the two sides of `--local` never clash; on
    // another address, the device is that address's RoCEv2 endpoint (port 4791).
    let mut cfg = if a.ip.is_loopback() {
        DeviceConfig::local(link)
    } else {
        DeviceConfig::new(link, SocketAddr::new(a.ip, weft_wire::roce::UDP_PORT))
    };
    cfg.progress = match a.progress {
        ProgressMode::Inline => Progress::Inline,
        ProgressMode::Thread => Progress::Thread,
    };
    cfg.icrc = !(a.no_icrc && a.link == Link::Shm);
    cfg.segmentation_offload = !a.no_gso;
    cfg.one_copy = !a.no_one_copy;
    if let Some(m) = a.one_copy_cma_min {
        cfg.one_copy_cma_min = m;
    }
    if let Some(m) = a.one_copy_min {
        cfg.transport.by_reference_min = m;
    }
    cfg.transport.drr_quantum = a.scheduler.quantum();
    cfg.transport.congestion = a.cc.control(a.cc_target_us);
    if let Some(us) = a.shared_pass_us {
        cfg.shared_pass = Duration::from_micros(us);
    }
    Context::open_with(cfg).context("opening the device")
}

/// Whether the test's buffers are sealed memfds the peer maps (shm, unless
/// `--no-shared-buffers`).
pub(crate) fn shared_buffers(a: &Args) -> bool {
    a.link == Link::Shm && !a.no_shared_buffers
}

/// A test buffer of `len` bytes: shared with the peer on shm
/// ([`ProtectionDomain::alloc_shared_mr`]), ordinary memory otherwise.
pub(crate) fn buffer(
    a: &Args,
    pd: &ProtectionDomain,
    len: usize,
    access: Access,
) -> anyhow::Result<MemoryRegion> {
    if shared_buffers(a) {
        pd.alloc_shared_mr(len, access)
            .context("allocating a shared buffer")
    } else {
        Ok(pd.alloc_mr(len, access))
    }
}

/// Say in a record's note that its buffers were shared with the peer.
pub(crate) fn note_buffers(a: &Args, r: &mut crate::perf::record::Record) {
    if shared_buffers(a) && r.error.is_none() {
        r.add_note("buffers: shared memfd (peer maps them)");
    }
}

/// Fresh queues (a completion queue and a QP in RESET) on `ctx`.
fn queues(ctx: &Context, a: &Args, rx_depth: usize) -> anyhow::Result<(Side, QueuePair)> {
    let channel = if a.may_block() {
        Some(CompletionChannel::new(ctx)?)
    } else {
        None
    };
    let cq = CompletionQueue::new(ctx, 4 * (a.tx_depth + rx_depth).max(64), channel.as_ref());
    let pd = ctx.alloc_pd();
    let mut init = QpInitAttr::new(a.qp.qp_type());
    init.max_send_wr = a.tx_depth.max(2);
    init.max_recv_wr = rx_depth.max(2);
    let qp = pd.create_qp(&cq, &cq, None, init)?;
    Ok((
        Side {
            ctx: ctx.clone(),
            cq,
            channel,
            waiter: Waiter::new(a.wait_mode()),
            out: Vec::with_capacity(64),
            hung_up: false,
        },
        qp,
    ))
}

/// The peer hung up before the run ended: the local work was flushed. The client
/// reports it as an error; the server of a `--local` run (`--quiet`) says nothing,
/// since a client that stops at its time limit (`--time-limit`) hangs up early by
/// design and reports the rounds it measured itself.
#[derive(Debug)]
pub(crate) struct PeerHungUp;

/// The words of [`PeerHungUp`] a driver of `weft perf` children looks for.
pub(crate) const PEER_HUNG_UP: &str = "peer hung up before the run ended";

impl std::fmt::Display for PeerHungUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the {PEER_HUNG_UP} (work flushed)")
    }
}

impl std::error::Error for PeerHungUp {}

/// Keeps a batch's successful completions in `out` and says whether it also held
/// flushed ones (the peer hung up; `Ok(true)`); any other failure is an error.
///
/// A batch can hold both: the peer ends its side once the last operation of a run has
/// completed there (a server once the ACK of its last reply came), and with an
/// engine thread or a blocking wait the last success may still sit in the queue,
/// unpolled, when the hang-up flushes the receives and unacknowledged requests behind
/// it. Failing the whole batch then reported a run that had completed as cut short
/// (the "peer hung up" flake of `weft study`, docs/results/study.md).
fn sift(out: &mut Vec<Completion>) -> anyhow::Result<bool> {
    if let Some(bad) = out
        .iter()
        .find(|c| !matches!(c.status, WcStatus::Success | WcStatus::WrFlushErr))
    {
        bail!("completion error: {:?} (wr {})", bad.status, bad.wr_id);
    }
    let before = out.len();
    out.retain(|c| c.status == WcStatus::Success);
    Ok(out.len() < before)
}

impl Side {
    /// Completions, waiting for at least one in the `--wait` mode: the successes of a
    /// batch even when the peer hung up behind them ([`sift`]); [`PeerHungUp`] when
    /// none is left.
    fn wait(&mut self) -> anyhow::Result<&[Completion]> {
        self.out.clear();
        if self.hung_up {
            return Err(PeerHungUp.into());
        }
        let n = self
            .waiter
            .wait(&mut self.cq, self.channel.as_ref(), &mut self.out, 64, WAIT)?;
        if n == 0 {
            bail!("no completion within {WAIT:?}: the peer stopped answering");
        }
        self.take_batch()?;
        Ok(&self.out)
    }

    /// [`sift`] the batch in `out`: [`PeerHungUp`] once the peer hung up and no
    /// success is left to deliver.
    fn take_batch(&mut self) -> anyhow::Result<()> {
        self.hung_up |= sift(&mut self.out)?;
        if self.hung_up && self.out.is_empty() {
            return Err(PeerHungUp.into());
        }
        Ok(())
    }

    /// Run the engine while spinning on memory (inline progress needs it).
    fn spin(&self) {
        if self.ctx.progress_mode() == Progress::Inline {
            self.ctx.progress();
        } else if self.waiter.mode() != WaitMode::Poll {
            std::thread::yield_now();
        }
    }
}

fn param(a: &Args, private: Vec<u8>) -> ConnParam {
    ConnParam {
        path_mtu: Mtu::from_bytes(a.mtu).unwrap_or(Mtu::M4096),
        private_data: private,
        ..ConnParam::default()
    }
}

fn marker(seq: u64) -> u8 {
    (seq % 255) as u8 + 1
}

fn send_wr(mr: &MemoryRegion, off: usize, size: u64, inline: u64, signaled: bool) -> SendWr {
    let mut wr = SendWr::new(0, WrOp::Send { imm: None }, [mr.sge(off, size as u32)]);
    wr.inline = size <= inline.min(256);
    wr.signaled = signaled;
    wr
}

// ---------------------------------------------------------------------------------
// Server

fn serve(a: &Args) -> anyhow::Result<()> {
    let ctx = device(a)?;
    let listener = Listener::bind(&ctx, SocketAddr::new(a.ip, a.port))?;
    let port = listener.local_addr()?.port();
    announce_ready(port)?;
    if !a.quiet {
        eprintln!(
            "weft perf server: connection manager on {}:{port}, device {}",
            a.ip,
            ctx.local_addr()
        );
    }
    // The background flows (`--bulk-size`) of the run that comes next: kept until it
    // has been served.
    let mut background = Vec::new();
    loop {
        let req = listener
            .get_request(Duration::from_secs_f64(a.idle_timeout))
            .context("waiting for a client")?;
        if let Some(multi) = qps::MultiPlan::decode(&req.peer().private_data) {
            if let Err(e) = qps::serve(a, &ctx, &listener, req, multi) {
                eprintln!("weft perf server: --qps run: {e:#}");
            }
            continue;
        }
        let plan = match Plan::decode(&req.peer().private_data) {
            Ok(p) => p,
            Err(e) => {
                req.reject(&format!("{e:#}"));
                continue;
            }
        };
        if plan.done {
            req.reject("done");
            return Ok(());
        }
        if plan.background {
            match window::accept_background(a, &ctx, req, &plan) {
                Ok(b) => background.push(b),
                Err(e) => eprintln!("weft perf server: background flow: {e:#}"),
            }
            continue;
        }
        // Fresh queues and buffer per run: the last run's QP ended in ERR when its
        // connection closed.
        let rx = rx_slots(plan.size).max(plan.depth as usize);
        let (mut side, mut qp) = queues(&ctx, a, rx)?;
        let (len, exposed) = server_buffer(&plan);
        let mr = buffer(a, qp.pd(), len.max(64) as usize, Access::ALL)?;
        if plan.test == Test::ReadLat {
            // What a READ-Poll client waits to see in its last byte.
            mr.write(plan.size as usize - 1, &[window::READ_MARK])?;
        }
        let p = param(a, remote_bytes(&mr, exposed));
        cm::init_qp(&mut qp, &p)?;
        pre_post(&plan, &mut qp, &mr)?;
        let conn = match req.accept(&mut qp, &p) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("weft perf server: accept: {e}");
                continue;
            }
        };
        let served = serve_run(a, &plan, &mut side, &mut qp, &mr);
        match &served {
            Err(e) if !(a.quiet && e.is::<PeerHungUp>()) => eprintln!(
                "weft perf server: {} size {}: {e:#}",
                plan.test.name(),
                plan.size
            ),
            _ => {}
        }
        if a.stats {
            // The device's counters so far (they add up over the runs it served).
            let who = format!("server, after {} size {}", plan.test.name(), plan.size);
            eprint!("{}", stats_block(&who, &side));
        }
        // A run that failed here hangs up at once: the client then learns it now, as
        // "peer hung up", not after its own wait.
        if served.is_ok() {
            await_hang_up(&side, &qp);
        }
        drop(conn);
        background.clear();
    }
}

/// The client hangs up first: a run ends when the client has what it waits for, and
/// only the client knows when that is. Over UD and UC the server's last reply
/// completes when it leaves, so a server that hung up then raced that reply: the
/// client's queue pair went to ERR (its receive flushed) before the datagram arrived,
/// and a complete run read "peer hung up" (`weft perf send-lat --qp ud`, about one
/// run in eight on a loaded machine, 2026-11-30). The engine keeps running meanwhile
/// (inline progress), so whatever the client still needs leaves; bounded by
/// [`WAIT`] should the client never hang up.
fn await_hang_up(side: &Side, qp: &QueuePair) {
    let start = Instant::now();
    let mut next_look = start;
    loop {
        let now = Instant::now();
        if now >= next_look {
            // A locked query: every 100 µs.
            if matches!(qp.query(), Some((QpState::Err, _))) || now - start > WAIT {
                return;
            }
            next_look = now + Duration::from_micros(100);
        }
        // The server measures nothing now: with an engine thread, give it the core (a
        // yield can come back only after a time slice on a busy core; a short sleep
        // keeps the looks on time).
        if side.ctx.progress_mode() == Progress::Inline {
            side.ctx.progress();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// Bytes of the server's buffer for a run, and the offset the client may WRITE or
/// READ at.
fn server_buffer(p: &Plan) -> (u64, u64) {
    match p.test {
        Test::SendLat => (2 * (p.size + GRH_LEN as u64), 0),
        Test::SendBw => (rx_slots(p.size) as u64 * (p.size + GRH_LEN as u64), 0),
        // A send half and a receive half; the client WRITEs into the second.
        Test::WriteLat => (2 * p.size, p.size),
        Test::WriteBw | Test::ReadLat | Test::ReadBw => (p.size, 0),
        Test::AtomicLat => (8, 0),
        // The reply's source, then a request slot per operation in flight.
        Test::WriteSendLat => (
            p.size + u64::from(p.depth.max(1)) * u64::from(p.request.max(1)),
            p.size,
        ),
    }
}

fn rx_slots(size: u64) -> usize {
    ((RX_BYTES / size.max(1)) as usize).clamp(1, RX_SLOTS)
}

/// Receives posted before the connection is accepted.
fn pre_post(p: &Plan, qp: &mut QueuePair, mr: &MemoryRegion) -> anyhow::Result<()> {
    let slot = (p.size + GRH_LEN as u64) as usize;
    // send-lat: every request lands in the one receive slot (the server only counts
    // them); send-bw: a slot per receive.
    let (n, stride) = match p.test {
        Test::SendLat => (p.depth.max(1) as usize, 0),
        Test::SendBw => (rx_slots(p.size), slot),
        _ => return Ok(()),
    };
    qp.post_recv((0..n).map(|i| RecvWr {
        wr_id: i as u64,
        sg_list: [mr.sge(i * stride, slot as u32)].into(),
    }))?;
    Ok(())
}

fn serve_run(
    a: &Args,
    p: &Plan,
    side: &mut Side,
    qp: &mut QueuePair,
    mr: &MemoryRegion,
) -> anyhow::Result<()> {
    let ud = a.qp == Qp::Ud;
    let slot = (p.size + GRH_LEN as u64) as usize;
    let skip = if ud { GRH_LEN } else { 0 };
    match p.test {
        Test::WriteSendLat => window::serve_write_send(a, p, side, qp, mr),
        Test::SendLat => {
            let reply_off = slot;
            let mut turnarounds: Vec<(u64, u64)> = Vec::new();
            let origin = Instant::now();
            // Requests that arrived and wait for their reply: with several in flight
            // (`--outstanding`) one poll may return more than one.
            let mut arrived = std::collections::VecDeque::new();
            // The turnaround's clock reads only where it is reported (`--symmetric`):
            // two reads (some 30 ns each here) between a request and its reply are the
            // benchmark's cost, not the stack's, and would add 30 ns to every one-way
            // figure, which no peer's server pays.
            let clock = |on: bool| on.then(|| origin.elapsed().as_nanos() as u64);
            // One reply request, changed in place and posted borrowed ([`Bw::post`]).
            let mut reply = send_wr(mr, reply_off + skip, p.size, a.inline, false);
            for seq in 0..p.count {
                let t2;
                let src = loop {
                    if let Some(c) = arrived.pop_front() {
                        t2 = clock(p.symmetric);
                        break c;
                    }
                    let cs = side.wait()?;
                    arrived.extend(cs.iter().filter(|c| c.opcode.is_recv()).copied());
                };
                // The receive of the round `depth` ahead; none past the last, which
                // would only be flushed when the client hangs up.
                if seq + u64::from(p.depth.max(1)) < p.count {
                    qp.post_recv([RecvWr {
                        wr_id: 0,
                        sg_list: [mr.sge(0, slot as u32)].into(),
                    }])?;
                }
                if ud {
                    let ah = qp
                        .pd()
                        .create_ah_from_wc(&src)
                        .ok_or_else(|| anyhow!("UD receive without a source"))?;
                    reply.ud = Some(ah.dest(src.src_qp.unwrap_or(0), ConnParam::default().qkey));
                }
                // The last reply is signaled: the run ends when it has left (with
                // inline progress nothing would send it after this loop).
                reply.signaled = seq + 1 == p.count;
                let t3 = clock(p.symmetric);
                qp.post_send([&reply])?;
                if let (Some(t2), Some(t3)) = (t2, t3) {
                    turnarounds.push((seq, t3 - t2));
                }
            }
            drain_sends(side)?;
            if p.symmetric {
                send_turnarounds(side, qp, &turnarounds)?;
            }
            Ok(())
        }
        Test::SendBw => {
            let deadline = Instant::now() + Duration::from_secs(120);
            // RC delivers every message; UC/UD may lose some, so they stop when the
            // client disconnects.
            // Until the client hangs up: it does once every message is acknowledged
            // (RC) or sent (UC, UD, which may lose some).
            // The deadline and, on an empty poll, the QP's state are looked at every
            // 1024th poll, not on each: a clock read and a locked query per empty poll
            // were a fifth of this loop's time under thread progress (perf,
            // 2026-11-30), a cost of the benchmark that perftest's server does not pay.
            let mut polls = 0u32;
            loop {
                side.out.clear();
                polls = polls.wrapping_add(1);
                let look = polls % 1024 == 0;
                if look && Instant::now() >= deadline {
                    break;
                }
                if side.cq.poll(&mut side.out, 64) == 0 {
                    if look && matches!(qp.query(), Some((QpState::Err, _))) {
                        break;
                    }
                    continue;
                }
                let again: Vec<RecvWr> = side
                    .out
                    .iter()
                    .filter(|c| c.opcode.is_recv() && c.status == WcStatus::Success)
                    .map(|c| RecvWr {
                        wr_id: c.wr_id,
                        sg_list: [mr.sge(c.wr_id as usize * slot, slot as u32)].into(),
                    })
                    .collect();
                if side.out.iter().any(|c| c.status != WcStatus::Success) {
                    break;
                }
                qp.post_recv(again)?;
            }
            Ok(())
        }
        Test::WriteLat => {
            let mut b = [0u8; 1];
            let size = p.size as usize;
            for seq in 0..p.count {
                let m = marker(seq);
                let deadline = Instant::now() + WAIT;
                let mut spins = 0u32;
                loop {
                    mr.read(2 * size - 1, &mut b)?;
                    if b[0] == m {
                        break;
                    }
                    if Instant::now() > deadline {
                        bail!("write-lat: round {seq} never arrived");
                    }
                    spins = spins.wrapping_add(1);
                    // The client hung up: it stops early at its time limit (and
                    // reports how many rounds it measured), so this is the end, not
                    // a round that never came.
                    if spins % 4096 == 0 && matches!(qp.query(), Some((QpState::Err, _))) {
                        return Ok(());
                    }
                    side.spin();
                }
                mr.write(size - 1, &[m])?;
                let mut wr = write_wr(mr, p.remote, p.size, a.inline, seq);
                wr.signaled |= seq + 1 == p.count;
                let signaled = wr.signaled;
                qp.post_send([wr])?;
                if signaled {
                    drain_sends(side)?;
                }
            }
            Ok(())
        }
        // Passive: the client READs, WRITEs or runs atomics; wait until it hangs up.
        // With inline progress this loop is the engine: it runs passes back to back
        // and looks at the QP's state (a locked query) only every few milliseconds.
        _ => {
            let deadline = Instant::now() + Duration::from_secs(300);
            let mut next_check = Instant::now();
            while Instant::now() < deadline {
                if Instant::now() >= next_check {
                    if matches!(qp.query(), Some((QpState::Err, _))) {
                        break;
                    }
                    next_check = Instant::now() + Duration::from_millis(5);
                }
                if side.ctx.progress_mode() == Progress::Inline {
                    side.ctx.progress();
                } else {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            Ok(())
        }
    }
}

/// Wait for a send-side completion (the signaled last request of a run).
/// `--stats`: a side's device and waiter counters as one block, labelled, written by
/// the caller in one call. Under `--local` the server and the client share a
/// terminal, and the pretty printer's many small writes to unbuffered stderr
/// interleaved their dumps character by character.
fn stats_block(who: &str, side: &Side) -> String {
    format!(
        "{who}:\n{:#?}\nwaits: {:?}\n",
        side.ctx.stats(),
        side.waiter.stats()
    )
}

fn drain_sends(side: &mut Side) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        side.out.clear();
        if side.cq.poll(&mut side.out, 64) == 0 {
            side.spin();
            continue;
        }
        for c in &side.out {
            match c.status {
                WcStatus::Success if !c.opcode.is_recv() => return Ok(()),
                WcStatus::Success => {}
                // The client hangs up once it has the last reply; if the ACK for that
                // reply had not left yet, the reply is flushed, not lost.
                WcStatus::WrFlushErr => return Ok(()),
                s => bail!("completion error: {s:?} (wr {})", c.wr_id),
            }
        }
    }
    bail!("the last reply was never acknowledged")
}

/// Latency loops ask for a completion every `SIGNAL_EVERY` WRITEs (to free send
/// queue slots) and reap it at once.
fn needs_reap(seq: u64) -> bool {
    seq % SIGNAL_EVERY == SIGNAL_EVERY - 1
}

/// The WRITE of a write-lat round: this side's send half to the peer's receive half.
fn write_wr(mr: &MemoryRegion, remote: RemoteAddr, size: u64, inline: u64, seq: u64) -> SendWr {
    let mut wr = SendWr::new(
        0,
        WrOp::Write { remote, imm: None },
        [mr.sge(0, size as u32)],
    );
    wr.inline = size <= inline.min(256);
    wr.signaled = needs_reap(seq);
    wr
}

/// The symmetric method: the server's (seq, t3 − t2) pairs go back as one SEND.
fn send_turnarounds(side: &mut Side, qp: &mut QueuePair, t: &[(u64, u64)]) -> anyhow::Result<()> {
    let mut bytes = Vec::with_capacity(t.len() * 16);
    for (s, d) in t {
        bytes.extend_from_slice(&s.to_le_bytes());
        bytes.extend_from_slice(&d.to_le_bytes());
    }
    let mr = qp.pd().register(bytes, Access::LOCAL_WRITE);
    qp.post_send([SendWr::new(
        9,
        WrOp::Send {
            imm: Some(t.len() as u32),
        },
        [mr.sge(0, mr.len() as u32)],
    )])?;
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if side.wait()?.iter().any(|c| c.wr_id == 9) {
            return Ok(());
        }
    }
    bail!("turnaround report was not acknowledged")
}

// ---------------------------------------------------------------------------------
// Client

fn sizes(a: &Args) -> Vec<u64> {
    if a.test == Test::AtomicLat {
        return vec![8];
    }
    if a.all {
        let cap = if a.qp == Qp::Ud {
            a.mtu as u64
        } else {
            run::SWEEP_MAX
        };
        return run::sweep_sizes(cap);
    }
    if !a.sizes.is_empty() {
        return a.sizes.clone();
    }
    vec![a.size.unwrap_or(if a.test.is_lat() { 2 } else { 65536 })]
}

/// What every record of this run is about: weft, the test, the link, the QP type.
fn meta(a: &Args) -> Meta {
    Meta {
        system: "weft".into(),
        test: a.test.name().into(),
        link: format!("{:?}", a.link).to_lowercase(),
        qp: a.qp.name().into(),
    }
}

fn client(a: &Args, at: SocketAddr, peer_pid: Option<u32>) -> anyhow::Result<()> {
    if a.qps > 1 {
        return qps::client(a, at, peer_pid);
    }
    let meta = meta(a);
    let mut out = Output::stdout(a.json);
    let mut prog = Prog::new(!a.quiet);
    let sizes = sizes(a);
    let mut first_error = None;
    let ctx = device(a)?;
    for (k, &size) in sizes.iter().enumerate() {
        prog.begin(k + 1, sizes.len(), format!("{} {} B", a.test.name(), size));
        let iters = a.iters.unwrap_or(if a.test.is_lat() { 1000 } else { 5000 });
        let iters = if a.test.is_lat() {
            iters
        } else {
            run::bw_messages(size, iters)
        };
        let warmup = a.warmup.unwrap_or((iters / 10).clamp(10, 1000));
        let opts = LoopOpts {
            warmup,
            iters,
            time_limit: Duration::from_secs_f64(a.time_limit),
            peer_pid,
            pause: Duration::from_micros(a.pause_us),
        };
        let rec = match client_run(a, &ctx, at, size, &opts, &meta, &mut prog) {
            Ok(mut r) => {
                note_buffers(a, &mut r);
                r
            }
            Err(e) => {
                first_error.get_or_insert_with(|| format!("{e:#}"));
                crate::perf::record::Record::failed(&meta, size, format!("{e:#}"))
            }
        };
        out.emit(&rec)?;
    }
    hang_up(a, &ctx, at, first_error, sizes.len())
}

/// The end of a client run: tell the server we are done (it answers with a rejection
/// and exits), then fail with the first error when the run had a single size.
fn hang_up(
    a: &Args,
    ctx: &Context,
    at: SocketAddr,
    first_error: Option<String>,
    sizes: usize,
) -> anyhow::Result<()> {
    let (_s, mut qp) = queues(ctx, a, 2)?;
    let done = Plan {
        done: true,
        test: a.test,
        size: 0,
        count: 0,
        symmetric: false,
        remote: RemoteAddr { addr: 0, rkey: 0 },
        depth: 0,
        request: 0,
        background: false,
    };
    let _ = cm::connect(&mut qp, at, &param(a, done.encode()));
    match first_error {
        Some(e) if sizes == 1 => bail!("{e}"),
        _ => Ok(()),
    }
}

fn client_run(
    a: &Args,
    ctx: &Context,
    at: SocketAddr,
    size: u64,
    opts: &LoopOpts,
    meta: &Meta,
    prog: &mut Prog,
) -> anyhow::Result<crate::perf::record::Record> {
    if let Some(depth) = window::depth(a) {
        return window::client_run(a, ctx, at, size, depth, opts, meta, prog);
    }
    let (mut side, mut qp) = queues(ctx, a, 4)?;
    let slot = size + GRH_LEN as u64;
    let mr_len = match a.test {
        Test::SendLat | Test::SendBw => 2 * slot,
        Test::WriteLat => 2 * size,
        Test::AtomicLat => 64,
        _ => size,
    };
    let mr = buffer(a, qp.pd(), mr_len.max(64) as usize, Access::ALL)?;
    let plan = Plan {
        done: false,
        test: a.test,
        size,
        count: opts.warmup + opts.iters,
        symmetric: a.symmetric,
        // write-lat: the server WRITEs into our receive half.
        remote: mr.remote(size as usize),
        depth: 0,
        request: 0,
        background: false,
    };
    let p = param(a, plan.encode());
    cm::init_qp(&mut qp, &p)?;
    if a.test == Test::SendLat {
        qp.post_recv([RecvWr {
            wr_id: 0,
            sg_list: [mr.sge(slot as usize, slot as u32)].into(),
        }])?;
    }
    let conn = cm::connect(&mut qp, at, &p)?;
    let remote = conn.remote().clone();
    let server_buf = remote_of(&remote.private_data)?;
    let ud_dest = (a.qp == Qp::Ud).then(|| {
        qp.pd()
            .create_ah(remote.addr)
            .map(|ah| ah.dest(remote.qpn, remote.qkey))
    });
    let ud_dest = match ud_dest {
        Some(d) => Some(d?),
        None => None,
    };
    let record = if a.test.is_lat() {
        let mut b = [0u8; 1];
        // send-lat's request: one, posted borrowed each round ([`Bw::post`]).
        let lat_wr = SendWr {
            ud: ud_dest,
            ..send_wr(&mr, 0, size, a.inline, false)
        };
        let total = opts.warmup + opts.iters;
        let run = run::ping_pong(opts, prog, |seq| {
            match a.test {
                Test::SendLat => {
                    qp.post_send([&lat_wr])?;
                    loop {
                        if side.wait()?.iter().any(|c| c.opcode.is_recv()) {
                            break;
                        }
                    }
                    // The next round's receive; none after the last, so a symmetric
                    // run's turnaround report finds its own, larger receive.
                    if seq + 1 < total {
                        qp.post_recv([RecvWr {
                            wr_id: 0,
                            sg_list: [mr.sge(slot as usize, slot as u32)].into(),
                        }])?;
                    }
                }
                Test::WriteLat => {
                    let m = marker(seq);
                    mr.write(size as usize - 1, &[m])?;
                    qp.post_send([write_wr(&mr, server_buf, size, a.inline, seq)])?;
                    if needs_reap(seq) {
                        side.wait()?;
                    }
                    let deadline = Instant::now() + WAIT;
                    loop {
                        mr.read(2 * size as usize - 1, &mut b)?;
                        if b[0] == m {
                            break;
                        }
                        if Instant::now() > deadline {
                            bail!("write-lat: no reply to round {seq}");
                        }
                        side.spin();
                    }
                }
                Test::ReadLat => {
                    qp.post_send([SendWr::new(
                        1,
                        WrOp::Read { remote: server_buf },
                        [mr.sge(0, size as u32)],
                    )])?;
                    side.wait()?;
                }
                Test::AtomicLat => {
                    qp.post_send([SendWr::new(
                        1,
                        WrOp::FetchAdd {
                            remote: server_buf,
                            add: 1,
                        },
                        [mr.sge(0, 8)],
                    )])?;
                    side.wait()?;
                }
                _ => unreachable_test()?,
            }
            Ok(Round::Answered)
        })?;
        let turn = if a.symmetric {
            Some(recv_turnarounds(
                &mut side,
                &mut qp,
                opts.warmup + opts.iters,
            )?)
        } else {
            None
        };
        if matches!(a.test, Test::ReadLat | Test::AtomicLat) {
            round_trip_record(meta, size, &run)
        } else {
            latency_record(meta, size, &run, turn.as_deref(), 64)
        }
    } else {
        let op = match a.test {
            Test::SendBw => WrOp::Send { imm: None },
            Test::WriteBw => WrOp::Write {
                remote: server_buf,
                imm: None,
            },
            _ => WrOp::Read { remote: server_buf },
        };
        let mut wr = SendWr::new(0, op, [mr.sge(0, size as u32)]);
        wr.inline = a.test != Test::ReadBw && size <= a.inline.min(256);
        wr.ud = ud_dest;
        let st = std::cell::RefCell::new(Bw {
            side: &mut side,
            qp: &mut qp,
            wr,
            depth: a.tx_depth as u64,
            posted: 0,
            completed: 0,
        });
        let run = run::bandwidth(
            opts,
            prog,
            |_seq| st.borrow_mut().post(),
            || st.borrow_mut().finish(),
        )?;
        let posted = st.borrow().posted;
        let mut r = bandwidth_record(meta, size, &run);
        if posted > opts.warmup + opts.iters {
            r.note = Some(format!(
                "{} extra messages rounded the run up to a completion",
                posted - opts.warmup - opts.iters
            ));
        }
        r
    };
    // The ACK for the last message received leaves with the next pass (a pass sends
    // before it receives); run it before hanging up, so the server's last reply
    // completes instead of being flushed.
    for _ in 0..4 {
        side.spin();
    }
    if a.stats {
        eprint!("{}", stats_block("client", &side));
    }
    drop(conn);
    Ok(record)
}

/// The sender's side of a bandwidth run: `depth` requests in flight, a completion
/// every `SIGNAL_EVERY`.
struct Bw<'a> {
    side: &'a mut Side,
    qp: &'a mut QueuePair,
    wr: SendWr,
    depth: u64,
    posted: u64,
    completed: u64,
}

impl Bw<'_> {
    /// A completion every this many requests (at most the depth, or the window
    /// would wait for a completion that is never requested).
    fn every(&self) -> u64 {
        SIGNAL_EVERY.min(self.depth).max(1)
    }

    fn reap(&mut self) -> anyhow::Result<()> {
        let n = self.side.wait()?.len() as u64;
        self.completed += n * self.every();
        Ok(())
    }

    fn post(&mut self) -> anyhow::Result<()> {
        while self.posted.saturating_sub(self.completed) >= self.depth {
            self.reap()?;
        }
        // One request, changed in place and posted borrowed (perftest's way with
        // `ibv_post_send`): a clone and the moves of an owned one were ~8 % of the
        // sender's time (perf, docs/results/verbs.md).
        self.posted += 1;
        self.wr.wr_id = self.posted;
        self.wr.signaled = self.posted % self.every() == 0;
        self.qp.post_send([&self.wr])?;
        Ok(())
    }

    /// Round the tail up to a signaled request, then wait for everything.
    fn finish(&mut self) -> anyhow::Result<()> {
        while self.posted % self.every() != 0 {
            self.post()?;
        }
        while self.completed < self.posted {
            self.reap()?;
        }
        Ok(())
    }
}

fn unreachable_test() -> anyhow::Result<()> {
    bail!("not a latency test")
}

/// The server's `(seq, t3 − t2)` report of a symmetric send-lat run (16 bytes a
/// round, one SEND; an early arrival waits for this receive with an RNR NAK).
fn recv_turnarounds(
    side: &mut Side,
    qp: &mut QueuePair,
    rounds: u64,
) -> anyhow::Result<Vec<(u64, u64)>> {
    let mr = qp
        .pd()
        .alloc_mr((rounds as usize * 16).max(16), Access::LOCAL_WRITE);
    qp.post_recv([RecvWr {
        wr_id: 9,
        sg_list: [mr.sge(0, mr.len() as u32)].into(),
    }])?;
    let deadline = Instant::now() + WAIT;
    let len = loop {
        if let Some(c) = side
            .wait()?
            .iter()
            .find(|c| c.wr_id == 9 && c.opcode.is_recv())
        {
            break c.byte_len as usize;
        }
        if Instant::now() > deadline {
            bail!("no turnaround report from the server");
        }
    };
    let bytes = mr.to_vec(0, len)?;
    Ok(bytes
        .chunks_exact(16)
        .map(|c| {
            let s = u64::from_le_bytes(c[..8].try_into().unwrap_or([0; 8]));
            let d = u64::from_le_bytes(c[8..].try_into().unwrap_or([0; 8]));
            (s, d)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_verbs::WcOpcode;

    fn wc(wr_id: u64, status: WcStatus, opcode: WcOpcode) -> Completion {
        Completion::new(wr_id, status, opcode, 1)
    }

    #[test]
    fn a_batch_keeps_its_successes_when_the_peer_hung_up_behind_them() {
        // The last reply arrived, then the hang-up flushed the receives behind it.
        let mut out = vec![
            wc(7, WcStatus::Success, WcOpcode::Recv),
            wc(8, WcStatus::WrFlushErr, WcOpcode::Recv),
            wc(3, WcStatus::WrFlushErr, WcOpcode::Send),
        ];
        assert!(sift(&mut out).expect("flushes are not an error"));
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].wr_id, out[0].status), (7, WcStatus::Success));
        // A batch of successes is left as it is.
        let mut out = vec![wc(1, WcStatus::Success, WcOpcode::Send)];
        assert!(!sift(&mut out).unwrap());
        assert_eq!(out.len(), 1);
        // Any other failure is an error, flushes beside it or not.
        let mut out = vec![
            wc(1, WcStatus::WrFlushErr, WcOpcode::Recv),
            wc(2, WcStatus::RemAccessErr, WcOpcode::RdmaWrite),
        ];
        let err = sift(&mut out).unwrap_err().to_string();
        assert!(err.contains("RemAccessErr"), "{err}");
    }
}
