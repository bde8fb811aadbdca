//! The server: a listener, completion-queue clusters, a worker pool (DaRPC §4.2).
//!
//! - **Clusters.** Each cluster is one device (its own software RNIC, so its own
//!   link port) with one completion queue that all its connections share, and one
//!   *cluster head* thread that polls it. With [`Progress::Inline`] the head also
//!   runs the device's engine, so a request goes from the link to the handler and
//!   back without leaving the thread. The listener hands each new connection to the
//!   least-loaded cluster; load is the head's poll history (the share of recent polls
//!   that found work), ties broken by connection count.
//! - **In place or on the pool.** A message whose methods are all [`Exec::InPlace`]
//!   runs on the head as it is taken from the queue; one with a [`Exec::Blocking`]
//!   method goes to the worker pool. Either way the message is answered by one
//!   message (see `conn.rs` for why that is the flow control).
//! - **Load shedding.** Work queued or running off the heads (pool and stolen work)
//!   is bounded by `max_in_flight`; a request beyond it is answered at once with
//!   [`Code::Overloaded`](crate::Code::Overloaded).
//! - **Per-connection ordering.** A head takes a connection's messages in the
//!   order they arrived and runs its in-place requests in that order, answering in
//!   that order too; a request that must first be fetched by rendezvous READ holds
//!   the messages behind it until its bytes are here and it has run (`admit`,
//!   `drain`). Requests of [`Exec::Blocking`] methods are handed to the pool in
//!   order but may finish after later requests; work stealing gives up ordering.
//! - **Work stealing** (opt-in: it gives up per-connection ordering). A head that
//!   found work in many consecutive polls puts the extra messages of a poll into a
//!   queue every head checks before its own completion queue.
//! - **Hostile clients.** Every frame is parsed with checks; a malformed message is
//!   counted, answered with [`Code::InvalidArgument`](crate::Code::InvalidArgument),
//!   and the server goes on.
//! - **Dead clients.** The connection manager moves a QP to ERR when its client's
//!   side channel closes (exit, kill); the flush completions close the connection.
//!   An optional idle timeout closes connections that went silent.

use crate::conn::{self, Buffers, DeviceOptions, Hello};
use crate::frame::{frames, Header, Kind, Rendezvous, HEADER_LEN};
use crate::idle::{IdleLoop, IdleSpin, Next};
use crate::metrics::{MethodMetrics, Registry};
use crate::service::{CallContext, Exec, Method, Service};
use crate::status::{Code, Status};
use crate::IdMap;
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use weft_verbs::cm::{self, ConnParam, Listener};
use weft_verbs::{
    Completion, CompletionChannel, CompletionQueue, Context, LinkKind, Progress, ProtectionDomain,
    QpInitAttr, QpType, QueuePair, WcOpcode, WcStatus,
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// How a server is set up.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// udp or shm, progress mode, ICRC.
    pub device: DeviceOptions,
    /// Completion-queue clusters (one head thread and one device each).
    pub clusters: usize,
    /// Receive buffers per connection (the client's credits).
    pub ring: usize,
    /// Bytes per receive buffer; larger messages go by rendezvous.
    pub buffer_size: usize,
    /// Worker threads for [`Exec::Blocking`] methods.
    pub workers: usize,
    /// Most requests queued or running off the cluster heads before new ones are
    /// shed with `Overloaded`.
    pub max_in_flight: usize,
    /// Let idle heads take work from loaded ones (reorders a connection's calls).
    pub work_stealing: bool,
    /// Close connections silent for this long (clients' keepalives keep them open).
    pub idle_timeout: Option<Duration>,
    /// How long an idle head polls before it blocks: learned by default
    /// ([`IdleSpin::Adaptive`]), or fixed.
    pub idle_spin: IdleSpin,
    /// Largest message accepted by rendezvous.
    pub max_message: usize,
    /// Choose which replies go inline and which by rendezvous from costs measured
    /// on each connection (within the protocol's limits: the QP's inline limit, the
    /// client's buffer); `false`: those limits themselves.
    pub adaptive_thresholds: bool,
}

impl ServerConfig {
    /// Defaults for `link`: one cluster, engine thread, 32 × 4 KiB receive buffers per
    /// connection, 2 workers, 1024 in flight, no stealing, no idle timeout.
    pub fn new(link: LinkKind) -> ServerConfig {
        ServerConfig {
            device: DeviceOptions::new(link),
            clusters: 1,
            ring: 32,
            buffer_size: 4096,
            workers: 2,
            max_in_flight: 1024,
            work_stealing: false,
            idle_timeout: None,
            idle_spin: IdleSpin::default(),
            max_message: 64 << 20,
            adaptive_thresholds: true,
        }
    }
}

/// Server-wide counters.
#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    rejected: AtomicU64,
    closed: AtomicU64,
    messages: AtomicU64,
    requests: AtomicU64,
    malformed: AtomicU64,
    overloaded: AtomicU64,
    deadline_exceeded: AtomicU64,
    cancelled: AtomicU64,
    stolen: AtomicU64,
    pooled: AtomicU64,
    split: AtomicU64,
    rendezvous_in: AtomicU64,
    rendezvous_out: AtomicU64,
    pings: AtomicU64,
    stray: AtomicU64,
    inline_max: AtomicU64,
    eager_max: AtomicU64,
    threshold_changes: AtomicU64,
}

/// A snapshot of the server's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections accepted.
    pub connections_accepted: u64,
    /// Connection requests refused (not a weft-rpc client, handshake failed).
    pub connections_rejected: u64,
    /// Connections closed (peer gone, idle timeout, server side).
    pub connections_closed: u64,
    /// Messages received.
    pub messages: u64,
    /// Request frames received.
    pub requests: u64,
    /// Messages that did not parse (answered with `InvalidArgument`).
    pub malformed_frames: u64,
    /// Requests shed with `Overloaded`.
    pub overloaded: u64,
    /// Requests whose deadline passed before they ran.
    pub deadline_exceeded: u64,
    /// Requests cancelled before they ran.
    pub cancelled: u64,
    /// Messages, or parts of split ones, run by a head other than their
    /// connection's.
    pub stolen: u64,
    /// Messages run on the worker pool.
    pub pooled: u64,
    /// Messages of many requests (a batching client's) run in parts on several
    /// threads, the pool's workers or the heads, and answered as one.
    pub split: u64,
    /// Messages received by RDMA READ (larger than a receive buffer).
    pub rendezvous_in: u64,
    /// Replies sent by rendezvous.
    pub rendezvous_out: u64,
    /// Keepalive pings answered.
    pub pings: u64,
    /// Completions for a queue pair the head holds no connection for (one that
    /// closed already); dropped.
    pub stray_completions: u64,
    /// Replies up to this many bytes go inline, on the connection accepted or whose
    /// thresholds moved last (0: none yet).
    pub inline_max: u64,
    /// Replies up to this many bytes go eager (a SEND into the client's buffer),
    /// larger ones by rendezvous, on the connection accepted or whose thresholds
    /// moved last.
    pub eager_max: u64,
    /// Times any connection moved its `inline_max` or `eager_max`.
    pub threshold_changes: u64,
    /// Per cluster: live connections and load (per mille of recent polls that found
    /// work).
    pub clusters: Vec<ClusterStats>,
}

/// One cluster's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterStats {
    /// Live connections.
    pub connections: usize,
    /// Per mille of recent polls that found work.
    pub load_permille: u32,
    /// Connections ever placed here.
    pub placed: u64,
    /// Idle periods of the head that ended with work found while it spun.
    pub idle_spun: u64,
    /// Idle periods of the head that ended with work after it blocked.
    pub idle_blocked: u64,
    /// The head's spin for its current or last idle period, zero when it blocked at
    /// once ([`ServerConfig::idle_spin`]).
    pub spin_budget: Duration,
}

/// A server connection as every thread that answers on it sees it.
#[derive(Debug)]
struct ConnShared {
    id: u64,
    /// The QP's number (known without the `tx` lock, which the acceptor holds while
    /// the handshake runs).
    qpn: u32,
    cluster: usize,
    ctx: Context,
    tx: Mutex<Tx>,
    /// Cancel flags of requests queued or running off the head.
    calls: Mutex<IdMap<Arc<AtomicBool>>>,
    cm: Mutex<Option<cm::Connection>>,
    closed: AtomicBool,
}

#[derive(Debug)]
struct Tx {
    qp: QueuePair,
    bufs: Buffers,
}

/// A message, or a part of one, to run off its head.
#[derive(Debug)]
struct Job {
    conn: Arc<ConnShared>,
    msg: Vec<u8>,
    arrived: Instant,
    requests: usize,
    /// A part of a message split across threads: whose replies to join, and which
    /// part this is.
    part: Option<(Arc<Gather>, usize)>,
}

/// The replies of a message whose requests run in parts on several threads (a
/// batched message's requests on the worker pool or shared between heads): the
/// protocol answers a message with one message, so that answer leaves when the
/// last part is done, with the parts' replies in the message's order.
#[derive(Debug)]
struct Gather {
    /// Each part's reply frames, and the parts still running.
    parts: Mutex<(Vec<Vec<u8>>, usize)>,
}

impl Gather {
    fn new(parts: usize) -> Arc<Gather> {
        Arc::new(Gather {
            parts: Mutex::new((vec![Vec::new(); parts], parts)),
        })
    }

    /// Part `i` is done with `reply`: the whole answer when it was the last.
    fn done(&self, i: usize, reply: &[u8]) -> Option<Vec<u8>> {
        let mut g = lock(&self.parts);
        let (replies, left) = &mut *g;
        if let Some(r) = replies.get_mut(i) {
            r.extend_from_slice(reply);
        }
        *left = left.saturating_sub(1);
        if *left > 0 {
            return None;
        }
        let mut all = replies.concat();
        finish_reply(&mut all);
        Some(all)
    }
}

/// The frames of `msg` in at most `parts` runs of consecutive frames with about
/// equal numbers of requests, each run with its request count. Every run holds a
/// request (frames of other kinds travel with the run before them, or the first).
/// Malformed frames are left out: callers split only messages that surveyed clean.
fn split(msg: &[u8], parts: usize) -> Vec<(Vec<u8>, usize)> {
    let requests = frames(msg)
        .flatten()
        .filter(|f| f.header.kind == Kind::REQUEST)
        .count();
    let per = requests.div_ceil(parts.max(1)).max(1);
    // Each run takes about its share of the message's bytes.
    let share = msg.len().div_ceil(requests.div_ceil(per).max(1));
    let mut runs: Vec<(Vec<u8>, usize)> = vec![(Vec::with_capacity(share), 0)];
    let mut seen = 0;
    for f in frames(msg).flatten() {
        let is_request = f.header.kind == Kind::REQUEST;
        let full = runs.last().is_some_and(|r| r.1 >= per);
        if is_request && full && seen < requests {
            runs.push((Vec::with_capacity(share), 0));
        }
        if let Some(run) = runs.last_mut() {
            f.header.emit(f.payload, &mut run.0);
            if is_request {
                run.1 += 1;
                seen += 1;
            }
        }
    }
    runs
}

#[derive(Debug)]
struct Cluster {
    ctx: Context,
    pd: ProtectionDomain,
    cq: Mutex<CompletionQueue>,
    channel: Option<CompletionChannel>,
    incoming: Mutex<Vec<Arc<ConnShared>>>,
    has_incoming: AtomicBool,
    conns: AtomicUsize,
    placed: AtomicU64,
    load: AtomicU32,
    thread: Mutex<Option<std::thread::Thread>>,
    idle_spun: AtomicU64,
    idle_blocked: AtomicU64,
    spin_budget_ns: AtomicU64,
    /// The last measured cost of a completion to the head (ns; 0: none yet).
    completion_ns: AtomicU64,
}

#[derive(Debug)]
struct MethodEntry {
    exec: Exec,
    name: String,
    metrics: Arc<MethodMetrics>,
}

struct Shared {
    cfg: ServerConfig,
    service: Arc<dyn Service>,
    methods: HashMap<u32, MethodEntry>,
    unknown: Arc<MethodMetrics>,
    metrics: Registry,
    counters: Counters,
    clusters: Vec<Cluster>,
    stop: AtomicBool,
    pool: Mutex<VecDeque<Job>>,
    pool_cv: Condvar,
    steal: Mutex<VecDeque<Job>>,
    steal_len: AtomicUsize,
    in_flight: AtomicUsize,
    next_conn: AtomicU64,
}

impl Shared {
    /// Whether heads share work: asked for, and there is another head to take it.
    fn stealing(&self) -> bool {
        self.cfg.work_stealing && self.clusters.len() > 1
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("cfg", &self.cfg)
            .field("clusters", &self.clusters.len())
            .finish()
    }
}

/// A running server. Dropping it (or [`Server::shutdown`]) stops every thread and
/// closes every connection.
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    addr: SocketAddr,
    threads: Vec<JoinHandle<()>>,
}

/// Scratch buffers of a thread that runs messages.
#[derive(Debug, Default)]
struct Scratch {
    msg: Vec<u8>,
    reply: Vec<u8>,
    resp: Vec<u8>,
}

impl Server {
    /// Start serving `service` with `cfg`; clients connect to `addr` (a TCP address
    /// for the connection manager; port 0 picks one, see [`Server::local_addr`]).
    pub fn start(
        service: Arc<dyn Service>,
        cfg: ServerConfig,
        addr: SocketAddr,
    ) -> Result<Server, Status> {
        if cfg.ring == 0 || cfg.ring > usize::from(u16::MAX) || cfg.clusters == 0 {
            return Err(Status::invalid_argument(
                "ring and clusters must be positive",
            ));
        }
        if cfg.buffer_size < conn::MIN_BUFFER {
            return Err(Status::invalid_argument(format!(
                "buffer_size must be at least {}",
                conn::MIN_BUFFER
            )));
        }
        let metrics = Registry::default();
        let mut methods = HashMap::new();
        for Method { id, name, exec } in service.methods() {
            let m = metrics.method(id, || name.clone());
            if methods
                .insert(
                    id,
                    MethodEntry {
                        exec,
                        name,
                        metrics: m,
                    },
                )
                .is_some()
            {
                return Err(Status::invalid_argument(format!(
                    "method id {id} used twice"
                )));
            }
        }
        let unknown = metrics.method(u32::MAX, || "(unknown method)".into());
        let mut clusters = Vec::with_capacity(cfg.clusters);
        for _ in 0..cfg.clusters {
            let ctx = cfg.device.open()?;
            let channel = match cfg.device.progress {
                Progress::Thread => Some(
                    CompletionChannel::new(&ctx)
                        .map_err(|e| Status::internal(format!("completion channel: {e}")))?,
                ),
                Progress::Inline => None,
            };
            let cq = CompletionQueue::new(&ctx, 8192, channel.as_ref());
            clusters.push(Cluster {
                pd: ctx.alloc_pd(),
                ctx,
                cq: Mutex::new(cq),
                channel,
                incoming: Mutex::new(Vec::new()),
                has_incoming: AtomicBool::new(false),
                conns: AtomicUsize::new(0),
                placed: AtomicU64::new(0),
                load: AtomicU32::new(0),
                thread: Mutex::new(None),
                idle_spun: AtomicU64::new(0),
                idle_blocked: AtomicU64::new(0),
                spin_budget_ns: AtomicU64::new(0),
                completion_ns: AtomicU64::new(0),
            });
        }
        let listener = Listener::bind(&clusters[0].ctx, addr)
            .map_err(|e| Status::unavailable(format!("binding {addr}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let shared = Arc::new(Shared {
            cfg,
            service,
            methods,
            unknown,
            metrics,
            counters: Counters::default(),
            clusters,
            stop: AtomicBool::new(false),
            pool: Mutex::new(VecDeque::new()),
            pool_cv: Condvar::new(),
            steal: Mutex::new(VecDeque::new()),
            steal_len: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            next_conn: AtomicU64::new(1),
        });
        let mut threads = Vec::new();
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(f)
                .map_err(|e| Status::internal(format!("spawning a thread: {e}")))
        };
        for i in 0..shared.clusters.len() {
            let s = Arc::clone(&shared);
            let t = spawn(format!("weft-rpc-head{i}"), Box::new(move || head(&s, i)))?;
            *lock(&shared.clusters[i].thread) = Some(t.thread().clone());
            threads.push(t);
        }
        for i in 0..shared.cfg.workers {
            let s = Arc::clone(&shared);
            threads.push(spawn(
                format!("weft-rpc-worker{i}"),
                Box::new(move || worker(&s)),
            )?);
        }
        let s = Arc::clone(&shared);
        threads.push(spawn(
            "weft-rpc-accept".into(),
            Box::new(move || acceptor(&s, &listener)),
        )?);
        tracing::info!(%addr, clusters = shared.clusters.len(), "weft-rpc server started");
        Ok(Server {
            shared,
            addr,
            threads,
        })
    }

    /// Where clients connect.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Per-method counters.
    pub fn metrics(&self) -> &Registry {
        &self.shared.metrics
    }

    /// Server-wide counters.
    pub fn stats(&self) -> ServerStats {
        let c = &self.shared.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ServerStats {
            connections_accepted: g(&c.accepted),
            connections_rejected: g(&c.rejected),
            connections_closed: g(&c.closed),
            messages: g(&c.messages),
            requests: g(&c.requests),
            malformed_frames: g(&c.malformed),
            overloaded: g(&c.overloaded),
            deadline_exceeded: g(&c.deadline_exceeded),
            cancelled: g(&c.cancelled),
            stolen: g(&c.stolen),
            pooled: g(&c.pooled),
            split: g(&c.split),
            rendezvous_in: g(&c.rendezvous_in),
            rendezvous_out: g(&c.rendezvous_out),
            pings: g(&c.pings),
            stray_completions: g(&c.stray),
            inline_max: g(&c.inline_max),
            eager_max: g(&c.eager_max),
            threshold_changes: g(&c.threshold_changes),
            clusters: self
                .shared
                .clusters
                .iter()
                .map(|cl| ClusterStats {
                    connections: cl.conns.load(Ordering::Relaxed),
                    load_permille: cl.load.load(Ordering::Relaxed),
                    placed: cl.placed.load(Ordering::Relaxed),
                    idle_spun: cl.idle_spun.load(Ordering::Relaxed),
                    idle_blocked: cl.idle_blocked.load(Ordering::Relaxed),
                    spin_budget: Duration::from_nanos(cl.spin_budget_ns.load(Ordering::Relaxed)),
                })
                .collect(),
        }
    }

    /// The devices of the clusters (their link addresses and engine counters).
    pub fn devices(&self) -> Vec<Context> {
        self.shared.clusters.iter().map(|c| c.ctx.clone()).collect()
    }

    /// Stop: every thread ends, every connection closes (clients see
    /// `Unavailable`).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.pool_cv.notify_all();
        for c in &self.shared.clusters {
            if let Some(t) = lock(&c.thread).as_ref() {
                t.unpark();
            }
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn acceptor(s: &Arc<Shared>, listener: &Listener) {
    while !s.stop.load(Ordering::Acquire) {
        let req = match listener.get_request(Duration::from_millis(50)) {
            Ok(r) => r,
            Err(weft_verbs::Error::Timeout) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "connection request failed");
                continue;
            }
        };
        let hello = match Hello::decode(&req.peer().private_data) {
            Ok(h) => h,
            Err(why) => {
                s.counters.rejected.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%why, "refused a connection");
                req.reject(&why.to_string());
                continue;
            }
        };
        if let Err(e) = accept_one(s, req, hello) {
            s.counters.rejected.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(error = %e, "accepting a connection failed");
        }
    }
}

/// The least-loaded cluster: load from the poll history, in steps of 10 %, then
/// connection count.
fn pick_cluster(s: &Shared) -> usize {
    (0..s.clusters.len())
        .min_by_key(|&i| {
            let c = &s.clusters[i];
            (
                c.load.load(Ordering::Relaxed) / 100,
                c.conns.load(Ordering::Relaxed),
                i,
            )
        })
        .unwrap_or(0)
}

fn accept_one(s: &Arc<Shared>, req: cm::ConnectRequest, peer: Hello) -> Result<(), Status> {
    let ci = pick_cluster(s);
    let cl = &s.clusters[ci];
    let cfg = &s.cfg;
    let mut init = QpInitAttr::new(QpType::Rc);
    init.max_send_wr = 4 * cfg.ring + 16;
    init.max_recv_wr = cfg.ring;
    let mut qp = {
        let cq = lock(&cl.cq);
        cl.pd
            .create_qp(&cq, &cq, None, init)
            .map_err(|e| Status::internal(format!("create_qp: {e}")))?
    };
    let param = ConnParam {
        private_data: Hello {
            ring: cfg.ring as u16,
            buf: cfg.buffer_size as u32,
        }
        .encode(),
        ..ConnParam::default()
    };
    cm::init_qp(&mut qp, &param).map_err(|e| Status::internal(format!("init_qp: {e}")))?;
    let mut bufs = Buffers::new(&cl.pd, cfg.ring, cfg.buffer_size, cfg.adaptive_thresholds);
    bufs.set_peer_buf(peer.buf as usize);
    s.counters
        .inline_max
        .store(bufs.policy.inline_max() as u64, Ordering::Relaxed);
    s.counters
        .eager_max
        .store(bufs.eager_max() as u64, Ordering::Relaxed);
    bufs.post_ring(&mut qp)?;
    let conn = Arc::new(ConnShared {
        id: s.next_conn.fetch_add(1, Ordering::Relaxed),
        qpn: qp.qp_num(),
        cluster: ci,
        ctx: cl.ctx.clone(),
        tx: Mutex::new(Tx { qp, bufs }),
        calls: Mutex::new(IdMap::default()),
        cm: Mutex::new(None),
        closed: AtomicBool::new(false),
    });
    // The head learns of the connection before the client can send on it.
    lock(&cl.incoming).push(Arc::clone(&conn));
    cl.has_incoming.store(true, Ordering::Release);
    cl.conns.fetch_add(1, Ordering::Relaxed);
    cl.placed.fetch_add(1, Ordering::Relaxed);
    let accepted = {
        let mut tx = lock(&conn.tx);
        req.accept(&mut tx.qp, &param)
    };
    match accepted {
        Ok(c) => {
            *lock(&conn.cm) = Some(c);
            s.counters.accepted.fetch_add(1, Ordering::Relaxed);
            tracing::info!(conn = conn.id, cluster = ci, "connection accepted");
            if let Some(t) = lock(&cl.thread).as_ref() {
                t.unpark();
            }
            Ok(())
        }
        Err(e) => {
            conn.closed.store(true, Ordering::Release);
            Err(Status::unavailable(format!("accept: {e}")))
        }
    }
}

/// A connection as its head holds it.
#[derive(Debug)]
struct HeadConn {
    shared: Arc<ConnShared>,
    last_rx: Instant,
    /// Messages waiting behind a rendezvous READ, in arrival order (empty when none
    /// is in progress). See [`admit`].
    held: VecDeque<Held>,
}

/// A message of a connection that waits for its turn (per-connection ordering).
#[derive(Debug)]
enum Held {
    /// A rendezvous whose READ is in progress: (read id, the client's call id).
    Reading(u64, u64),
    /// The bytes of a finished READ, to run when they reach the front.
    Read(Vec<u8>),
    /// A READ finished but its bytes were lost: answer the call with `Internal`.
    Lost(u64),
    /// A message that arrived behind a READ, and when.
    Message(Vec<u8>, Instant),
}

/// Polls in a row that found work before a head shares work.
const STEAL_STREAK: u32 = 4;
/// Messages found in one poll that count as a backlog worth sharing.
const STEAL_BACKLOG: usize = 8;
/// Completions taken per poll.
const POLL_BATCH: usize = 32;

fn head(s: &Arc<Shared>, ci: usize) {
    let cl = &s.clusters[ci];
    let mut conns: IdMap<HeadConn> = IdMap::default();
    let mut wcs: Vec<Completion> = Vec::with_capacity(POLL_BATCH);
    let mut scratch = Scratch::default();
    let mut idle = IdleLoop::new(s.cfg.idle_spin, cl.channel.is_some());
    publish_idle(cl, &idle);
    let mut streak = 0u32;
    let (mut polls, mut busy) = (0u32, 0u32);
    let mut last_sweep = Instant::now();
    let stealing = s.stealing();
    while !s.stop.load(Ordering::Relaxed) {
        adopt_incoming(cl, &mut conns);
        // Work other heads shared, before our own queue (DaRPC's work stealing).
        if stealing && s.steal_len.load(Ordering::Relaxed) > 0 {
            let job = lock(&s.steal).pop_front();
            if let Some(job) = job {
                s.steal_len.fetch_sub(1, Ordering::Relaxed);
                if job.conn.cluster != ci {
                    s.counters.stolen.fetch_add(1, Ordering::Relaxed);
                }
                run_job(s, job, Some(ci), &mut scratch);
                if idle.event(None) {
                    publish_idle(cl, &idle);
                }
            }
        }
        wcs.clear();
        let timed = (s.cfg.adaptive_thresholds && polls % 16 == 0).then(Instant::now);
        let (n, fired) = {
            let mut cq = lock(&cl.cq);
            (cq.poll(&mut wcs, POLL_BATCH), cq.fired_us())
        };
        if let Some(t) = timed.filter(|_| n > 0) {
            // What a completion costs the head (with inline progress, the engine
            // pass that made it too), for the connections' send policies.
            let per = t.elapsed().as_nanos() / n as u128;
            cl.completion_ns
                .store(per.clamp(1, u128::from(u64::MAX)) as u64, Ordering::Relaxed);
        }
        polls += 1;
        if n > 0 {
            // Again, now: a completion can only be for a connection the acceptor
            // handed over before the client could send, but this thread may have been
            // preempted between the check above and the poll for the whole handshake
            // and the first message (seen under CPU load: the message was dropped as
            // stray and its call hung).
            adopt_incoming(cl, &mut conns);
            busy += 1;
            streak += 1;
            if idle.event(cl.channel.as_ref().map(|_| fired)) {
                publish_idle(cl, &idle);
            }
            let recvs = wcs.iter().filter(|c| c.opcode.is_recv()).count();
            // Loaded: work found in many polls in a row (DaRPC's measure), or a
            // deep backlog in this one.
            let mut share =
                stealing && recvs > 1 && (streak >= STEAL_STREAK || recvs >= STEAL_BACKLOG);
            let mut kept = 0;
            for wc in wcs.drain(..) {
                let is_recv = wc.opcode.is_recv() && wc.status == WcStatus::Success;
                // Keep the first message of a poll, share the rest while loaded.
                let give = share && is_recv && kept >= 1;
                if is_recv {
                    kept += 1;
                }
                on_completion(s, ci, &mut conns, wc, &mut scratch, give);
                if s.steal_len.load(Ordering::Relaxed) >= s.cfg.max_in_flight / 2 {
                    share = false;
                }
            }
        } else {
            streak = 0;
            match idle.empty() {
                Next::Spin => idle.pause(),
                // Armed before the last look: a completion that came before arming
                // fires nothing, and this loop's next poll finds it.
                Next::Arm => {
                    if cl.channel.is_some() {
                        lock(&cl.cq).req_notify();
                    }
                }
                Next::Block => {
                    // Inline progress yields up to 2 ms (the head runs the engine),
                    // then parks; a channel wait lasts 2 ms. With the learned spin,
                    // the sleeps grow with the idle time (a quarter of it, see
                    // `idle_wait`).
                    let idle_for = idle.idle_for();
                    let longer = match s.cfg.idle_spin {
                        IdleSpin::Fixed(_) => None,
                        IdleSpin::Adaptive { .. } => Some(idle_for / 4),
                    };
                    idle_wait(cl, idle_for, longer.filter(|_| !stealing))
                }
            }
        }
        if polls >= 256 {
            cl.load.store(busy * 1000 / polls, Ordering::Relaxed);
            polls = 0;
            busy = 0;
        }
        if last_sweep.elapsed() >= Duration::from_millis(20) {
            last_sweep = Instant::now();
            sweep(s, cl, &mut conns);
        }
    }
    for (_, c) in conns.drain() {
        close(s, cl, &c.shared, "server stopped");
    }
}

/// Take the connections the acceptor handed to this cluster's head.
fn adopt_incoming(cl: &Cluster, conns: &mut IdMap<HeadConn>) {
    if cl.has_incoming.swap(false, Ordering::Acquire) {
        for c in lock(&cl.incoming).drain(..) {
            conns.insert(
                u64::from(c.qpn),
                HeadConn {
                    shared: c,
                    last_rx: Instant::now(),
                    held: VecDeque::new(),
                },
            );
        }
    }
}

/// The head's idle counts and next spin, for [`Server::stats`].
fn publish_idle(cl: &Cluster, idle: &IdleLoop) {
    let c = idle.counts();
    cl.idle_spun.store(c.spun, Ordering::Relaxed);
    cl.idle_blocked.store(c.blocked, Ordering::Relaxed);
    let ns = idle.budget().as_nanos().min(u128::from(u64::MAX)) as u64;
    cl.spin_budget_ns.store(ns, Ordering::Relaxed);
}

/// An idle head: block on the (armed) completion channel (engine thread), or yield
/// for the first 2 ms of idleness and then park briefly (inline progress: the head
/// is the engine, so it wakes to run it).
///
/// `longer`: sleep about this long (a quarter of the idle time so far), within
/// bounds: a channel wait 2–16 ms (a new connection's first message fires the
/// channel; stop waits at most one), a park 0.2–1 ms (the head is the engine: an
/// arrival after a long idleness waits up to 1 ms). So an idle server wakes about
/// 60 times a second with an engine thread, 1000 with inline progress, instead of
/// 500 and 5000. `None`: 2 ms and 200 µs.
fn idle_wait(cl: &Cluster, idle: Duration, longer: Option<Duration>) {
    const MS: Duration = Duration::from_millis(1);
    match &cl.channel {
        Some(ch) => {
            // The wait is bounded so stealing, new connections and stop are seen.
            let t = longer.map_or(2 * MS, |l| l.clamp(2 * MS, 16 * MS));
            if let Ok(_id) = ch.get_cq_event(t) {
                lock(&cl.cq).ack_events(1);
            }
        }
        None => {
            if idle < 2 * MS {
                std::thread::yield_now();
            } else {
                let t = longer.map_or(MS / 5, |l| l.clamp(MS / 5, MS));
                std::thread::park_timeout(t);
            }
        }
    }
}

/// Periodic: connections the acceptor gave up on, idle timeouts.
fn sweep(s: &Shared, cl: &Cluster, conns: &mut IdMap<HeadConn>) {
    let now = Instant::now();
    let mut dead = Vec::new();
    for (&k, c) in conns.iter() {
        let idle = s
            .cfg
            .idle_timeout
            .is_some_and(|t| now.duration_since(c.last_rx) > t);
        if c.shared.closed.load(Ordering::Acquire) || idle {
            dead.push((k, idle));
        }
    }
    for (k, idle) in dead {
        if let Some(c) = conns.remove(&k) {
            close(
                s,
                cl,
                &c.shared,
                if idle { "idle timeout" } else { "closed" },
            );
        }
    }
}

fn close(s: &Shared, cl: &Cluster, c: &ConnShared, why: &str) {
    c.closed.store(true, Ordering::Release);
    // Nobody waits for the answers any more: queued calls are skipped, running
    // ones see `CallContext::is_cancelled`.
    for flag in lock(&c.calls).values() {
        flag.store(true, Ordering::Relaxed);
    }
    drop(lock(&c.cm).take());
    cl.conns.fetch_sub(1, Ordering::Relaxed);
    s.counters.closed.fetch_add(1, Ordering::Relaxed);
    tracing::info!(conn = c.id, why, "connection closed");
}

fn on_completion(
    s: &Arc<Shared>,
    ci: usize,
    conns: &mut IdMap<HeadConn>,
    wc: Completion,
    scratch: &mut Scratch,
    give_away: bool,
) {
    let key = u64::from(wc.qpn);
    let Some(hc) = conns.get_mut(&key) else {
        // A connection closed already.
        s.counters.stray.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let c = Arc::clone(&hc.shared);
    if wc.status != WcStatus::Success {
        let why = format!("{:?} on {:?}", wc.status, wc.opcode);
        conns.remove(&key);
        close(s, &s.clusters[ci], &c, &why);
        return;
    }
    match wc.opcode {
        WcOpcode::Recv | WcOpcode::RecvRdmaWithImm => {
            hc.last_rx = Instant::now();
            let arrived = Instant::now();
            let ok = {
                let mut tx = lock(&c.tx);
                let Tx { qp, bufs } = &mut *tx;
                bufs.take_recv(qp, &wc, &mut scratch.msg)
            };
            if ok.is_none() {
                return;
            }
            s.counters.messages.fetch_add(1, Ordering::Relaxed);
            let msg = std::mem::take(&mut scratch.msg);
            let kept = admit(s, &c, ci, hc, &msg, arrived, scratch, give_away);
            scratch.msg = msg;
            if !kept {
                conns.remove(&key);
                close(s, &s.clusters[ci], &c, "flow control violated");
            }
        }
        WcOpcode::RdmaRead => {
            let read = conn::untag(wc.wr_id);
            let got = lock(&c.tx).bufs.read_done(wc.wr_id);
            if let Some(h) = hc
                .held
                .iter_mut()
                .find(|h| matches!(h, Held::Reading(r, _) if *r == read))
            {
                *h = match (got, &*h) {
                    (Some((msg, _)), _) => Held::Read(msg),
                    (None, Held::Reading(_, call)) => Held::Lost(*call),
                    (None, _) => return,
                };
            }
            drain(s, &c, ci, hc, scratch);
        }
        _ => {
            let ns = s.clusters[ci].completion_ns.load(Ordering::Relaxed);
            let ns = (ns > 0).then_some(ns as f64);
            lock(&c.tx).bufs.send_done(wc.wr_id, ns);
        }
    }
}

/// What a message needs, from one checked pass over its frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Survey {
    /// REQUEST frames.
    pub requests: usize,
    /// PING frames (a keepalive is a message of PINGs only).
    pub pings: usize,
    /// Frames of any kind.
    pub frames: usize,
    /// A request for a method that runs on the worker pool.
    pub blocking: bool,
    /// The message is a rendezvous: the request waits in the client's memory for a
    /// READ (client's id, where).
    pub rendezvous: Option<(u64, Rendezvous)>,
    /// Why the message is refused, and the id to answer (0 when none parsed).
    pub bad: Option<(u64, String)>,
}

/// Check a client → server message: every frame parses, only kinds a client may
/// send, a rendezvous alone in its message. `from_read` marks the bytes of a
/// rendezvous READ, which may not announce another rendezvous (a client could chain
/// them without bound). `blocking` says whether a method runs on the pool. Pure: the
/// fuzz targets run it on arbitrary bytes (`crate::fuzzing::message`).
pub(crate) fn survey(msg: &[u8], from_read: bool, blocking: impl Fn(u32) -> bool) -> Survey {
    let mut v = Survey {
        requests: 0,
        pings: 0,
        frames: 0,
        blocking: false,
        rendezvous: None,
        bad: None,
    };
    let mut n = 0;
    for f in frames(msg) {
        n += 1;
        v.frames = n;
        let f = match f {
            Ok(f) => f,
            Err(e) => {
                // The id of a frame whose header parsed, if any, so the caller learns.
                let id = msg
                    .get(8..16)
                    .map(|b| u64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
                    .filter(|_| n == 1)
                    .unwrap_or(0);
                v.bad = Some((id, format!("malformed frame: {e}")));
                return v;
            }
        };
        match f.header.kind {
            Kind::REQUEST => {
                v.requests += 1;
                if blocking(f.header.code) {
                    v.blocking = true;
                }
            }
            Kind::PING => v.pings += 1,
            Kind::CANCEL | Kind::RELEASE => {}
            Kind::RNDV => match Rendezvous::parse(f.payload) {
                Ok(d) if n == 1 && !from_read && msg.len() == HEADER_LEN + Rendezvous::LEN => {
                    v.rendezvous = Some((f.header.id, d));
                }
                _ => {
                    v.bad = Some((f.header.id, "malformed rendezvous frame".into()));
                    return v;
                }
            },
            k => {
                v.bad = Some((f.header.id, format!("unexpected frame kind {k:?}")));
                return v;
            }
        }
    }
    v
}

/// Take a message from the receive ring, in order (DaRPC's per-connection
/// ordering, kept across rendezvous): a message that arrives while an earlier
/// rendezvous of its connection is still being READ waits behind it in
/// `hc.held`, and [`drain`] runs it once everything before it has run. A rendezvous
/// among the waiting messages starts its READ at once (large messages still move in
/// parallel, up to `MAX_RENDEZVOUS`), but runs in its turn.
///
/// Every waiting message is unanswered, so a client that keeps to its credits never
/// has more than `ring` of them here. False when the client sent more (it ignores
/// flow control, and the queue would grow without bound): the caller closes the
/// connection.
#[allow(clippy::too_many_arguments)]
fn admit(
    s: &Arc<Shared>,
    c: &Arc<ConnShared>,
    ci: usize,
    hc: &mut HeadConn,
    msg: &[u8],
    arrived: Instant,
    scratch: &mut Scratch,
    give_away: bool,
) -> bool {
    if hc.held.is_empty() {
        if let Some(r) = on_message(s, c, ci, msg, arrived, scratch, give_away, false) {
            hc.held.push_back(r);
        }
        return true;
    }
    if hc.held.len() >= s.cfg.ring {
        s.counters.malformed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            conn = c.id,
            waiting = hc.held.len(),
            "more unanswered messages than credits"
        );
        return false;
    }
    let v = survey(msg, false, |_| false);
    if v.bad.is_none() && v.frames > 0 && v.pings == v.frames {
        // A keepalive is answered now, not behind a READ that may take longer than
        // the client's keepalive timeout; a PONG answers no call, so its place in the
        // order does not matter, and it is still one answer for one message.
        if let Some(r) = on_message(s, c, ci, msg, arrived, scratch, give_away, false) {
            hc.held.push_back(r);
        }
        return true;
    }
    let early = match v {
        Survey {
            rendezvous: Some((rid, d)),
            bad: None,
            ..
        } if d.len as usize <= s.cfg.max_message => start_rendezvous(s, c, d)
            .ok()
            .map(|r| Held::Reading(r, rid)),
        _ => None,
    };
    // Anything else (and a rendezvous that could not start) is looked at in its turn.
    hc.held
        .push_back(early.unwrap_or_else(|| Held::Message(msg.to_vec(), arrived)));
    true
}

/// Run the waiting messages at the front of `hc.held` until it is empty or its
/// front is a READ still in progress.
fn drain(
    s: &Arc<Shared>,
    c: &Arc<ConnShared>,
    ci: usize,
    hc: &mut HeadConn,
    scratch: &mut Scratch,
) {
    while !matches!(hc.held.front(), None | Some(Held::Reading(..))) {
        match hc.held.pop_front() {
            Some(Held::Read(msg)) => {
                // The clock of a large request starts when its bytes are here.
                on_message(s, c, ci, &msg, Instant::now(), scratch, false, true);
            }
            Some(Held::Lost(call)) => {
                answer(
                    s,
                    c,
                    call,
                    Code::Internal,
                    b"the request's bytes were lost after its READ",
                    scratch,
                );
            }
            Some(Held::Message(msg, arrived)) => {
                if let Some(r) = on_message(s, c, ci, &msg, arrived, scratch, false, false) {
                    hc.held.push_front(r);
                }
            }
            Some(Held::Reading(..)) | None => {}
        }
    }
}

/// Answer call `id` with `code` alone in a message.
fn answer(s: &Shared, c: &ConnShared, id: u64, code: Code, why: &[u8], scratch: &mut Scratch) {
    scratch.reply.clear();
    let mut h = Header::new(Kind::RESPONSE, id);
    h.code = code.to_wire();
    h.emit(why, &mut scratch.reply);
    send_reply(s, c, &scratch.reply, true);
}

/// Start the READ of a client's rendezvous message; its read id.
fn start_rendezvous(s: &Shared, c: &ConnShared, d: Rendezvous) -> Result<u64, Status> {
    let mut tx = lock(&c.tx);
    if tx.bufs.reads.len() >= conn::MAX_RENDEZVOUS {
        // Each read costs a buffer of the announced size: a client may not make
        // the server allocate without bound.
        return Err(Status::overloaded(
            "too many large messages in flight on this connection",
        ));
    }
    let Tx { qp, bufs } = &mut *tx;
    let r = bufs.start_read(qp, d, 0)?;
    s.counters.rendezvous_in.fetch_add(1, Ordering::Relaxed);
    Ok(r)
}

/// Run one message (or the bytes of a rendezvous READ, `from_read`). A rendezvous
/// message starts its READ and returns it: the message is answered when the READ's
/// bytes have run.
#[allow(clippy::too_many_arguments)]
fn on_message(
    s: &Arc<Shared>,
    c: &Arc<ConnShared>,
    ci: usize,
    msg: &[u8],
    arrived: Instant,
    scratch: &mut Scratch,
    give_away: bool,
    from_read: bool,
) -> Option<Held> {
    let v = survey(msg, from_read, |code| {
        s.methods
            .get(&code)
            .is_some_and(|m| m.exec == Exec::Blocking)
    });
    if let Some((id, why)) = v.bad {
        s.counters.malformed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(conn = c.id, %why, "malformed message");
        answer(s, c, id, Code::InvalidArgument, why.as_bytes(), scratch);
        return None;
    }
    if let Some((rid, d)) = v.rendezvous {
        // A client's rendezvous id is its call's id.
        if d.len as usize > s.cfg.max_message {
            let why = format!("{} B exceeds the server's {} B", d.len, s.cfg.max_message);
            answer(s, c, rid, Code::MessageTooLarge, why.as_bytes(), scratch);
            return None;
        }
        return match start_rendezvous(s, c, d) {
            Ok(r) => Some(Held::Reading(r, rid)),
            Err(e) => {
                if e.code() == Code::Overloaded {
                    s.counters.overloaded.fetch_add(1, Ordering::Relaxed);
                }
                tracing::warn!(conn = c.id, error = %e, "rendezvous read not started");
                answer(s, c, rid, e.code(), e.message().as_bytes(), scratch);
                None
            }
        };
    }
    s.counters
        .requests
        .fetch_add(v.requests as u64, Ordering::Relaxed);
    // A batched message with a backlog's worth of requests is shared between the
    // heads like a backlog of messages: batching must not cost the server its
    // parallelism.
    let stealing = s.stealing();
    let give_away = give_away || (stealing && v.requests >= STEAL_BACKLOG);
    let off_head = v.blocking || give_away;
    if off_head && v.requests > 0 {
        if s.in_flight.load(Ordering::Relaxed) + v.requests > s.cfg.max_in_flight {
            shed(s, c, msg, arrived, scratch);
            return None;
        }
        s.in_flight.fetch_add(v.requests, Ordering::Relaxed);
        {
            let mut calls = lock(&c.calls);
            for f in frames(msg).flatten() {
                if f.header.kind == Kind::REQUEST {
                    calls.insert(f.header.id, Arc::new(AtomicBool::new(false)));
                }
            }
        }
        // Many requests in one message (the client batched them) run in parts, one
        // per thread that can take them: the pool's workers, or the heads.
        let threads = if v.blocking {
            s.cfg.workers
        } else {
            s.clusters.len()
        };
        let parts = threads.min(v.requests).max(1);
        let jobs: Vec<Job> = if parts > 1 {
            s.counters.split.fetch_add(1, Ordering::Relaxed);
            let runs = split(msg, parts);
            let gather = Gather::new(runs.len());
            runs.into_iter()
                .enumerate()
                .map(|(i, (bytes, requests))| Job {
                    conn: Arc::clone(c),
                    msg: bytes,
                    arrived,
                    requests,
                    part: Some((Arc::clone(&gather), i)),
                })
                .collect()
        } else {
            vec![Job {
                conn: Arc::clone(c),
                msg: msg.to_vec(),
                arrived,
                requests: v.requests,
                part: None,
            }]
        };
        let n = jobs.len();
        if v.blocking {
            s.counters.pooled.fetch_add(1, Ordering::Relaxed);
            lock(&s.pool).extend(jobs);
            if n > 1 {
                s.pool_cv.notify_all();
            } else {
                s.pool_cv.notify_one();
            }
        } else {
            lock(&s.steal).extend(jobs);
            s.steal_len.fetch_add(n, Ordering::Relaxed);
            for (i, other) in s.clusters.iter().enumerate() {
                if i != ci {
                    if let Some(t) = lock(&other.thread).as_ref() {
                        t.unpark();
                    }
                }
            }
        }
        return None;
    }
    execute(s, c, ci, msg, arrived, scratch, false);
    finish_reply(&mut scratch.reply);
    send_reply(s, c, &scratch.reply, true);
    None
}

/// Answer every request of `msg` with `Overloaded` (cancels and pings as usual).
fn shed(s: &Shared, c: &ConnShared, msg: &[u8], arrived: Instant, scratch: &mut Scratch) {
    scratch.reply.clear();
    for f in frames(msg).flatten() {
        match f.header.kind {
            Kind::REQUEST => {
                s.counters.overloaded.fetch_add(1, Ordering::Relaxed);
                let m = s
                    .methods
                    .get(&f.header.code)
                    .map_or(&s.unknown, |m| &m.metrics);
                m.record(Err(Code::Overloaded), arrived.elapsed());
                let mut h = Header::new(Kind::RESPONSE, f.header.id);
                h.code = Code::Overloaded.to_wire();
                h.emit(
                    format!("in-flight limit {} reached", s.cfg.max_in_flight).as_bytes(),
                    &mut scratch.reply,
                );
            }
            _ => control(s, c, &f.header, &mut scratch.reply),
        }
    }
    finish_reply(&mut scratch.reply);
    send_reply(s, c, &scratch.reply, true);
}

/// CANCEL, PING, RELEASE.
fn control(s: &Shared, c: &ConnShared, h: &Header, reply: &mut Vec<u8>) {
    match h.kind {
        Kind::CANCEL => {
            if let Some(flag) = lock(&c.calls).get(&h.id) {
                flag.store(true, Ordering::Relaxed);
            }
        }
        Kind::PING => {
            s.counters.pings.fetch_add(1, Ordering::Relaxed);
            Header::new(Kind::PONG, h.id).emit(&[], reply);
        }
        Kind::RELEASE => lock(&c.tx).bufs.release(h.id),
        _ => {}
    }
}

fn finish_reply(reply: &mut Vec<u8>) {
    if reply.is_empty() {
        Header::new(Kind::ACK, 0).emit(&[], reply);
    }
}

/// Run every frame of `msg`, leaving their reply frames in `scratch.reply` (the
/// caller completes the reply with [`finish_reply`]).
fn execute(
    s: &Shared,
    c: &ConnShared,
    ci: usize,
    msg: &[u8],
    arrived: Instant,
    scratch: &mut Scratch,
    queued: bool,
) {
    let Scratch { reply, resp, .. } = scratch;
    reply.clear();
    for f in frames(msg).flatten() {
        let h = f.header;
        if h.kind != Kind::REQUEST {
            control(s, c, &h, reply);
            continue;
        }
        let deadline =
            (h.timeout_us > 0).then(|| arrived + Duration::from_micros(u64::from(h.timeout_us)));
        // Calls that waited off the head may have been cancelled meanwhile.
        let flag = if queued {
            lock(&c.calls).get(&h.id).cloned()
        } else {
            None
        };
        let entry = s.methods.get(&h.code);
        let metrics = entry.map_or(&s.unknown, |m| &m.metrics);
        resp.clear();
        let result = if flag.as_ref().is_some_and(|f| f.load(Ordering::Relaxed)) {
            s.counters.cancelled.fetch_add(1, Ordering::Relaxed);
            Err(Status::cancelled("cancelled by the caller before it ran"))
        } else if deadline.is_some_and(|d| Instant::now() >= d) {
            s.counters.deadline_exceeded.fetch_add(1, Ordering::Relaxed);
            Err(Status::deadline_exceeded(
                "deadline passed before the call ran",
            ))
        } else if let Some(entry) = entry {
            let cx = CallContext {
                method: h.code,
                id: h.id,
                deadline,
                cancelled: flag.as_deref(),
                conn: c.id,
                cluster: ci,
            };
            let span = tracing::debug_span!("rpc", method = %entry.name, id = h.id, conn = c.id);
            let _g = span.enter();
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                s.service.call(&cx, f.payload, resp)
            })) {
                Ok(r) => r,
                Err(_) => {
                    tracing::error!(method = %entry.name, "handler panicked");
                    Err(Status::internal("handler panicked"))
                }
            }
        } else {
            Err(Status::unimplemented(format!("no method {}", h.code)))
        };
        metrics.record(
            result.as_ref().map(|_| ()).map_err(|e| e.code()),
            arrived.elapsed(),
        );
        let mut rh = Header::new(Kind::RESPONSE, h.id);
        match result {
            Ok(()) if resp.len() + HEADER_LEN + reply.len() > s.cfg.max_message => {
                rh.code = Code::MessageTooLarge.to_wire();
                rh.emit(b"response exceeds the server's max_message", reply);
            }
            Ok(()) => rh.emit(resp, reply),
            Err(e) => {
                rh.code = e.code().to_wire();
                let m = e.message().as_bytes();
                rh.emit(&m[..m.len().min(1024)], reply);
            }
        }
    }
}

/// Post the one reply to a message; a reply larger than the client's buffer goes by
/// rendezvous.
fn send_reply(s: &Shared, c: &ConnShared, reply: &[u8], on_head: bool) {
    if c.closed.load(Ordering::Relaxed) {
        return;
    }
    let r = {
        let mut tx = lock(&c.tx);
        let Tx { qp, bufs } = &mut *tx;
        let eager_max = bufs.eager_max();
        if reply.len() > eager_max && bufs.rndv_out.len() >= 2 * s.cfg.ring {
            // Each large answer stays registered until the client READs and releases
            // it; a client that keeps calling and never releases would pin server
            // memory without bound (its credits come back with each announcement).
            // A compliant client holds at most about one ring of them.
            s.counters.malformed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                conn = c.id,
                unreleased = bufs.rndv_out.len(),
                "large answers never released: closing"
            );
            c.closed.store(true, Ordering::Release);
            return;
        }
        if let Some((inline, eager)) = bufs.take_change() {
            let c = &s.counters;
            c.inline_max.store(inline as u64, Ordering::Relaxed);
            c.eager_max.store(eager as u64, Ordering::Relaxed);
            c.threshold_changes.fetch_add(1, Ordering::Relaxed);
        }
        if reply.len() > eager_max {
            s.counters.rendezvous_out.fetch_add(1, Ordering::Relaxed);
            let id = bufs.next_rndv;
            bufs.next_rndv += 1;
            let m = bufs.rendezvous(reply.to_vec(), id);
            bufs.send(qp, &m)
        } else {
            bufs.send(qp, reply)
        }
    };
    if let Err(e) = r {
        tracing::debug!(conn = c.id, error = %e, "reply not sent");
    }
    if !on_head && c.ctx.progress_mode() == Progress::Inline {
        // The head may be busy or parked: push the reply out now.
        c.ctx.progress();
    }
}

/// Run a message off its head: on a worker (`head` None) or a stealing head.
fn run_job(s: &Shared, job: Job, head: Option<usize>, scratch: &mut Scratch) {
    let ci = head.unwrap_or(job.conn.cluster);
    execute(s, &job.conn, ci, &job.msg, job.arrived, scratch, true);
    {
        let mut m = lock(&job.conn.calls);
        for f in frames(&job.msg).flatten() {
            if f.header.kind == Kind::REQUEST {
                m.remove(&f.header.id);
            }
        }
    }
    s.in_flight.fetch_sub(job.requests, Ordering::Relaxed);
    let on_head = head == Some(job.conn.cluster);
    match &job.part {
        None => {
            finish_reply(&mut scratch.reply);
            send_reply(s, &job.conn, &scratch.reply, on_head);
        }
        Some((gather, i)) => {
            if let Some(all) = gather.done(*i, &scratch.reply) {
                send_reply(s, &job.conn, &all, on_head);
            }
        }
    }
}

fn worker(s: &Arc<Shared>) {
    let mut scratch = Scratch::default();
    loop {
        let job = {
            let mut q = lock(&s.pool);
            loop {
                if s.stop.load(Ordering::Acquire) {
                    return;
                }
                if let Some(j) = q.pop_front() {
                    break j;
                }
                q = s
                    .pool_cv
                    .wait_timeout(q, Duration::from_millis(50))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        };
        run_job(s, job, None, &mut scratch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: Kind, id: u64) -> Vec<u8> {
        let mut b = Vec::new();
        Header::new(kind, id).emit(&[], &mut b);
        b
    }

    #[test]
    fn survey_counts_the_pings_that_make_a_keepalive() {
        // Two PINGs: a keepalive, answered at once even behind a pending READ.
        let mut ka = frame(Kind::PING, 0);
        ka.extend(frame(Kind::PING, 0));
        let v = survey(&ka, false, |_| false);
        assert_eq!((v.pings, v.frames, v.bad), (2, 2, None));
        // A PING beside a request is not a keepalive: it waits its turn.
        let mut mixed = frame(Kind::PING, 0);
        mixed.extend(frame(Kind::REQUEST, 1));
        let v = survey(&mixed, false, |_| false);
        assert_eq!((v.pings, v.frames, v.requests), (1, 2, 1));
    }

    fn request(id: u64, payload: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        let mut h = Header::new(Kind::REQUEST, id);
        h.code = 7;
        h.emit(payload, &mut b);
        b
    }

    /// The requests' ids of a run, in order.
    fn ids(run: &[u8]) -> Vec<u64> {
        frames(run)
            .flatten()
            .filter(|f| f.header.kind == Kind::REQUEST)
            .map(|f| f.header.id)
            .collect()
    }

    #[test]
    fn a_split_keeps_every_frame_once_in_order_in_runs_of_equal_requests() {
        // Seven requests with a CANCEL among them, payloads of several lengths.
        let mut msg = Vec::new();
        for id in 1..=7u64 {
            msg.extend(request(id, &vec![id as u8; id as usize * 3]));
            if id == 3 {
                msg.extend(frame(Kind::CANCEL, 99));
            }
        }
        for parts in 1..=9 {
            let runs = split(&msg, parts);
            let per = 7usize.div_ceil(parts);
            assert_eq!(runs.len(), 7usize.div_ceil(per), "{parts} parts");
            assert!(runs.len() <= parts);
            // Nothing lost, nothing reordered: the runs put together are the message.
            assert_eq!(
                runs.iter()
                    .map(|r| r.0.clone())
                    .collect::<Vec<_>>()
                    .concat(),
                msg
            );
            let per = 7usize.div_ceil(parts);
            for (bytes, n) in &runs {
                assert_eq!(ids(bytes).len(), *n);
                assert!(*n >= 1 && *n <= per, "{parts} parts: a run of {n}");
            }
        }
        assert_eq!(ids(&split(&msg, 3)[1].0), vec![4, 5, 6]);
    }

    #[test]
    fn gathered_parts_answer_once_in_the_messages_order() {
        let g = Gather::new(3);
        assert_eq!(g.done(2, &request(3, b"c")), None);
        assert_eq!(g.done(0, &request(1, b"a")), None);
        let all = g.done(1, &request(2, b"b")).expect("the last part answers");
        assert_eq!(ids(&all), vec![1, 2, 3]);
        // Parts that replied nothing (every call cancelled) still make a message.
        let g = Gather::new(2);
        assert_eq!(g.done(0, &[]), None);
        let all = g.done(1, &[]).expect("answered");
        let f: Vec<_> = frames(&all).flatten().map(|f| f.header.kind).collect();
        assert_eq!(f, vec![Kind::ACK]);
    }
}
