//! `weft perf read-lat|send-lat|write-send-lat --outstanding N`: latency with N
//! operations in flight (the cluster-configuration paper's "unloaded", N = 1, and
//! "saturated", N = 16), and the background flow of `--bulk-size` beside it.
//!
//! Every operation is timed from its post to the moment the client learns its data
//! is here (method "rtt": a whole round trip, as perftest reports READ), and the run
//! reports the rate of completed operations (`rtt_per_s`). How the client learns it:
//! - read-lat: the READ's completion (busy polling, or the completion channel with
//!   `--event`/`--wait block`, or both with `--wait adaptive`), or with `--poll-memory` the last byte of its buffer turning into the
//!   server's marker (the paper's READ-Poll; the responder places a READ's data in
//!   order, so the last byte is the last to land);
//! - send-lat: the reply SEND's receive completion. The request is `--request-size`
//!   bytes, the reply `--size` (a compound read made of two SENDs);
//! - write-send-lat: the request is a WRITE into one of N slots of the server's
//!   memory, which the server polls for the request's marker; the reply is a SEND
//!   (Kalia et al.'s compound read, the paper's WRITE/SEND).
//!
//! With `--bulk-size`, a second RC QP of the same device keeps `--bulk-depth`
//! WRITEs of that size in flight for the whole run, topped up between the latency
//! loop's polls (with a blocking or adaptive `--wait`, whenever a wait for the small
//! operations returns; an engine thread moves the flow meanwhile): both flows leave through the device's one send scheduler
//! (`--scheduler`), which is what the paper's Fig. 5 measures on an RNIC.

use super::{
    marker, param, queues, remote_bytes, remote_of, send_wr, Args, Plan, Qp, Side, Test,
    SIGNAL_EVERY, WAIT,
};
use crate::perf::record::{Background, Meta, Record};
use crate::perf::round_trip_record;
use crate::perf::run::{self, LoopOpts, Progress as Prog};
use anyhow::{bail, Context as _};
use std::net::SocketAddr;
use std::time::Instant;
use weft_verbs::cm::{self, ConnectRequest, Connection};
use weft_verbs::{
    Access, Context, MemoryRegion, QpState, QueuePair, RecvWr, RemoteAddr, SendWr, WaitMode,
    WcStatus, WrOp,
};

/// The byte the server puts at the end of its read-lat buffer: a READ-Poll client
/// clears its own last byte before each READ and waits for this one.
pub(super) const READ_MARK: u8 = 0xa5;

/// Most operations in flight (a write-send slot's marker must differ from the one
/// `depth` requests earlier: markers cycle through 255 values).
const MAX_DEPTH: usize = 128;

/// Operations in flight for a windowed run, or `None` for the classic loops.
pub(super) fn depth(a: &Args) -> Option<usize> {
    match a.test {
        Test::WriteSendLat => Some(a.outstanding.unwrap_or(1)),
        _ => a.outstanding,
    }
}

/// Checks of the windowed options.
pub(super) fn check(a: &Args) -> anyhow::Result<()> {
    if let Some(d) = depth(a) {
        if !matches!(a.test, Test::ReadLat | Test::SendLat | Test::WriteSendLat) {
            bail!("--outstanding applies to read-lat, send-lat and write-send-lat");
        }
        if d == 0 || d > MAX_DEPTH {
            bail!("--outstanding must be 1 … {MAX_DEPTH}");
        }
        if a.qp != Qp::Rc {
            bail!("--outstanding and write-send-lat run over RC (replies come in order)");
        }
        if a.symmetric {
            bail!("--outstanding times whole round trips (no --symmetric)");
        }
        if d as u64 + SIGNAL_EVERY > a.tx_depth as u64 {
            bail!(
                "--outstanding {d} needs --tx-depth at least {}",
                d as u64 + SIGNAL_EVERY
            );
        }
        if a.request_size == 0 || a.request_size > 1 << 20 {
            bail!("--request-size must be 1 B … 1 MiB");
        }
    }
    if a.poll_memory {
        if a.test != Test::ReadLat || a.outstanding.is_none() {
            bail!("--poll-memory applies to read-lat with --outstanding");
        }
        if a.may_block() {
            bail!("--poll-memory polls memory, not a completion channel (no --event or --wait)");
        }
    }
    if let Some(b) = a.bulk_size {
        if depth(a).is_none() {
            bail!("--bulk-size runs beside a windowed latency test (--outstanding)");
        }
        if b == 0 || b > 1 << 30 {
            bail!("--bulk-size must be 1 B … 1 GiB");
        }
        if a.bulk_depth == 0 || a.bulk_depth > a.tx_depth {
            bail!("--bulk-depth must be 1 … --tx-depth");
        }
    }
    Ok(())
}

/// The client of one windowed run at `size`.
#[allow(clippy::too_many_arguments)]
pub(super) fn client_run(
    a: &Args,
    ctx: &Context,
    at: SocketAddr,
    size: u64,
    depth: usize,
    opts: &LoopOpts,
    meta: &Meta,
    prog: &mut Prog,
) -> anyhow::Result<Record> {
    // The background flow connects first: the server keeps it until this run ends.
    let mut bulk = match a.bulk_size {
        Some(b) => Some(Bulk::connect(a, ctx, at, b).context("background flow")?),
        None => None,
    };
    let (side, mut qp) = queues(ctx, a, depth + 4)?;
    let req = a.request_size.min(size).max(1);
    // Request sources first (one per slot, so a request's marker stays put until it
    // has left), then a reply or READ slot per operation in flight.
    let replies = depth as u64 * req;
    let mr = super::buffer(
        a,
        qp.pd(),
        (replies + depth as u64 * size).max(64) as usize,
        Access::ALL,
    )?;
    let plan = Plan {
        done: false,
        test: a.test,
        size,
        count: opts.warmup + opts.iters,
        symmetric: false,
        remote: mr.remote(0),
        depth: depth as u32,
        request: req as u32,
        background: false,
    };
    let p = param(a, plan.encode());
    cm::init_qp(&mut qp, &p)?;
    let two_sided = a.test != Test::ReadLat;
    if two_sided {
        qp.post_recv((0..depth as u64).map(|k| reply_recv(&mr, replies, size, k)))?;
    }
    let conn = cm::connect(&mut qp, at, &p)?;
    let server = remote_of(&conn.remote().private_data)?;
    let mut w = Window {
        a,
        side,
        qp,
        mr,
        server,
        size,
        req,
        replies,
        depth: depth as u64,
        posted: 0,
        done: 0,
    };
    let st = std::cell::RefCell::new((&mut w, bulk.as_mut()));
    let result = run::windowed(
        opts,
        depth,
        WAIT,
        prog,
        |seq| st.borrow_mut().0.post(seq),
        || {
            let mut s = st.borrow_mut();
            if let Some(b) = s.1.as_mut() {
                b.service()?;
            }
            s.0.reap()
        },
    );
    // The background flow stops before this run's connection closes (the server
    // drops its side once the run is served); what it completed is its rate.
    let background = bulk.map(|b| b.finish(a));
    let run = result?;
    // The ACK of the last reply leaves with the next pass: run it before hanging up.
    for _ in 0..4 {
        w.side.spin();
    }
    if a.stats {
        eprintln!("{:#?}", ctx.stats());
        eprintln!("waits: {:?}", w.side.waiter.stats());
    }
    drop(conn);
    let mut r = round_trip_record(meta, size, &run);
    if let Some(b) = background {
        let n = format!(
            "beside {} B WRITEs ({} in flight, scheduler {}): {:.1} MB/s",
            b.bulk_size, a.bulk_depth, b.scheduler, b.bulk_mb_per_s
        );
        r.add_note(n);
        r.background = Some(b);
    }
    let what = match (a.test, a.poll_memory, a.may_block()) {
        (Test::ReadLat, true, _) => "READ, memory polled",
        (Test::ReadLat, _, true) => "READ, completion channel",
        (Test::ReadLat, _, false) => "READ, completion queue polled",
        (Test::SendLat, _, _) => "SEND request, SEND reply",
        _ => "WRITE request, SEND reply",
    };
    let n = format!("{what}; {depth} in flight");
    r.note = Some(match r.note.take() {
        Some(x) => format!("{n}; {x}"),
        None => n,
    });
    Ok(r)
}

/// The receive of reply slot `k` (replies start at `replies` in `mr`).
fn reply_recv(mr: &MemoryRegion, replies: u64, size: u64, k: u64) -> RecvWr {
    RecvWr {
        wr_id: k,
        sg_list: [mr.sge((replies + k * size) as usize, size as u32)].into(),
    }
}

/// The client's state of a windowed run.
struct Window<'a> {
    a: &'a Args,
    side: Side,
    qp: QueuePair,
    mr: MemoryRegion,
    server: RemoteAddr,
    size: u64,
    req: u64,
    /// Where the reply (READ) slots start in `mr`.
    replies: u64,
    depth: u64,
    posted: u64,
    done: u64,
}

impl Window<'_> {
    fn slot(&self, seq: u64) -> u64 {
        seq % self.depth
    }

    fn post(&mut self, seq: u64) -> anyhow::Result<()> {
        let k = self.slot(seq);
        let reply = (self.replies + k * self.size) as usize;
        let src = (k * self.req) as usize;
        let inline = self.a.inline.min(256);
        let every = seq % SIGNAL_EVERY == SIGNAL_EVERY - 1;
        let wr = match self.a.test {
            Test::ReadLat => {
                if self.a.poll_memory {
                    self.mr.write(reply + self.size as usize - 1, &[0])?;
                }
                let mut wr = SendWr::new(
                    seq,
                    WrOp::Read {
                        remote: self.server,
                    },
                    [self.mr.sge(reply, self.size as u32)],
                );
                wr.signaled = !self.a.poll_memory || every;
                wr
            }
            Test::SendLat => {
                let mut wr = send_wr(&self.mr, src, self.req, inline, every);
                wr.wr_id = seq;
                wr
            }
            _ => {
                self.mr.write(src + self.req as usize - 1, &[marker(seq)])?;
                let remote = RemoteAddr {
                    addr: self.server.addr + k * self.req,
                    rkey: self.server.rkey,
                };
                let mut wr = SendWr::new(
                    seq,
                    WrOp::Write { remote, imm: None },
                    [self.mr.sge(src, self.req as u32)],
                );
                wr.inline = self.req <= inline;
                wr.signaled = every;
                wr
            }
        };
        self.qp.post_send([wr])?;
        self.posted += 1;
        Ok(())
    }

    /// Completions now: with a blocking or adaptive `--wait` (or `--event`) waits for
    /// at least one, else one poll.
    fn take(&mut self) -> anyhow::Result<()> {
        if self.side.waiter.mode() != WaitMode::Poll {
            self.side.wait()?;
            return Ok(());
        }
        self.side.out.clear();
        if self.side.cq.poll(&mut self.side.out, 64) == 0 && !self.side.hung_up {
            return Ok(());
        }
        self.side.take_batch()
    }

    /// How many of the oldest operations in flight have completed since the last call.
    fn reap(&mut self) -> anyhow::Result<u64> {
        self.take()?;
        let before = self.done;
        match self.a.test {
            Test::ReadLat if self.a.poll_memory => {
                let mut b = [0u8; 1];
                while self.done < self.posted {
                    let k = self.slot(self.done);
                    let last = self.replies + k * self.size + self.size - 1;
                    self.mr.read(last as usize, &mut b)?;
                    if b[0] != READ_MARK {
                        break;
                    }
                    self.done += 1;
                }
            }
            Test::ReadLat => {
                self.done += self.side.out.iter().filter(|c| !c.opcode.is_recv()).count() as u64;
            }
            _ => {
                let again: Vec<RecvWr> = self
                    .side
                    .out
                    .iter()
                    .filter(|c| c.opcode.is_recv())
                    .map(|c| self.recv(c.wr_id))
                    .collect();
                self.done += again.len() as u64;
                if !again.is_empty() {
                    self.qp.post_recv(again)?;
                }
            }
        }
        Ok(self.done - before)
    }

    fn recv(&self, k: u64) -> RecvWr {
        reply_recv(&self.mr, self.replies, self.size, k)
    }
}

/// The client's background flow: `--bulk-depth` WRITEs of `--bulk-size` bytes in
/// flight on its own QP and completion queue.
struct Bulk {
    side: Side,
    qp: QueuePair,
    mr: MemoryRegion,
    remote: RemoteAddr,
    size: u64,
    depth: usize,
    inflight: usize,
    done: u64,
    failed: u64,
    /// The first post: the flow's rate runs from here.
    started: Option<Instant>,
    conn: Connection,
}

impl Bulk {
    fn connect(a: &Args, ctx: &Context, at: SocketAddr, size: u64) -> anyhow::Result<Bulk> {
        let (side, mut qp) = queues(ctx, a, 2)?;
        let mr = super::buffer(a, qp.pd(), size.max(64) as usize, Access::ALL)?;
        let plan = Plan {
            done: false,
            test: Test::WriteBw,
            size,
            count: 0,
            symmetric: false,
            remote: mr.remote(0),
            depth: 0,
            request: 0,
            background: true,
        };
        let p = param(a, plan.encode());
        cm::init_qp(&mut qp, &p)?;
        let conn = cm::connect(&mut qp, at, &p)?;
        let remote = remote_of(&conn.remote().private_data)?;
        Ok(Bulk {
            side,
            qp,
            mr,
            remote,
            size,
            depth: a.bulk_depth,
            inflight: 0,
            done: 0,
            failed: 0,
            started: None,
            conn,
        })
    }

    /// Reaps what completed and tops the flow up to its depth (never blocks).
    fn service(&mut self) -> anyhow::Result<()> {
        self.side.out.clear();
        let n = self.side.cq.poll(&mut self.side.out, 16);
        for c in &self.side.out {
            if c.status == WcStatus::Success {
                self.done += 1;
            } else {
                self.failed += 1;
            }
        }
        self.inflight = self.inflight.saturating_sub(n);
        if self.failed > 0 {
            bail!("the background flow failed ({} WRITEs)", self.failed);
        }
        while self.inflight < self.depth {
            self.started.get_or_insert_with(Instant::now);
            let wr = SendWr::new(
                1,
                WrOp::Write {
                    remote: self.remote,
                    imm: None,
                },
                [self.mr.sge(0, self.size as u32)],
            );
            self.qp.post_send([wr])?;
            self.inflight += 1;
        }
        Ok(())
    }

    /// Stops the flow (what is in flight is abandoned with the connection) and
    /// reports what it completed.
    fn finish(self, a: &Args) -> Background {
        let secs = self.started.map_or(0.0, |t| t.elapsed().as_secs_f64());
        let mb = if secs > 0.0 {
            (self.done * self.size) as f64 / secs / crate::perf::stats::MB
        } else {
            0.0
        };
        drop(self.conn);
        Background {
            bulk_size: self.size,
            bulk_messages: self.done,
            bulk_mb_per_s: mb,
            scheduler: a.scheduler.name().to_string(),
        }
    }
}

/// The server's side of a background flow: a QP the client WRITEs into, kept (with
/// its connection) until the run after it has been served. Nothing here polls: a
/// WRITE without immediate data raises no completion at the responder, and the
/// engine passes of the run being served carry the flow's packets and ACKs.
pub(super) struct Held {
    _conn: Connection,
    _qp: QueuePair,
    _mr: MemoryRegion,
    _side: Side,
}

pub(super) fn accept_background(
    a: &Args,
    ctx: &Context,
    req: ConnectRequest,
    plan: &Plan,
) -> anyhow::Result<Held> {
    let (side, mut qp) = queues(ctx, a, 2)?;
    let mr = super::buffer(a, qp.pd(), plan.size.max(64) as usize, Access::ALL)?;
    let p = param(a, remote_bytes(&mr, 0));
    cm::init_qp(&mut qp, &p)?;
    let conn = req.accept(&mut qp, &p)?;
    Ok(Held {
        _conn: conn,
        _qp: qp,
        _mr: mr,
        _side: side,
    })
}

/// The server's loop of write-send-lat: for each request, poll its slot for the
/// request's marker, then SEND the reply.
pub(super) fn serve_write_send(
    a: &Args,
    p: &Plan,
    side: &mut Side,
    qp: &mut QueuePair,
    mr: &MemoryRegion,
) -> anyhow::Result<()> {
    let depth = u64::from(p.depth.max(1));
    let req = u64::from(p.request.max(1));
    let mut b = [0u8; 1];
    for seq in 0..p.count {
        let at = (p.size + (seq % depth) * req + req - 1) as usize;
        let m = marker(seq);
        let deadline = Instant::now() + WAIT;
        let mut polls = 0u32;
        loop {
            mr.read(at, &mut b)?;
            if b[0] == m {
                break;
            }
            if Instant::now() > deadline {
                bail!("write-send-lat: request {seq} never arrived");
            }
            // A client that hit its time limit hangs up before `count` requests: its
            // connection closing puts this QP in ERR (a locked query: now and then).
            polls = polls.wrapping_add(1);
            if polls % 1024 == 0 && matches!(qp.query(), Some((QpState::Err, _))) {
                return Ok(());
            }
            side.spin();
        }
        let mut wr = send_wr(mr, 0, p.size, a.inline, false);
        // The last reply is signaled: the run ends when it has left.
        wr.signaled = seq + 1 == p.count;
        qp.post_send([wr])?;
    }
    super::drain_sends(side)?;
    // Let the last ACKs go before the caller closes the connection.
    for _ in 0..4 {
        side.spin();
    }
    Ok(())
}
