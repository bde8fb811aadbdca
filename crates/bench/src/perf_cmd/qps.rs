//! `weft perf send-bw|write-bw --qps N` (perftest's `-q`): N RC or UC queue pairs
//! between the two processes, each connected through the connection manager, one
//! completion queue a side.
//!
//! The window: `--tx-depth` work requests in flight on each QP, as perftest's `-t`
//! with `-q` (its loop posts to a QP while `scnt - ccnt < tx_depth`), so N QPs keep
//! N × tx_depth in flight; a QP asks for a completion every `min(16, window)` of its
//! requests. `--tx-depth 1` is one request in flight per QP, each signaled: the
//! hardest case, every message its own ACK and completion. (Until 2026-11-30 the
//! window was `tx_depth / N` per QP, `--tx-depth` in all; rows of that time in
//! docs/results/verbs.md say so.) `-n` stays the run's total, not perftest's per-QP
//! count, so a run's length does not grow with N.
//!
//! The order (`--qps-order`): `burst`, perftest's loop, fills one QP's window and
//! then the next's, so a QP's requests leave together and its state is touched
//! once per window; `spread` sends one message to each QP in turn, so no two
//! consecutive messages share a QP and every message finds its QP's state cold
//! once the QPs outgrow the caches. With one request per QP's window they are the
//! same order.
//!
//! Memory per QP: the growth of the process's resident set (`VmRSS` in
//! `/proc/self/status`) while it creates the N QPs (with their completion queue
//! share and receive buffers), and again once the N connections stand (each with
//! its TCP side channel and watcher thread), divided by N, on both sides. The server
//! reports its figures in the last connection's private data.
//!
//! The server side runs when the first request's private data is a [`MultiPlan`]:
//! it creates the N QPs, accepts the N connections in order, then serves the run.

use super::{device, meta, param, remote_bytes, remote_of, sizes, Args, Qp, QpsOrder, Test};
use super::{RX_BYTES, RX_SLOTS, SIGNAL_EVERY, WAIT};
use crate::perf::bandwidth_record;
use crate::perf::record::{Meta, Record};
use crate::perf::run::{self, LoopOpts, Progress as Prog};
use crate::perf::table::Output;
use anyhow::{anyhow, bail, Context as _};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use weft_verbs::cm::{self, ConnectRequest, Connection, Listener};
use weft_verbs::{
    Access, Completion, CompletionQueue, Context, MemoryRegion, QpInitAttr, QpState, QueuePair,
    RecvWr, SendWr, WcStatus, WrOp, GRH_LEN,
};

const MAGIC: &[u8; 4] = b"WQPS";

/// The most requests a `--qps` run keeps in flight in all (`--qps` × `--tx-depth`):
/// 4 M, e.g. 65 536 QPs of 64 or 4 096 of 1 024 (the largest case, 4 096 × 128,
/// is 512 K).
const MAX_IN_FLIGHT: usize = 1 << 22;

/// Checks of `--qps` (called for every run; N = 1 is the ordinary single-QP path).
pub(super) fn check(a: &Args) -> anyhow::Result<()> {
    if a.qps == 0 {
        bail!("--qps must be at least 1");
    }
    if a.qps == 1 && a.qps_order.is_some() {
        bail!("--qps-order orders posts over several QPs: give --qps N with N > 1");
    }
    if a.qps > 1 {
        if !matches!(a.test, Test::SendBw | Test::WriteBw) {
            bail!("--qps applies to send-bw and write-bw");
        }
        if a.qp == Qp::Ud {
            bail!("--qps connects RC or UC QPs");
        }
        if a.may_block() {
            bail!("--qps polls (no --event or --wait)");
        }
        if a.qps > 65_536 {
            bail!("--qps at most 65536");
        }
        // Each request in flight holds a send WQE on the client and, for send-bw, two
        // posted receives on the server: bound them as an RNIC's resources would be
        // (perftest gets the device's refusal), before either side allocates.
        let in_flight = a.qps.saturating_mul(a.tx_depth);
        if in_flight > MAX_IN_FLIGHT {
            bail!(
                "--qps {} x --tx-depth {} asks for {in_flight} requests in flight; at most {MAX_IN_FLIGHT}",
                a.qps,
                a.tx_depth
            );
        }
    }
    Ok(())
}

/// What one multi-QP run is: the request's private data of each of its N connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MultiPlan {
    test: Test,
    size: u64,
    count: u64,
    qps: u32,
    /// Which of the N connections this request is.
    index: u32,
    /// Receives the server keeps posted per QP (send-bw).
    rx: u32,
}

impl MultiPlan {
    /// A peer's request within the client's own bounds ([`check`]), checked before
    /// anything is allocated for it: 1 to 65 536 QPs, at most two receives per request
    /// that may be in flight, messages up to 1 GiB.
    fn in_bounds(&self) -> bool {
        let receives = (self.qps as usize).saturating_mul(self.rx as usize);
        (1..=65_536).contains(&self.qps) && receives <= 2 * MAX_IN_FLIGHT && self.size <= 1 << 30
    }

    fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.push(self.test.code());
        b.extend_from_slice(&self.size.to_be_bytes());
        b.extend_from_slice(&self.count.to_be_bytes());
        b.extend_from_slice(&self.qps.to_be_bytes());
        b.extend_from_slice(&self.index.to_be_bytes());
        b.extend_from_slice(&self.rx.to_be_bytes());
        b
    }

    /// `None` unless `b` is a multi-QP request (then the ordinary plan decoder runs).
    pub(super) fn decode(b: &[u8]) -> Option<MultiPlan> {
        if b.len() != 33 || &b[..4] != MAGIC {
            return None;
        }
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
        Some(MultiPlan {
            test: Test::from_code(b[4])?,
            size: u64_at(5),
            count: u64_at(13),
            qps: u32_at(21),
            index: u32_at(25),
            rx: u32_at(29),
        })
    }
}

/// The resident set of this process in bytes (`VmRSS`).
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Per-QP window (`--tx-depth`, perftest's per-QP `-t`) and signaling interval.
fn window(a: &Args) -> (u64, u64) {
    let w = a.tx_depth.max(1) as u64;
    (w, SIGNAL_EVERY.min(w).max(1))
}

fn rx_per_qp(size: u64, w: u64) -> u32 {
    let slots = ((RX_BYTES / size.max(1)) as usize).clamp(1, RX_SLOTS) as u64;
    (2 * w).clamp(4, slots.max(4)) as u32
}

/// Memory figures of one side: bytes per QP once the QPs exist, and once they are
/// connected.
#[derive(Debug, Clone, Copy, Default)]
struct Mem {
    created: u64,
    connected: u64,
}

impl Mem {
    fn per_qp(base: u64, created: u64, connected: u64, n: usize) -> Mem {
        let n = n.max(1) as u64;
        Mem {
            created: created.saturating_sub(base) / n,
            connected: connected.saturating_sub(base) / n,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut v = self.created.to_be_bytes().to_vec();
        v.extend_from_slice(&self.connected.to_be_bytes());
        v
    }
}

// ---------------------------------------------------------------------------------
// Server

/// Serve one multi-QP run whose first request is `first`.
pub(super) fn serve(
    a: &Args,
    ctx: &Context,
    listener: &Listener,
    first: ConnectRequest,
    plan: MultiPlan,
) -> anyhow::Result<()> {
    if plan.index != 0 {
        first.reject("multi-QP run out of order");
        bail!("multi-QP request {} without the ones before", plan.index);
    }
    if !plan.in_bounds() {
        first.reject("multi-QP run out of bounds");
        bail!(
            "multi-QP request out of bounds: {} QPs, {} receives each, {} B",
            plan.qps,
            plan.rx,
            plan.size
        );
    }
    let n = plan.qps as usize;
    let rx = plan.rx as usize;
    let slot = (plan.size + GRH_LEN as u64) as usize;
    let base = rss();
    let cq = CompletionQueue::new(ctx, (n * (rx + 2)).clamp(256, 1 << 22), None);
    let pd = ctx.alloc_pd();
    // The receive buffers: one slot per posted receive, up to `RX_BYTES` in all;
    // beyond that receives share slots (k modulo the slots), as perftest's receives
    // of one QP share its buffer: nothing reads what a bandwidth test's SENDs carry,
    // and 4096 QPs × 256 receives of 4 KiB would otherwise be 4 GiB.
    let slots = (n * rx).min((RX_BYTES as usize / slot).max(1));
    let mr_len = match plan.test {
        Test::SendBw => slots * slot,
        _ => plan.size as usize,
    };
    let mr = super::buffer(a, &pd, mr_len.max(64), Access::ALL)?;
    let mut init = QpInitAttr::new(a.qp.qp_type());
    init.max_send_wr = 2;
    init.max_recv_wr = rx.max(2);
    let mut qps = Vec::with_capacity(n);
    for i in 0..n {
        let mut qp = pd.create_qp(&cq, &cq, None, init)?;
        cm::init_qp(&mut qp, &param(a, Vec::new()))?;
        if plan.test == Test::SendBw {
            qp.post_recv((0..rx).map(|k| recv(&mr, i * rx + k, slot, slots)))?;
        }
        qps.push(qp);
    }
    let created = rss();
    let mut conns: Vec<Connection> = Vec::with_capacity(n);
    let mut req = Some(first);
    for (i, qp) in qps.iter_mut().enumerate() {
        let r = match req.take() {
            Some(r) => r,
            None => listener
                .get_request(WAIT)
                .context("waiting for the next QP")?,
        };
        match MultiPlan::decode(&r.peer().private_data) {
            Some(p) if p.index as usize == i && p.qps == plan.qps => {}
            _ => {
                r.reject("not the next QP of the multi-QP run");
                bail!("multi-QP run: connection {i} out of order");
            }
        }
        let mut private = remote_bytes(&mr, 0);
        if i + 1 == n {
            private.extend_from_slice(&Mem::per_qp(base, created, rss(), n).bytes());
        }
        conns.push(r.accept(qp, &param(a, private))?);
    }
    let mut out: Vec<Completion> = Vec::with_capacity(64);
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut cq = cq;
    // The deadline and, on an empty poll, the first QP's state are looked at every
    // 1024th poll, as the single-QP server does: a clock read per poll was ~110
    // instructions a message here at 4096 QPs × 128 (cachegrind, 2026-11-30), a cost
    // of the benchmark that neither the single-QP server nor perftest's pays.
    let mut polls = 0u32;
    // Until the client hangs up (its connections close; our QPs go to ERR).
    loop {
        out.clear();
        polls = polls.wrapping_add(1);
        let look = polls % 1024 == 0;
        if look && Instant::now() >= deadline {
            break;
        }
        if cq.poll(&mut out, 64) == 0 {
            if look && matches!(qps[0].query(), Some((QpState::Err, _))) {
                break;
            }
            continue;
        }
        if out.iter().any(|c| c.status != WcStatus::Success) {
            break;
        }
        // Receive k of QP i has the id i·rx + k: the QP is found without a lookup
        // by its number (a hash per message, a cost that only the multi-QP runs
        // paid; the single-QP server has its one QP at hand). The receives of one
        // QP that follow each other in a poll's completions (in the burst order,
        // most of them) go back in one `post_recv`, as the single-QP server posts
        // a poll's receives together: one call per completion was ~110 more
        // instructions a message than that server's (cachegrind, 2026-11-30).
        let mut at = 0;
        while at < out.len() {
            let c = &out[at];
            if !c.opcode.is_recv() {
                at += 1;
                continue;
            }
            let q = c.wr_id as usize / rx.max(1);
            let qpn = c.qpn;
            let end = at
                + out[at..]
                    .iter()
                    .take_while(|d| {
                        d.opcode.is_recv() && d.qpn == qpn && d.wr_id as usize / rx.max(1) == q
                    })
                    .count();
            match qps.get_mut(q) {
                Some(qp) if qp.qp_num() == qpn => qp.post_recv(
                    out[at..end]
                        .iter()
                        .map(|d| recv(&mr, d.wr_id as usize, slot, slots)),
                )?,
                // Never reposted, it would stall the run much later as a peer
                // that stopped answering: say what came instead.
                _ => bail!("receive completion for QP {} with id {}", c.qpn, c.wr_id),
            }
            at = end;
        }
    }
    drop(conns);
    Ok(())
}

/// Receive `k` of the run (QP `k / rx`), into slot `k % slots` of `slot` bytes.
fn recv(mr: &MemoryRegion, k: usize, slot: usize, slots: usize) -> RecvWr {
    RecvWr {
        wr_id: k as u64,
        sg_list: [mr.sge((k % slots.max(1)) * slot, slot as u32)].into(),
    }
}

// ---------------------------------------------------------------------------------
// Client

/// The client of `--qps N` (N > 1): one record per size.
pub(super) fn client(a: &Args, at: SocketAddr, peer_pid: Option<u32>) -> anyhow::Result<()> {
    let meta = meta(a);
    let mut out = Output::stdout(a.json);
    let mut prog = Prog::new(!a.quiet);
    let sizes = sizes(a);
    let mut first_error = None;
    let ctx = device(a)?;
    for (k, &size) in sizes.iter().enumerate() {
        prog.begin(
            k + 1,
            sizes.len(),
            format!("{} {} B over {} QPs", a.test.name(), size, a.qps),
        );
        let iters = run::bw_messages(size, a.iters.unwrap_or(5000));
        let opts = LoopOpts {
            warmup: a.warmup.unwrap_or((iters / 10).clamp(10, 1000)),
            iters,
            time_limit: Duration::from_secs_f64(a.time_limit),
            peer_pid,
            pause: Duration::ZERO,
        };
        match client_run(a, &ctx, at, size, &opts, &meta, &mut prog) {
            Ok((rec, extra)) => emit(&mut out, a.json, &rec, &extra)?,
            Err(e) => {
                first_error.get_or_insert_with(|| format!("{e:#}"));
                out.emit(&Record::failed(&meta, size, format!("{e:#}")))?;
            }
        }
    }
    super::hang_up(a, &ctx, at, first_error, sizes.len())
}

/// The multi-QP figures a record carries besides the rate.
struct Extra {
    qps: usize,
    window: u64,
    order: QpsOrder,
    client: Mem,
    server: Mem,
}

fn emit(
    out: &mut Output<std::io::Stdout>,
    json: bool,
    rec: &Record,
    x: &Extra,
) -> anyhow::Result<()> {
    if json {
        let mut v = serde_json::to_value(rec)?;
        if let Some(m) = v.as_object_mut() {
            m.insert("qps".into(), x.qps.into());
            m.insert("qp_window".into(), x.window.into());
            m.insert("qps_order".into(), x.order.name().into());
            m.insert("mem_method".into(), "VmRSS growth / qps".into());
            m.insert("client_bytes_per_qp".into(), x.client.created.into());
            m.insert(
                "client_bytes_per_qp_connected".into(),
                x.client.connected.into(),
            );
            m.insert("server_bytes_per_qp".into(), x.server.created.into());
            m.insert(
                "server_bytes_per_qp_connected".into(),
                x.server.connected.into(),
            );
        }
        println!("{v}");
        return Ok(());
    }
    out.emit(rec)?;
    println!(
        " {} QPs, window {} per QP, {} order; memory per QP (VmRSS growth / N): client \
         {} B ({} B with its connection), server {} B ({} B with its connection)",
        x.qps,
        x.window,
        x.order.name(),
        x.client.created,
        x.client.connected,
        x.server.created,
        x.server.connected
    );
    Ok(())
}

fn client_run(
    a: &Args,
    ctx: &Context,
    at: SocketAddr,
    size: u64,
    opts: &LoopOpts,
    meta: &Meta,
    prog: &mut Prog,
) -> anyhow::Result<(Record, Extra)> {
    let n = a.qps;
    let (w, every) = window(a);
    let plan = |index: usize| MultiPlan {
        test: a.test,
        size,
        count: opts.warmup + opts.iters,
        qps: n as u32,
        index: index as u32,
        rx: rx_per_qp(size, w),
    };
    let base = rss();
    let cq = CompletionQueue::new(ctx, (2 * n * (w / every + 1) as usize).max(256), None);
    let pd = ctx.alloc_pd();
    let mr = super::buffer(a, &pd, size.max(64) as usize, Access::ALL)?;
    let mut init = QpInitAttr::new(a.qp.qp_type());
    init.max_send_wr = (w as usize).max(2);
    init.max_recv_wr = 2;
    let mut qps = Vec::with_capacity(n);
    for i in 0..n {
        let mut qp = pd.create_qp(&cq, &cq, None, init)?;
        cm::init_qp(&mut qp, &param(a, plan(i).encode()))?;
        qps.push(qp);
    }
    let created = rss();
    let mut conns = Vec::with_capacity(n);
    for (i, qp) in qps.iter_mut().enumerate() {
        let conn = cm::connect(qp, at, &param(a, plan(i).encode()))
            .with_context(|| format!("connecting QP {i} of {n}"))?;
        conns.push(conn);
    }
    let client = Mem::per_qp(base, created, rss(), n);
    let first = conns.first().ok_or_else(|| anyhow!("no QP"))?;
    let server_buf = remote_of(&first.remote().private_data)?;
    let last = &conns[n - 1].remote().private_data;
    if last.len() < 28 {
        bail!("the server did not report its memory");
    }
    let u64_at = |i: usize| u64::from_be_bytes(last[i..i + 8].try_into().unwrap_or([0; 8]));
    let server = Mem {
        created: u64_at(12),
        connected: u64_at(20),
    };
    let op = match a.test {
        Test::SendBw => WrOp::Send { imm: None },
        _ => WrOp::Write {
            remote: server_buf,
            imm: None,
        },
    };
    let mut wr = SendWr::new(0, op, [mr.sge(0, size as u32)]);
    wr.inline = size <= a.inline.min(256);
    let order = a.qps_order.unwrap_or(QpsOrder::Burst);
    let st = std::cell::RefCell::new(MultiBw {
        cq,
        out: Vec::with_capacity(64),
        qps: &mut qps,
        wr,
        window: w,
        every,
        order,
        inflight: vec![0; n],
        per_qp: vec![0; n],
        last: start_qp(order, n),
        posted: 0,
        completed: 0,
    });
    // Where the measured phase starts: the warm-up's own round-up is not timed.
    let mut timed_from = 0;
    let mut r = run::bandwidth(
        opts,
        prog,
        |seq| {
            let mut s = st.borrow_mut();
            if seq == opts.warmup {
                timed_from = s.posted;
            }
            s.post()
        },
        || st.borrow_mut().finish(),
    )?;
    let mut st = st.into_inner();
    let posted = st.posted;
    // The rate counts every message of the measured phase, the round-up's too (with
    // many QPs and a completion every 16 requests it is a large share).
    r.messages = posted - timed_from;
    // The CPU was divided by the planned messages; spread it over those sent.
    r.cpu = r.cpu.map(|c| c.recount(opts.iters, r.messages));
    // The ACKs our last passes owe leave with the next passes; run them before
    // hanging up.
    for _ in 0..4 {
        st.out.clear();
        st.cq.poll(&mut st.out, 64);
    }
    if a.stats {
        eprintln!("{:#?}", ctx.stats());
    }
    drop(conns);
    let mut rec = bandwidth_record(meta, size, &r);
    let mut note = format!(
        "{n} QPs in {} order, {w} in flight per QP, a completion every {every} per QP",
        order.name()
    );
    if r.messages > opts.iters {
        note.push_str(&format!(
            "; {} extra messages rounded the QPs up to a completion (counted in the rate)",
            r.messages - opts.iters
        ));
    }
    rec.note = Some(note);
    Ok((
        rec,
        Extra {
            qps: n,
            window: w,
            order,
            client,
            server,
        },
    ))
}

/// The `last` a run starts from, so that its first message goes to QP 0 in either order.
fn start_qp(order: QpsOrder, n: usize) -> usize {
    match order {
        QpsOrder::Burst => 0,
        QpsOrder::Spread => n - 1,
    }
}

/// Which QP the next message goes to after one went to `last` ([`MultiBw::post`]).
fn next_qp(order: QpsOrder, last: usize, inflight: &[u64], window: u64) -> usize {
    if order == QpsOrder::Spread || inflight[last] >= window {
        (last + 1) % inflight.len()
    } else {
        last
    }
}

/// The sender of a multi-QP bandwidth run: each QP with at most `window` in flight
/// and a completion every `every` of its requests, the QPs taken in `order`.
struct MultiBw<'a> {
    cq: CompletionQueue,
    out: Vec<Completion>,
    qps: &'a mut [QueuePair],
    wr: SendWr,
    window: u64,
    every: u64,
    order: QpsOrder,
    /// Posted and not yet completed, per QP.
    inflight: Vec<u64>,
    /// Posted per QP (which of its requests is signaled).
    per_qp: Vec<u64>,
    /// The QP the last message went to (where `burst` goes on).
    last: usize,
    posted: u64,
    completed: u64,
}

impl MultiBw<'_> {
    fn reap(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + WAIT;
        self.out.clear();
        while self.cq.poll(&mut self.out, 64) == 0 {
            if Instant::now() > deadline {
                bail!("no completion within {WAIT:?}: the peer stopped answering");
            }
        }
        for c in &self.out {
            if c.status != WcStatus::Success {
                bail!("completion error: {:?} (QP {})", c.status, c.qpn);
            }
            // A request's id is its QP's index (`post_to`).
            let i = c.wr_id as usize;
            if i >= self.qps.len() || self.qps[i].qp_num() != c.qpn {
                bail!("completion for an unknown QP {} (id {})", c.qpn, c.wr_id);
            }
            self.inflight[i] = self.inflight[i].saturating_sub(self.every);
            self.completed += self.every;
        }
        Ok(())
    }

    fn post_to(&mut self, i: usize) -> anyhow::Result<()> {
        while self.inflight[i] >= self.window {
            self.reap()?;
        }
        // One request for all QPs, changed in place and posted borrowed, as
        // `Bw::post` does (perftest's way with `ibv_post_send`).
        self.per_qp[i] += 1;
        self.wr.wr_id = i as u64;
        self.wr.signaled = self.per_qp[i] % self.every == 0;
        self.qps[i].post_send([&self.wr])?;
        self.inflight[i] += 1;
        self.posted += 1;
        Ok(())
    }

    /// The next message, to the QP `order` picks: `spread` moves on after every
    /// message; `burst` stays while the QP's window has room (perftest's `-q` loop
    /// posts to a QP until its window is full), and waits at the next QP for room
    /// there, as the QPs complete in the order they were filled.
    fn post(&mut self) -> anyhow::Result<()> {
        self.last = next_qp(self.order, self.last, &self.inflight, self.window);
        self.post_to(self.last)
    }

    /// Round every QP up to a signaled request, then wait for everything.
    fn finish(&mut self) -> anyhow::Result<()> {
        for i in 0..self.qps.len() {
            while self.per_qp[i] % self.every != 0 {
                self.post_to(i)?;
            }
        }
        while self.completed < self.posted {
            self.reap()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The QPs the first `count` posts go to, each post adding one request in flight
    /// on its QP and nothing completing.
    fn order_of(order: QpsOrder, n: usize, window: u64, count: usize) -> Vec<usize> {
        let mut inflight = vec![0; n];
        let mut last = start_qp(order, n);
        let mut seen = Vec::new();
        for _ in 0..count {
            last = next_qp(order, last, &inflight, window);
            inflight[last] += 1;
            seen.push(last);
        }
        seen
    }

    #[test]
    fn burst_fills_a_qps_window_before_the_next_and_spread_moves_on_each_message() {
        assert_eq!(
            order_of(QpsOrder::Burst, 3, 2, 6),
            [0, 0, 1, 1, 2, 2],
            "burst: perftest's loop"
        );
        assert_eq!(order_of(QpsOrder::Spread, 3, 2, 6), [0, 1, 2, 0, 1, 2]);
        // One request per window: the two orders are the same rotation.
        assert_eq!(order_of(QpsOrder::Burst, 3, 1, 4), [0, 1, 2, 0]);
    }

    #[test]
    fn a_multi_qp_request_out_of_the_clients_bounds_is_refused() {
        let plan = |qps, rx, size| MultiPlan {
            test: Test::SendBw,
            size,
            count: 1,
            qps,
            index: 0,
            rx,
        };
        assert!(
            plan(4096, 256, 64).in_bounds(),
            "4096 QPs at perftest's window"
        );
        assert!(plan(65_536, 128, 1 << 30).in_bounds());
        for bad in [
            plan(0, 2, 64),
            plan(65_537, 2, 64),
            plan(65_536, 256, 64),
            plan(u32::MAX, u32::MAX, 64),
            plan(1, 2, u64::MAX),
        ] {
            assert!(!bad.in_bounds(), "{bad:?}");
        }
    }

    #[test]
    fn burst_stays_on_a_qp_whose_completions_made_room() {
        let mut inflight = vec![2, 0];
        assert_eq!(next_qp(QpsOrder::Burst, 0, &inflight, 2), 1);
        inflight[0] = 1;
        assert_eq!(next_qp(QpsOrder::Burst, 0, &inflight, 2), 0);
    }
}
