//! The client: one connection, calls as futures or as a stream (DaRPC §4.3, §5).
//!
//! - **Futures.** [`Client::call`] returns a [`Call`], a `Future` any executor can
//!   run (or [`Call::wait`] without one). Dropping an unfinished call cancels it:
//!   it is taken out of the send queue if it has not left, else the server is sent a
//!   CANCEL (a call still queued there is then answered `Cancelled` without running).
//! - **Streams.** [`CallStream`] is DaRPC's `DaRPCStream`: issue many calls back to
//!   back, then [`CallStream::poll`] or [`CallStream::take`] the first to complete.
//! - **Direct or dispatched** (DaRPC §4.3). [`Mode::Direct`]: whoever waits polls the
//!   connection's completion queue (with [`Progress::Inline`] it also runs the
//!   engine): no thread hand-off, lowest latency, one busy caller. A future in
//!   direct mode asks to be polled again at once (it is the poller).
//!   [`Mode::Dispatched`]: a dispatcher thread polls and wakes the waiting futures
//!   and streams: callers sleep, many threads share a connection without contending
//!   for the queue.
//! - **Credits.** At most `credits` messages are unanswered (see `conn.rs`); calls
//!   beyond that wait in a send queue and leave as answers return credits.
//! - **Batching** ([`Batching`], DaRPC §6.1): queued calls leave together, many frames
//!   to a message. By default it follows the load: a call leaves at once while nothing
//!   is unanswered, and waits for the next flush (a waiting caller, an answer) while
//!   something is, so a lone call pays no batching delay and calls issued under load
//!   share messages.
//! - **Deadlines** travel with each request (as a budget) and are enforced at both
//!   ends. **Keepalive:** while calls wait and the server has been silent for
//!   `keepalive`, a PING goes out; no answer within `keepalive_timeout` and the
//!   connection is declared dead — every call fails with `Unavailable`, as it does
//!   when the server process exits or is killed (the side channel closes).

use crate::batch::{Rule, RulePicker};
use crate::conn::{Buffers, DeviceOptions, Hello};
use crate::frame::{frames, Header, Kind, Rendezvous, HEADER_LEN};
use crate::idle::{IdleLoop, IdleSpin, Next};
use crate::metrics::Registry;
use crate::status::{Code, Status};
use crate::IdMap;
use std::collections::VecDeque;
use std::future::Future;
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use weft_verbs::cm::{self, ConnParam};
use weft_verbs::{
    Completion, CompletionChannel, CompletionQueue, Context, LinkKind, Progress, QpInitAttr,
    QpType, QueuePair, WcOpcode, WcStatus,
};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Who polls the connection's completion queue (DaRPC §4.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Mode {
    /// The waiting caller polls: lowest latency.
    #[default]
    Direct,
    /// A dispatcher thread polls and wakes callers.
    Dispatched,
}

/// When a client's calls leave together in one message (many request frames to a
/// SEND; the server answers a message with one message). What batching saves is a
/// message's fixed cost at both ends (a SEND, its completion, a receive re-posted, on
/// udp a datagram through the kernel each way); what it costs is the wait of a call
/// held for company.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Batching {
    /// Every call leaves in a message of its own, at once while credits last.
    Off,
    /// Batching that follows the load. By default Nagle's rule for messages: a call
    /// leaves at once while nothing is unanswered on the connection; while something
    /// is, it waits in the send queue and leaves with the calls queued beside it at
    /// the next flush: when a caller waits, when an answer comes back (a credit), or
    /// when `max_batch` frames are queued. A lone call (one outstanding) never waits;
    /// calls issued faster than answers come back share messages, the more the busier
    /// the connection. Where the calls' measured latency says so (several calls
    /// pending, messages that cost more than the wait), the first call waits for
    /// company too, as with [`Batching::Always`]; the connection tries the other rule
    /// now and then and keeps the one whose calls finish sooner
    /// (`ClientStats::batch_tries`, `batch_switches`).
    #[default]
    Adaptive,
    /// Calls always wait for company: they leave when `max_batch` frames are queued
    /// or a caller waits (DaRPC §6.1's batching). A lone call pays for the queue.
    Always,
}

impl Batching {
    /// Whether a call waits in the send queue when the connection has `unanswered`
    /// messages out, `rule` being the adaptive policy's current rule.
    fn holds(self, unanswered: usize, rule: Rule) -> bool {
        match self {
            Batching::Off => false,
            Batching::Adaptive => rule == Rule::Gather || unanswered > 0,
            Batching::Always => true,
        }
    }

    /// Whether queued calls may share a message.
    fn packs(self) -> bool {
        self != Batching::Off
    }

    /// The policy's name: `off`, `adaptive` or `on` (what [`str::parse`] takes).
    pub fn name(self) -> &'static str {
        match self {
            Batching::Off => "off",
            Batching::Adaptive => "adaptive",
            Batching::Always => "on",
        }
    }
}

impl std::str::FromStr for Batching {
    type Err = String;

    /// `off`, `adaptive` or `on` (static batching, [`Batching::Always`]).
    fn from_str(s: &str) -> Result<Batching, String> {
        [Batching::Off, Batching::Adaptive, Batching::Always]
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| format!("unknown batching {s:?} (off, adaptive or on)"))
    }
}

/// How a client is set up.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// udp or shm, progress mode, ICRC.
    pub device: DeviceOptions,
    /// Direct or dispatched completion processing.
    pub mode: Mode,
    /// Receive buffers for answers (credits are the smaller of this and the
    /// server's ring).
    pub ring: usize,
    /// Bytes per receive buffer; larger answers come by rendezvous.
    pub buffer_size: usize,
    /// When calls leave together, up to `max_batch` frames a message.
    pub batching: Batching,
    /// Frames per message when calls leave together.
    pub max_batch: usize,
    /// Ping a server that has been silent this long while calls wait.
    pub keepalive: Duration,
    /// Declare the connection dead when a ping is unanswered this long.
    pub keepalive_timeout: Duration,
    /// Calls waiting (sent or queued) before new ones fail with `Overloaded`.
    pub max_pending: usize,
    /// Deadline of calls that set none.
    pub default_timeout: Option<Duration>,
    /// Bound on connecting.
    pub connect_timeout: Duration,
    /// Largest request (sent by rendezvous when larger than the server's buffer).
    pub max_message: usize,
    /// How long an idle dispatcher polls before it blocks: learned by default
    /// ([`IdleSpin::Adaptive`]), or fixed.
    pub idle_spin: IdleSpin,
    /// Choose which messages go inline and which by rendezvous from costs measured
    /// on the connection (within the protocol's limits: the QP's inline limit, the
    /// server's buffer); `false`: those limits themselves.
    pub adaptive_thresholds: bool,
}

impl ClientConfig {
    /// Defaults for `link`: direct mode, engine thread, 32 × 4 KiB buffers, batching
    /// that follows the load ([`Batching::Adaptive`]), keepalive after 1 s of silence,
    /// dead after 3 s more.
    pub fn new(link: LinkKind) -> ClientConfig {
        ClientConfig {
            device: DeviceOptions::new(link),
            mode: Mode::Direct,
            ring: 32,
            buffer_size: 4096,
            batching: Batching::Adaptive,
            max_batch: 16,
            keepalive: Duration::from_secs(1),
            keepalive_timeout: Duration::from_secs(3),
            max_pending: 1 << 16,
            default_timeout: None,
            connect_timeout: Duration::from_secs(5),
            max_message: 64 << 20,
            idle_spin: IdleSpin::default(),
            adaptive_thresholds: true,
        }
    }
}

/// Client-side counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Messages sent.
    pub messages_sent: u64,
    /// Request frames sent.
    pub requests_sent: u64,
    /// Calls the batching policy held in the send queue for company
    /// ([`ClientConfig::batching`]).
    pub held: u64,
    /// Answers received.
    pub messages_received: u64,
    /// CANCELs sent.
    pub cancels_sent: u64,
    /// Calls taken back from the send queue before they left.
    pub cancelled_unsent: u64,
    /// Calls failed locally by their deadline.
    pub deadline_exceeded: u64,
    /// Pings sent.
    pub pings: u64,
    /// Server messages that did not parse.
    pub malformed: u64,
    /// [`Batching::Adaptive`]: epochs of calls run under the batching rule not in
    /// force, to measure it.
    pub batch_tries: u64,
    /// [`Batching::Adaptive`]: tries that changed the rule in force.
    pub batch_switches: u64,
    /// Requests sent by rendezvous.
    pub rendezvous_out: u64,
    /// Answers received by rendezvous.
    pub rendezvous_in: u64,
    /// Credits now (messages that may still be sent unanswered).
    pub credits: u64,
    /// Idle periods of the dispatcher ([`Mode::Dispatched`]) that ended with a
    /// completion found while it spun.
    pub idle_spun: u64,
    /// Idle periods of the dispatcher that ended with a completion after it blocked.
    pub idle_blocked: u64,
    /// The dispatcher's spin for its current or last idle period, zero when it blocked
    /// at once ([`ClientConfig::idle_spin`];
    /// zero in direct mode).
    pub spin_budget: Duration,
    /// Requests up to this many bytes go inline.
    pub inline_max: u64,
    /// Requests up to this many bytes go eager (a SEND into the server's buffer);
    /// larger ones by rendezvous. At most the server's buffer.
    pub eager_max: u64,
    /// Times the connection moved `inline_max` or `eager_max`.
    pub threshold_changes: u64,
}

type Outcome = Result<Vec<u8>, Status>;

/// Completed calls of a stream.
#[derive(Debug, Default)]
struct StreamQueue {
    done: Mutex<VecDeque<(u64, Outcome)>>,
    cv: Condvar,
}

#[derive(Debug)]
enum Slot {
    Waiting(Option<Waker>),
    Done(Outcome),
    Stream(Arc<StreamQueue>),
}

#[derive(Debug)]
struct Pending {
    method: u32,
    started: Instant,
    deadline: Option<Instant>,
    slot: Slot,
}

/// An answer waiting for its turn behind a rendezvous READ. `owed`: the answer's
/// credit is given back when it runs, not when it came (so a server can make a
/// client hold no more answers than it has credits).
#[derive(Debug)]
enum Held {
    /// A READ of a rendezvous answer in progress (read id).
    Reading { read: u64, owed: bool },
    /// A finished READ's bytes, and the server's rendezvous id to release.
    Read {
        msg: Vec<u8>,
        release: u64,
        owed: bool,
    },
    /// An answer that came behind a READ.
    Message(Vec<u8>),
}

/// A frame waiting for a credit.
#[derive(Debug)]
struct Out {
    bytes: Vec<u8>,
    /// The call it belongs to (requests), for cancels of unsent calls.
    call: Option<u64>,
}

#[derive(Debug)]
struct Conn {
    qp: QueuePair,
    cq: CompletionQueue,
    bufs: Buffers,
    cm: Option<cm::Connection>,
    credits: usize,
    /// Credits when nothing is unanswered.
    max_credits: usize,
    /// Answers waiting behind a rendezvous READ, in the order they came (see
    /// [`Conn::admit`]).
    held: VecDeque<Held>,
    pending: IdMap<Pending>,
    backlog: VecDeque<Out>,
    /// Rendezvous regions of large requests, by call id (freed by the answer).
    rndv_calls: IdMap<()>,
    next_id: u64,
    dead: Option<Status>,
    wcs: Vec<Completion>,
    msg: Vec<u8>,
    frame: Vec<u8>,
    out: Vec<u8>,
    last_rx: Instant,
    ping: Option<Instant>,
    deadlines: usize,
    next_deadline_check: Instant,
    /// Polls in a row that found nothing (direct mode yields the CPU now and then:
    /// on a busy host, a poller that never yields can keep the peer it waits for
    /// off the CPU for a whole time slice).
    idle_polls: u32,
    /// Polls, for sampling.
    polls: u32,
    /// The last measured cost of a completion to the poller (ns).
    completion_ns: Option<f64>,
    /// The adaptive batching's rule, chosen from the calls' latency.
    batch_rule: RulePicker,
    stats: ClientStats,
}

#[derive(Debug)]
struct Inner {
    conn: Mutex<Conn>,
    cfg: ClientConfig,
    ctx: Context,
    channel: Option<CompletionChannel>,
    metrics: Registry,
    stop: AtomicBool,
    dispatcher: Mutex<Option<JoinHandle<()>>>,
    dispatcher_thread: Mutex<Option<std::thread::Thread>>,
    peer_ring: usize,
    idle_spun: AtomicU64,
    idle_blocked: AtomicU64,
    spin_budget_ns: AtomicU64,
}

/// A connection to a server. Cheap to clone (clones share the connection).
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// A handle that shuts the dispatcher down when the last client clone goes.
impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = lock(&self.dispatcher).take() {
            // The dispatcher holds only a weak reference; it sees `stop` or the
            // failed upgrade and ends.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

impl Client {
    /// Connect to the server at `addr` (its connection manager's TCP address).
    pub fn connect(addr: SocketAddr, cfg: ClientConfig) -> Result<Client, Status> {
        let ctx = cfg.device.open()?;
        Client::connect_on(&ctx, addr, cfg)
    }

    /// Connect using an open device (many connections may share one).
    pub fn connect_on(
        ctx: &Context,
        addr: SocketAddr,
        cfg: ClientConfig,
    ) -> Result<Client, Status> {
        if cfg.ring == 0 || cfg.ring > usize::from(u16::MAX) || cfg.max_batch == 0 {
            return Err(Status::invalid_argument(
                "ring and max_batch must be positive",
            ));
        }
        if cfg.buffer_size < crate::conn::MIN_BUFFER {
            return Err(Status::invalid_argument("buffer_size too small"));
        }
        let pd = ctx.alloc_pd();
        let channel = match (cfg.mode, ctx.progress_mode()) {
            (Mode::Dispatched, Progress::Thread) => Some(
                CompletionChannel::new(ctx)
                    .map_err(|e| Status::internal(format!("completion channel: {e}")))?,
            ),
            _ => None,
        };
        let cq = CompletionQueue::new(ctx, 4 * cfg.ring + 64, channel.as_ref());
        let mut init = QpInitAttr::new(QpType::Rc);
        init.max_send_wr = 4 * cfg.ring + 16;
        init.max_recv_wr = cfg.ring;
        let mut qp = pd
            .create_qp(&cq, &cq, None, init)
            .map_err(|e| Status::internal(format!("create_qp: {e}")))?;
        let param = ConnParam {
            private_data: Hello {
                ring: cfg.ring as u16,
                buf: cfg.buffer_size as u32,
            }
            .encode(),
            handshake_timeout: cfg.connect_timeout,
            ..ConnParam::default()
        };
        cm::init_qp(&mut qp, &param).map_err(|e| Status::internal(format!("init_qp: {e}")))?;
        let mut bufs = Buffers::new(&pd, cfg.ring, cfg.buffer_size, cfg.adaptive_thresholds);
        bufs.post_ring(&mut qp)?;
        let connection = cm::connect(&mut qp, addr, &param)
            .map_err(|e| Status::unavailable(format!("connecting to {addr}: {e}")))?;
        let server = Hello::decode(&connection.remote().private_data)
            .map_err(|why| Status::unavailable(format!("{addr}: {why}")))?;
        bufs.set_peer_buf(server.buf as usize);
        let credits = usize::from(server.ring).min(cfg.ring);
        let now = Instant::now();
        let conn = Conn {
            qp,
            cq,
            bufs,
            cm: Some(connection),
            credits,
            max_credits: credits,
            held: VecDeque::new(),
            pending: IdMap::default(),
            backlog: VecDeque::new(),
            rndv_calls: IdMap::default(),
            next_id: 1,
            dead: None,
            wcs: Vec::with_capacity(64),
            msg: Vec::new(),
            frame: Vec::new(),
            out: Vec::new(),
            last_rx: now,
            ping: None,
            deadlines: 0,
            next_deadline_check: now,
            idle_polls: 0,
            polls: 0,
            completion_ns: None,
            batch_rule: RulePicker::default(),
            stats: ClientStats::default(),
        };
        let inner = Arc::new(Inner {
            conn: Mutex::new(conn),
            cfg,
            ctx: ctx.clone(),
            channel,
            metrics: Registry::default(),
            stop: AtomicBool::new(false),
            dispatcher: Mutex::new(None),
            dispatcher_thread: Mutex::new(None),
            peer_ring: usize::from(server.ring),
            idle_spun: AtomicU64::new(0),
            idle_blocked: AtomicU64::new(0),
            spin_budget_ns: AtomicU64::new(0),
        });
        if inner.cfg.mode == Mode::Dispatched {
            let weak = Arc::downgrade(&inner);
            let t = std::thread::Builder::new()
                .name("weft-rpc-dispatch".into())
                .spawn(move || dispatcher(&weak))
                .map_err(|e| Status::internal(format!("spawning the dispatcher: {e}")))?;
            *lock(&inner.dispatcher_thread) = Some(t.thread().clone());
            *lock(&inner.dispatcher) = Some(t);
        }
        tracing::debug!(%addr, credits, "weft-rpc client connected");
        Ok(Client { inner })
    }

    /// Call `method` with `payload` (the byte API); the future resolves to the
    /// response payload.
    pub fn call(&self, method: u32, payload: &[u8]) -> Call {
        self.call_with(method, payload, self.inner.cfg.default_timeout)
    }

    /// [`Client::call`] with a deadline `timeout` from now.
    pub fn call_with(&self, method: u32, payload: &[u8], timeout: Option<Duration>) -> Call {
        let r = self
            .inner
            .start(method, payload, timeout, Slot::Waiting(None));
        match r {
            Ok(id) => Call {
                inner: Arc::clone(&self.inner),
                id,
                early: None,
                done: false,
            },
            Err(e) => Call {
                inner: Arc::clone(&self.inner),
                id: 0,
                early: Some(e),
                done: false,
            },
        }
    }

    /// A call with a serde-encoded request, resolving to a decoded response.
    pub fn call_typed<Req, Resp>(
        &self,
        method: u32,
        req: &Req,
        timeout: Option<Duration>,
    ) -> TypedCall<Resp>
    where
        Req: serde::Serialize + ?Sized,
        Resp: serde::de::DeserializeOwned,
    {
        let call = match crate::codec::to_vec(req) {
            Ok(b) => self.call_with(method, &b, timeout.or(self.inner.cfg.default_timeout)),
            Err(e) => Call {
                inner: Arc::clone(&self.inner),
                id: 0,
                early: Some(e),
                done: false,
            },
        };
        TypedCall {
            call,
            _t: PhantomData,
        }
    }

    /// A stream for many outstanding calls.
    pub fn stream(&self) -> CallStream {
        CallStream {
            client: self.clone(),
            queue: Arc::new(StreamQueue::default()),
            outstanding: 0,
        }
    }

    /// Name method `id` in this client's metrics.
    pub fn name_method(&self, id: u32, name: &str) {
        self.inner.metrics.method(id, || name.to_string());
    }

    /// Per-method counters as seen by this client (latency from call to result).
    pub fn metrics(&self) -> &Registry {
        &self.inner.metrics
    }

    /// Counters.
    pub fn stats(&self) -> ClientStats {
        let c = lock(&self.inner.conn);
        let mut s = c.stats;
        s.credits = c.credits as u64;
        s.inline_max = c.bufs.policy.inline_max() as u64;
        s.eager_max = c.bufs.eager_max() as u64;
        s.threshold_changes = c.bufs.policy.changes;
        let b = c.batch_rule.stats();
        s.batch_tries = b.tries;
        s.batch_switches = b.switches;
        let i = &self.inner;
        s.idle_spun = i.idle_spun.load(Ordering::Relaxed);
        s.idle_blocked = i.idle_blocked.load(Ordering::Relaxed);
        s.spin_budget = Duration::from_nanos(i.spin_budget_ns.load(Ordering::Relaxed));
        s
    }

    /// The server's ring: how many messages may be unanswered.
    pub fn server_ring(&self) -> usize {
        self.inner.peer_ring
    }

    /// Why the connection is dead, if it is.
    pub fn dead(&self) -> Option<Status> {
        let mut c = lock(&self.inner.conn);
        if self.inner.cfg.mode == Mode::Direct {
            c.drive(&self.inner);
        }
        c.dead.clone()
    }

    /// Run one round of completion processing now (direct mode callers that issue
    /// calls without waiting on them).
    pub fn drive(&self) {
        lock(&self.inner.conn).drive(&self.inner);
    }

    /// Send every queued call now (batching holds them until a batch fills or
    /// someone waits).
    pub fn flush(&self) {
        lock(&self.inner.conn).flush(&self.inner);
    }

    /// The device this client runs on.
    pub fn context(&self) -> &Context {
        &self.inner.ctx
    }

    /// Close the connection: waiting calls fail with `Unavailable`.
    pub fn close(&self) {
        lock(&self.inner.conn).kill(&self.inner, Status::unavailable("closed by the client"));
    }
}

impl Inner {
    fn start(
        &self,
        method: u32,
        payload: &[u8],
        timeout: Option<Duration>,
        slot: Slot,
    ) -> Result<u64, Status> {
        let mut c = lock(&self.conn);
        if let Some(d) = &c.dead {
            return Err(d.clone());
        }
        if c.pending.len() >= self.cfg.max_pending {
            return Err(Status::overloaded(format!(
                "{} calls already pending on this connection",
                c.pending.len()
            )));
        }
        if payload.len() + HEADER_LEN > self.cfg.max_message {
            return Err(Status::message_too_large(format!(
                "{} B request exceeds max_message {} B",
                payload.len(),
                self.cfg.max_message
            )));
        }
        let id = c.next_id;
        c.next_id += 1;
        let now = Instant::now();
        if c.pending.is_empty() {
            // Silence counts only while calls wait.
            c.last_rx = now;
        }
        let deadline = timeout.map(|t| now + t);
        let mut h = Header::new(Kind::REQUEST, id);
        h.code = method;
        h.timeout_us = timeout.map_or(0, |t| t.as_micros().clamp(1, u128::from(u32::MAX)) as u32);
        let mut frame = std::mem::take(&mut c.frame);
        frame.clear();
        h.emit(payload, &mut frame);
        if deadline.is_some() {
            c.deadlines += 1;
        }
        c.pending.insert(
            id,
            Pending {
                method,
                started: now,
                deadline,
                slot,
            },
        );
        c.stats.requests_sent += 1;
        if self.cfg.batching == Batching::Adaptive {
            let pending = c.pending.len();
            c.batch_rule.started(pending);
        }
        c.enqueue(self, &frame, Some(id));
        c.frame = frame;
        drop(c);
        if self.cfg.mode == Mode::Dispatched {
            if let Some(t) = lock(&self.dispatcher_thread).as_ref() {
                t.unpark();
            }
        }
        Ok(id)
    }

    /// The caller of `id` gave up.
    fn cancel(&self, id: u64) {
        let mut c = lock(&self.conn);
        let Some(p) = c.pending.remove(&id) else {
            return;
        };
        if p.deadline.is_some() {
            c.deadlines -= 1;
        }
        if c.dead.is_some() || matches!(p.slot, Slot::Done(_)) {
            return;
        }
        if let Some(i) = c.backlog.iter().position(|o| o.call == Some(id)) {
            c.backlog.remove(i);
            c.stats.cancelled_unsent += 1;
            return;
        }
        c.stats.cancels_sent += 1;
        let mut f = Vec::with_capacity(HEADER_LEN);
        Header::new(Kind::CANCEL, id).emit(&[], &mut f);
        c.enqueue(self, &f, None);
        c.flush(self);
    }
}

impl Conn {
    /// Queue one frame; send what credits allow, unless the batching policy holds it
    /// for company (then a waiting caller, an answer or a full batch flushes it).
    fn enqueue(&mut self, inner: &Inner, frame: &[u8], call: Option<u64>) {
        let hold = inner.cfg.batching.holds(
            self.max_credits.saturating_sub(self.credits),
            self.batch_rule.rule(),
        );
        if !hold
            && self.backlog.is_empty()
            && self.credits > 0
            && frame.len() <= self.bufs.eager_max()
        {
            // The common case: straight out, no copy but into registered memory.
            let Conn { qp, bufs, .. } = self;
            match bufs.send(qp, frame) {
                Ok(()) => {
                    self.credits -= 1;
                    self.stats.messages_sent += 1;
                }
                Err(e) => self.kill(inner, e),
            }
            return;
        }
        self.backlog.push_back(Out {
            bytes: frame.to_vec(),
            call,
        });
        if hold {
            self.stats.held += 1;
        }
        if !hold || self.backlog.len() >= inner.cfg.max_batch {
            self.flush(inner);
        }
    }

    /// Send queued frames while credits last.
    fn flush(&mut self, inner: &Inner) {
        let max_frames = if inner.cfg.batching.packs() {
            inner.cfg.max_batch
        } else {
            1
        };
        while self.credits > 0 && self.dead.is_none() {
            let Some(first) = self.backlog.front() else {
                return;
            };
            let mut out = std::mem::take(&mut self.out);
            out.clear();
            let eager_max = self.bufs.eager_max();
            if first.bytes.len() > eager_max {
                // Too large for the server's buffer, or cheaper by rendezvous here:
                // it READs it from here, a few at a time (later calls wait behind
                // it, in order).
                if self.rndv_calls.len() >= crate::conn::MAX_RENDEZVOUS {
                    return;
                }
                let Some(o) = self.backlog.pop_front() else {
                    return;
                };
                let id = o.call.unwrap_or(0);
                self.rndv_calls.insert(id, ());
                self.stats.rendezvous_out += 1;
                out = self.bufs.rendezvous(o.bytes, id);
            } else {
                let mut n = 0;
                while n < max_frames {
                    match self.backlog.front() {
                        Some(o) if out.len() + o.bytes.len() <= eager_max => {
                            if let Some(o) = self.backlog.pop_front() {
                                out.extend_from_slice(&o.bytes);
                                n += 1;
                            }
                        }
                        _ => break,
                    }
                }
            }
            let Conn { qp, bufs, .. } = self;
            let r = bufs.send(qp, &out);
            self.out = out;
            match r {
                Ok(()) => {
                    self.credits -= 1;
                    self.stats.messages_sent += 1;
                }
                Err(e) => {
                    self.kill(inner, e);
                    return;
                }
            }
        }
    }

    /// Poll the completion queue once and process what came; keepalive and
    /// deadlines. True when something happened.
    fn drive(&mut self, inner: &Inner) -> bool {
        if self.dead.is_some() {
            return false;
        }
        let mut wcs = std::mem::take(&mut self.wcs);
        wcs.clear();
        self.polls = self.polls.wrapping_add(1);
        let timed = (self.bufs.policy.adaptive() && self.polls % 16 == 0).then(Instant::now);
        let n = self.cq.poll(&mut wcs, 32);
        if let Some(t) = timed.filter(|_| n > 0) {
            // What a completion costs the poller (with inline progress, the engine
            // pass that made it too).
            self.completion_ns = Some(t.elapsed().as_nanos() as f64 / n as f64);
        }
        if n == 0 {
            self.idle_polls = self.idle_polls.wrapping_add(1);
        } else {
            self.idle_polls = 0;
        }
        for wc in wcs.drain(..) {
            self.on_completion(inner, wc);
        }
        self.wcs = wcs;
        // Answers return credits and end Nagle's wait: flush. Under the Gather rule
        // (direct mode), the caller's answers first: a poll that finds nothing flushes.
        if if self.gathers(inner) { n == 0 } else { n > 0 } {
            self.flush(inner);
        }
        let now = Instant::now();
        if !self.pending.is_empty() || self.ping.is_some() {
            self.keepalive(inner, now);
        }
        if self.deadlines > 0 && now >= self.next_deadline_check {
            self.next_deadline_check = now + Duration::from_micros(200);
            self.expire(inner, now);
        }
        n > 0
    }

    /// Whether held calls wait for the caller's empty poll: the adaptive batching's
    /// [`Rule::Gather`] in direct mode. A message's several answers are then all taken,
    /// and the calls the caller issues in reply to them leave together, before the
    /// queue is flushed; a flush at each answer would send the first reply alone.
    fn gathers(&self, inner: &Inner) -> bool {
        inner.cfg.mode == Mode::Direct
            && inner.cfg.batching == Batching::Adaptive
            && self.batch_rule.rule() == Rule::Gather
    }

    /// A waiting caller's turn in direct mode: send the queued calls, take what
    /// completed. Under [`Rule::Gather`] a lone queued call waits through the turn
    /// (the drive flushes it if nothing came): answers already on their way are taken
    /// first, so the call the caller issues in reply to the next one leaves with it —
    /// how a connection that sends one call a message moves to pairs. Two or more
    /// queued calls leave first, as with static batching.
    fn wait_round(&mut self, inner: &Inner) {
        if inner.cfg.batching.packs() && (!self.gathers(inner) || self.backlog.len() >= 2) {
            self.flush(inner);
        }
        self.drive(inner);
    }

    fn wants_yield(&self) -> bool {
        self.idle_polls > 0 && self.idle_polls % 16 == 0
    }

    fn keepalive(&mut self, inner: &Inner, now: Instant) {
        let silent = now.duration_since(self.last_rx);
        match self.ping {
            Some(sent) if now.duration_since(sent) > inner.cfg.keepalive_timeout => {
                self.kill(
                    inner,
                    Status::unavailable(format!(
                        "server silent for {silent:?}: keepalive unanswered"
                    )),
                );
            }
            None if silent > inner.cfg.keepalive => {
                self.ping = Some(now);
                self.stats.pings += 1;
                let mut f = Vec::with_capacity(HEADER_LEN);
                Header::new(Kind::PING, 0).emit(&[], &mut f);
                // A ping needs a credit like any message; with none free the server
                // owes answers anyway, and their absence trips the same timeout.
                self.backlog.push_front(Out {
                    bytes: f,
                    call: None,
                });
                self.flush(inner);
            }
            _ => {}
        }
    }

    fn expire(&mut self, inner: &Inner, now: Instant) {
        let expired: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.deadline.is_some_and(|d| now >= d))
            .map(|(&id, _)| id)
            .collect();
        for id in expired {
            self.stats.deadline_exceeded += 1;
            self.complete(
                inner,
                id,
                Err(Status::deadline_exceeded("deadline passed at the client")),
            );
            // Tell the server (it may not have run the call yet); a call still in
            // the send queue is simply taken back.
            if let Some(i) = self.backlog.iter().position(|o| o.call == Some(id)) {
                self.backlog.remove(i);
            } else {
                self.stats.cancels_sent += 1;
                let mut f = Vec::with_capacity(HEADER_LEN);
                Header::new(Kind::CANCEL, id).emit(&[], &mut f);
                self.backlog.push_back(Out {
                    bytes: f,
                    call: None,
                });
            }
        }
        self.flush(inner);
    }

    fn on_completion(&mut self, inner: &Inner, wc: Completion) {
        if wc.status != WcStatus::Success {
            self.kill(
                inner,
                Status::unavailable(format!(
                    "connection lost ({:?} on {:?})",
                    wc.status, wc.opcode
                )),
            );
            return;
        }
        match wc.opcode {
            WcOpcode::Recv | WcOpcode::RecvRdmaWithImm => {
                let mut msg = std::mem::take(&mut self.msg);
                let ok = {
                    let Conn { qp, bufs, .. } = self;
                    bufs.take_recv(qp, &wc, &mut msg)
                };
                if ok.is_some() {
                    self.stats.messages_received += 1;
                    self.last_rx = Instant::now();
                    // Any message shows the server alive, even one that waits behind
                    // a large answer's READ (its PONG may be that one).
                    self.ping = None;
                    self.admit(inner, &msg);
                }
                self.msg = msg;
            }
            WcOpcode::RdmaRead => {
                let read = crate::conn::untag(wc.wr_id);
                let Some((msg, release)) = self.bufs.read_done(wc.wr_id) else {
                    self.kill(inner, Status::internal("a rendezvous answer was lost"));
                    return;
                };
                self.stats.rendezvous_in += 1;
                if let Some(h) = self
                    .held
                    .iter_mut()
                    .find(|h| matches!(h, Held::Reading { read: r, .. } if *r == read))
                {
                    let owed = matches!(h, Held::Reading { owed: true, .. });
                    *h = Held::Read { msg, release, owed };
                }
                self.drain(inner);
            }
            _ => self.bufs.send_done(wc.wr_id, self.completion_ns),
        }
    }

    /// Take an answer in the order the server sent it (the server runs a
    /// connection's requests in order; so must the answers be taken): an answer that
    /// comes while an earlier rendezvous answer is still being READ waits behind it,
    /// holding its credit. A rendezvous among the waiting answers starts its READ at
    /// once.
    fn admit(&mut self, inner: &Inner, msg: &[u8]) {
        if self.held.is_empty() {
            // The answer returns the credit of the message it answers.
            self.credits += 1;
            if let Some(read) = self.on_message(inner, msg) {
                self.held.push_back(Held::Reading { read, owed: false });
            }
            return;
        }
        if self.held.len() > self.max_credits {
            // Only the front may hold no credit: the server sent more answers
            // than there were messages.
            self.stats.malformed += 1;
            self.kill(
                inner,
                Status::unavailable("the server sent more answers than it was sent messages"),
            );
            return;
        }
        let early = match frames(msg).next() {
            Some(Ok(f))
                if f.header.kind == Kind::RNDV && f.payload.len() + HEADER_LEN == msg.len() =>
            {
                Rendezvous::parse(f.payload)
                    .ok()
                    .filter(|d| d.len as usize <= inner.cfg.max_message)
                    .and_then(|d| {
                        let Conn { qp, bufs, .. } = self;
                        bufs.start_read(qp, d, f.header.id).ok()
                    })
            }
            _ => None,
        };
        self.held.push_back(match early {
            Some(read) => Held::Reading { read, owed: true },
            None => Held::Message(msg.to_vec()),
        });
    }

    /// Take the waiting answers at the front of `held` until it is empty or its
    /// front is a READ still in progress.
    fn drain(&mut self, inner: &Inner) {
        while self.dead.is_none() && !matches!(self.held.front(), None | Some(Held::Reading { .. }))
        {
            match self.held.pop_front() {
                Some(Held::Read { msg, release, owed }) => {
                    self.credits += usize::from(owed);
                    if self.on_message(inner, &msg).is_some() {
                        // A READ's bytes announced another rendezvous: a server may not
                        // chain them (its answer would never come).
                        self.stats.malformed += 1;
                        self.kill(
                            inner,
                            Status::unavailable("the server nested a rendezvous in a READ"),
                        );
                        return;
                    }
                    let mut f = Vec::with_capacity(HEADER_LEN);
                    Header::new(Kind::RELEASE, release).emit(&[], &mut f);
                    self.backlog.push_back(Out {
                        bytes: f,
                        call: None,
                    });
                }
                Some(Held::Message(msg)) => {
                    self.credits += 1;
                    if let Some(read) = self.on_message(inner, &msg) {
                        self.held.push_front(Held::Reading { read, owed: false });
                    }
                }
                Some(Held::Reading { .. }) | None => {}
            }
        }
    }

    /// Take one answer. Returns the READ it started when it was a rendezvous.
    fn on_message(&mut self, inner: &Inner, msg: &[u8]) -> Option<u64> {
        for f in frames(msg) {
            let f = match f {
                Ok(f) => f,
                Err(e) => {
                    self.stats.malformed += 1;
                    tracing::warn!(error = %e, "malformed message from the server");
                    return None;
                }
            };
            match f.header.kind {
                Kind::RESPONSE => {
                    let id = f.header.id;
                    if self.rndv_calls.remove(&id).is_some() {
                        self.bufs.release(id);
                    }
                    let r = match Code::from_wire(f.header.code) {
                        None => Ok(f.payload.to_vec()),
                        Some(code) => Err(Status::new(
                            code,
                            String::from_utf8_lossy(f.payload).into_owned(),
                        )),
                    };
                    self.complete(inner, id, r);
                }
                Kind::PONG => {
                    self.ping = None;
                }
                Kind::ACK => {}
                Kind::RNDV => match Rendezvous::parse(f.payload) {
                    Ok(d) if d.len as usize <= inner.cfg.max_message => {
                        let Conn { qp, bufs, .. } = self;
                        return match bufs.start_read(qp, d, f.header.id) {
                            Ok(read) => Some(read),
                            Err(e) => {
                                self.kill(inner, e);
                                None
                            }
                        };
                    }
                    _ => {
                        self.stats.malformed += 1;
                        return None;
                    }
                },
                _ => {
                    self.stats.malformed += 1;
                }
            }
        }
        None
    }

    fn complete(&mut self, inner: &Inner, id: u64, mut r: Outcome) {
        let Some(p) = self.pending.get_mut(&id) else {
            return; // cancelled or expired already
        };
        // An answer taken after the call's deadline does not make it succeed: the
        // caller was promised an answer by then (gRPC's rule too). Deadlines are
        // checked every 200 µs of driving, so without this an answer could win
        // against a deadline that passed while no thread drove the connection.
        if r.is_ok() && p.deadline.is_some_and(|d| Instant::now() >= d) {
            self.stats.deadline_exceeded += 1;
            r = Err(Status::deadline_exceeded("deadline passed at the client"));
        }
        let took = p.started.elapsed();
        inner
            .metrics
            .method(p.method, || format!("method {}", p.method))
            .record(r.as_ref().map(|_| ()).map_err(|e| e.code()), took);
        if r.is_ok() && inner.cfg.batching == Batching::Adaptive {
            self.batch_rule.finished(took.as_nanos() as f64);
        }
        if p.deadline.is_some() {
            self.deadlines -= 1;
            p.deadline = None;
        }
        match &mut p.slot {
            Slot::Waiting(w) => {
                let w = w.take();
                p.slot = Slot::Done(r);
                if let Some(w) = w {
                    w.wake();
                }
            }
            Slot::Done(_) => {}
            Slot::Stream(q) => {
                let q = Arc::clone(q);
                self.pending.remove(&id);
                lock(&q.done).push_back((id, r));
                q.cv.notify_one();
            }
        }
    }

    /// The connection is dead: fail every call.
    fn kill(&mut self, inner: &Inner, why: Status) {
        if self.dead.is_some() {
            return;
        }
        tracing::warn!(error = %why, "weft-rpc connection dead");
        self.dead = Some(why.clone());
        self.backlog.clear();
        self.held.clear();
        let ids: Vec<u64> = self.pending.keys().copied().collect();
        for id in ids {
            self.complete(inner, id, Err(why.clone()));
        }
        // Closing the side channel tells the server at once.
        self.cm = None;
    }
}

/// The dispatcher's idle counts and next spin, for [`Client::stats`].
fn publish_idle(inner: &Inner, idle: &IdleLoop) {
    let c = idle.counts();
    inner.idle_spun.store(c.spun, Ordering::Relaxed);
    inner.idle_blocked.store(c.blocked, Ordering::Relaxed);
    let ns = idle.budget().as_nanos().min(u128::from(u64::MAX)) as u64;
    inner.spin_budget_ns.store(ns, Ordering::Relaxed);
}

fn dispatcher(weak: &std::sync::Weak<Inner>) {
    let Some(inner) = weak.upgrade() else {
        return;
    };
    let spin = inner.cfg.idle_spin;
    let mut idle = IdleLoop::new(spin, inner.channel.is_some());
    publish_idle(&inner, &idle);
    drop(inner);
    loop {
        let Some(inner) = weak.upgrade() else {
            return;
        };
        if inner.stop.load(Ordering::Relaxed) {
            return;
        }
        let (busy, fired) = {
            let mut c = lock(&inner.conn);
            let busy = c.drive(&inner);
            (busy, c.cq.fired_us())
        };
        if busy {
            if idle.event(inner.channel.as_ref().map(|_| fired)) {
                publish_idle(&inner, &idle);
            }
            continue;
        }
        match idle.empty() {
            Next::Spin => {
                idle.pause();
                continue;
            }
            // Armed before the last look: a completion that came before arming fires
            // nothing, and the next drive finds it.
            Next::Arm => {
                if inner.channel.is_some() {
                    lock(&inner.conn).cq.req_notify();
                }
                continue;
            }
            Next::Block => {}
        }
        let quiet = {
            let c = lock(&inner.conn);
            c.pending.is_empty() && c.backlog.is_empty()
        };
        match &inner.channel {
            Some(ch) => {
                let ch = ch.clone();
                let t = if quiet { 20 } else { 1 };
                drop(inner);
                let _ = ch.get_cq_event(Duration::from_millis(t));
            }
            None => {
                drop(inner);
                // Inline progress: this thread runs the engine, so it yields (to
                // the callers it wakes) up to 1 ms before it parks.
                if idle.idle_for() < Duration::from_millis(1) {
                    std::thread::yield_now();
                } else {
                    std::thread::park_timeout(Duration::from_micros(if quiet {
                        5000
                    } else {
                        200
                    }));
                }
            }
        }
    }
}

/// One call in flight: a future of the response payload. Dropping it before it
/// completes cancels the call.
#[derive(Debug)]
#[must_use = "a call is cancelled when dropped"]
pub struct Call {
    inner: Arc<Inner>,
    id: u64,
    early: Option<Status>,
    done: bool,
}

impl Call {
    /// The request id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Block this thread until the call completes (no executor needed).
    pub fn wait(self) -> Result<Vec<u8>, Status> {
        crate::block_on(self)
    }
}

impl Future for Call {
    type Output = Result<Vec<u8>, Status>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        if let Some(e) = self.early.take() {
            self.done = true;
            return Poll::Ready(Err(e));
        }
        let id = self.id;
        let inner = Arc::clone(&self.inner);
        let direct = inner.cfg.mode == Mode::Direct;
        let mut c = lock(&inner.conn);
        let is_done = |c: &Conn| {
            c.pending
                .get(&id)
                .is_none_or(|p| matches!(p.slot, Slot::Done(_)))
        };
        if direct {
            if !is_done(&c) {
                c.wait_round(&inner);
            }
        } else if inner.cfg.batching.packs() {
            // Queued calls leave when someone waits.
            c.flush(&inner);
        }
        let yield_now = direct && c.wants_yield();
        let r = match c.pending.get_mut(&id) {
            None => {
                self.done = true;
                Poll::Ready(Err(c
                    .dead
                    .clone()
                    .unwrap_or_else(|| Status::internal("call lost"))))
            }
            Some(p) if matches!(p.slot, Slot::Done(_)) => {
                self.done = true;
                match c.pending.remove(&id) {
                    Some(Pending {
                        slot: Slot::Done(r),
                        ..
                    }) => Poll::Ready(r),
                    _ => Poll::Ready(Err(Status::internal("call lost"))),
                }
            }
            Some(p) => {
                if direct {
                    // We are the poller: ask to be polled again at once.
                    cx.waker().wake_by_ref();
                } else {
                    match &mut p.slot {
                        Slot::Waiting(Some(w)) if w.will_wake(cx.waker()) => {}
                        slot => *slot = Slot::Waiting(Some(cx.waker().clone())),
                    }
                }
                Poll::Pending
            }
        };
        drop(c);
        if yield_now && r.is_pending() {
            std::thread::yield_now();
        }
        r
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.done && self.early.is_none() {
            self.inner.cancel(self.id);
        }
    }
}

/// A call whose response is decoded with the serde codec.
#[derive(Debug)]
#[must_use = "a call is cancelled when dropped"]
pub struct TypedCall<T> {
    call: Call,
    _t: PhantomData<fn() -> T>,
}

impl<T: serde::de::DeserializeOwned> TypedCall<T> {
    /// Block until the call completes.
    pub fn wait(self) -> Result<T, Status> {
        crate::block_on(self)
    }
}

impl<T: serde::de::DeserializeOwned> Future for TypedCall<T> {
    type Output = Result<T, Status>;

    fn poll(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        // `Call` is Unpin, and so is this.
        let this = self.get_mut();
        match Pin::new(&mut this.call).poll(cx) {
            Poll::Ready(Ok(b)) => Poll::Ready(crate::codec::decode(&b, Code::Internal)),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Many outstanding calls on one connection, completed in any order (DaRPC's
/// `DaRPCStream`: `rpc`, `poll`, `take`).
#[derive(Debug)]
pub struct CallStream {
    client: Client,
    queue: Arc<StreamQueue>,
    outstanding: usize,
}

impl CallStream {
    /// Issue a call; returns its id (the completions name it).
    pub fn call(&mut self, method: u32, payload: &[u8]) -> Result<u64, Status> {
        let t = self.client.inner.cfg.default_timeout;
        self.call_with(method, payload, t)
    }

    /// Issue a call with a deadline.
    pub fn call_with(
        &mut self,
        method: u32,
        payload: &[u8],
        timeout: Option<Duration>,
    ) -> Result<u64, Status> {
        let id = self.client.inner.start(
            method,
            payload,
            timeout,
            Slot::Stream(Arc::clone(&self.queue)),
        )?;
        self.outstanding += 1;
        Ok(id)
    }

    /// Send queued calls now.
    pub fn flush(&self) {
        self.client.flush();
    }

    /// Calls issued and not yet taken.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    fn pop(&mut self) -> Option<(u64, Outcome)> {
        let r = lock(&self.queue.done).pop_front();
        if r.is_some() {
            self.outstanding -= 1;
        }
        r
    }

    /// A completed call, if one is there (direct mode: runs one round of
    /// completion processing first).
    pub fn poll(&mut self) -> Option<(u64, Outcome)> {
        if let Some(r) = self.pop() {
            return Some(r);
        }
        let inner = &self.client.inner;
        let yield_now = {
            let mut c = lock(&inner.conn);
            if inner.cfg.mode == Mode::Direct {
                c.wait_round(inner);
                c.wants_yield()
            } else {
                if inner.cfg.batching.packs() {
                    c.flush(inner);
                }
                false
            }
        };
        let r = self.pop();
        if r.is_none() && yield_now {
            std::thread::yield_now();
        }
        r
    }

    /// Block until a call completes; `None` when none is outstanding.
    pub fn take(&mut self) -> Option<(u64, Outcome)> {
        if self.outstanding == 0 {
            return None;
        }
        loop {
            if let Some(r) = self.poll() {
                return Some(r);
            }
            if self.client.inner.cfg.mode == Mode::Dispatched {
                let q = lock(&self.queue.done);
                if q.is_empty() {
                    let _ = self
                        .queue
                        .cv
                        .wait_timeout(q, Duration::from_millis(1))
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }
}

impl Drop for CallStream {
    fn drop(&mut self) {
        // Calls still outstanding are cancelled.
        let ids: Vec<u64> = {
            let c = lock(&self.client.inner.conn);
            c.pending
                .iter()
                .filter(|(_, p)| matches!(&p.slot, Slot::Stream(q) if Arc::ptr_eq(q, &self.queue)))
                .map(|(&id, _)| id)
                .collect()
        };
        for id in ids {
            self.client.inner.cancel(id);
        }
    }
}
