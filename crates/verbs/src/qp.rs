//! Queue pairs and shared receive queues (`ibv_qp`, `ibv_srq`).

use crate::context::{Context, ProtectionDomain};
use crate::cq::CompletionQueue;
use crate::engine::{QpFlags, Shared, SqItem, MAX_INLINE};
use crate::mr::gather_inline;
use crate::Error;
use std::sync::PoisonError;
use weft_link::spsc::{self, Producer};
use weft_transport::wr::MAX_SGE;
use weft_transport::{PostError, PostWr, QpAttr, QpAttrs, QpInit, QpState, QpType, RecvWr, SendWr};

/// What a queue pair is created with (`ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInitAttr {
    /// RC, UC or UD.
    pub qp_type: QpType,
    /// Send queue depth.
    pub max_send_wr: usize,
    /// Receive queue depth (ignored with an SRQ).
    pub max_recv_wr: usize,
    /// Most SGEs per work request (at most 32).
    pub max_sge: usize,
    /// Largest inline payload (at most 256).
    pub max_inline_data: usize,
}

impl QpInitAttr {
    /// A QP of `qp_type` with 128-deep queues, 32 SGEs and 256 bytes of inline data.
    pub fn new(qp_type: QpType) -> QpInitAttr {
        QpInitAttr {
            qp_type,
            max_send_wr: 128,
            max_recv_wr: 128,
            max_sge: MAX_SGE,
            max_inline_data: MAX_INLINE,
        }
    }
}

/// Posts between two passes that inline progress runs from `post_send` itself. 64
/// rather than 16: a stream's passes then send bursts four times longer, and the
/// pass's own costs (the link's receive, the timers, the completions) are paid a
/// quarter as often — shm 64 B send-bw 1.08x and 1.11x in two 10-round ABABs, latency
/// unchanged (a lone post is followed by a poll).
const POSTS_PER_PASS: u32 = 64;
/// Most posts of other QPs that follow a flush in the same pass and are left to the
/// next pass (inline progress; see `QueuePair::post_send`).
const CROSS_QP_BATCH: u32 = 16;

/// A queue pair. Posting needs `&mut self` (one producer per queue, no lock); wrap it
/// in a `Mutex` to share it between threads.
#[derive(Debug)]
pub struct QueuePair {
    ctx: Context,
    pd: ProtectionDomain,
    qpn: u32,
    /// The QP's slot in the transport's table (`Endpoint::qp_slot`): the doorbell
    /// paths find the QP there without a hash probe. A hint, checked by the QP
    /// number, so a wrong one costs a lookup, never a wrong QP.
    slot: u32,
    init: QpInitAttr,
    /// The send ring to the engine, made by the first post that cannot take the
    /// doorbell path ([`QueuePair::post_send`]). Until then a QP has none: its slots
    /// (a few hundred bytes each, `max_send_wr` of them) were most of a QP's memory
    /// with thousands of QPs, and a post with inline progress never touched them.
    sq: Option<Producer<SqItem>>,
    rq: Option<Producer<RecvWr>>,
    state: QpState,
    send_cq: u32,
    recv_cq: u32,
    /// Posts since this QP last ran a progress pass (inline progress).
    unprogressed: u32,
    /// The engine's pass count at this QP's last post on the doorbell path: a post
    /// two or more passes later follows a wait (see `post_send`).
    last_post_pass: u64,
    /// Shared with the engine: whether the QP is on its list of QPs that posted, and
    /// whether the transport has it in ERR (`state` may still say RTS).
    flags: std::sync::Arc<QpFlags>,
}

impl ProtectionDomain {
    /// Create a queue pair in RESET (`ibv_create_qp`). Receives go to the QP's own
    /// receive queue, or to `srq` when given.
    pub fn create_qp(
        &self,
        send_cq: &CompletionQueue,
        recv_cq: &CompletionQueue,
        srq: Option<&SharedReceiveQueue>,
        init: QpInitAttr,
    ) -> Result<QueuePair, Error> {
        let shared = self.ctx.shared();
        if !std::sync::Arc::ptr_eq(send_cq.context().shared(), shared)
            || !std::sync::Arc::ptr_eq(recv_cq.context().shared(), shared)
        {
            return Err(Error::WrongContext);
        }
        if let Some(s) = srq {
            if s.pd != self.pd || !std::sync::Arc::ptr_eq(s.ctx.shared(), shared) {
                return Err(Error::WrongContext);
            }
        }
        let (rq_tx, rq_rx) = match srq {
            Some(_) => (None, None),
            None => {
                let (t, r) = spsc::ring(init.max_recv_wr.max(1));
                (Some(t), Some(r))
            }
        };
        let mut e = shared.lock();
        let qpn = e.ep.create_qp(QpInit {
            qp_type: init.qp_type,
            pd: self.pd,
            max_send_wr: init.max_send_wr.max(1),
            max_recv_wr: init.max_recv_wr.max(1),
            srq: srq.map(|s| s.id),
        })?;
        let slot = e.ep.qp_slot(qpn).unwrap_or(u32::MAX);
        let flags = std::sync::Arc::new(QpFlags::default());
        e.add_qp(
            qpn,
            None,
            rq_rx,
            send_cq.id(),
            recv_cq.id(),
            std::sync::Arc::clone(&flags),
        );
        drop(e);
        Ok(QueuePair {
            ctx: self.ctx.clone(),
            pd: self.clone(),
            qpn,
            slot,
            init,
            sq: None,
            rq: rq_tx,
            state: QpState::Reset,
            send_cq: send_cq.id(),
            recv_cq: recv_cq.id(),
            unprogressed: 0,
            last_post_pass: 0,
            flags,
        })
    }

    /// A shared receive queue of `max_wr` entries (`ibv_create_srq`).
    pub fn create_srq(&self, max_wr: usize) -> SharedReceiveQueue {
        let (tx, rx) = spsc::ring(max_wr.max(1));
        let listed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut e = self.ctx.shared().lock();
        let id = e.ep.create_srq(self.pd, max_wr.max(1));
        e.add_srq(id, rx, std::sync::Arc::clone(&listed));
        drop(e);
        SharedReceiveQueue {
            ctx: self.ctx.clone(),
            pd: self.pd,
            id,
            rq: tx,
            listed,
        }
    }
}

impl QueuePair {
    /// The QP number (unpredictable, 24 bits).
    pub fn qp_num(&self) -> u32 {
        self.qpn
    }

    /// The protection domain the QP was created in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }

    /// The transport service.
    pub fn qp_type(&self) -> QpType {
        self.init.qp_type
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Ids of the send and receive completion queues.
    pub fn cq_ids(&self) -> (u32, u32) {
        (self.send_cq, self.recv_cq)
    }

    /// Change state and attributes (`ibv_modify_qp`): path MTU, destination QPN and
    /// path, PSNs, timeout, retry counts, `max_rd_atomic`, recovery mode, …
    pub fn modify(&mut self, attr: &QpAttr) -> Result<(), Error> {
        let mut e = self.ctx.shared().lock();
        e.ep.modify_qp(self.qpn, attr)?;
        // Out of ERR only through RESET; into it, the transport told the engine,
        // which set the flag.
        if attr.state == Some(QpState::Reset) {
            self.flags
                .errored
                .store(false, std::sync::atomic::Ordering::SeqCst);
        }
        drop(e);
        if let Some(s) = attr.state {
            self.state = s;
        }
        Ok(())
    }

    /// Let the transport take shm ring-mode descriptors for this QP, or not
    /// (`Endpoint::set_ring_mode`): the connection manager's decision
    /// ([`RemoteInfo::ring`](crate::cm::RemoteInfo::ring)), made before the QP leaves
    /// INIT, so no message is posted or received before the QP's mode is set.
    pub(crate) fn set_ring_mode(&mut self, on: bool) {
        let set = self.ctx.shared().lock().set_ring_mode(self.qpn, on);
        debug_assert!(
            set,
            "a QueuePair's QP is in its transport until it is dropped"
        );
    }

    /// The QP's current state (it may have moved to ERR on its own) and attributes
    /// (`ibv_query_qp`).
    pub fn query(&self) -> Option<(QpState, QpAttrs)> {
        let e = self.ctx.shared().lock_to_look();
        Some((e.ep.qp_state(self.qpn)?, e.ep.qp_attrs(self.qpn)?))
    }

    /// The QP's congestion window and RTT samples (weft-transport's `cc`; the device's
    /// [`DeviceConfig::transport`](crate::DeviceConfig::transport)`.congestion` turns
    /// it on). `None` once the QP is gone.
    pub fn congestion(&self) -> Option<weft_transport::CongestionState> {
        self.ctx.shared().lock_to_look().ep.congestion(self.qpn)
    }

    /// Post a list of send work requests (`ibv_post_send`). Checks that ibverbs makes
    /// synchronously are made here; on a refusal, the requests before it are posted
    /// and the error names the index. Inline requests are gathered now, so their
    /// buffers may be reused on return.
    ///
    /// The requests may be owned (`[wr]`, a `Vec<SendWr>`) or borrowed (`[&wr]`,
    /// `&wrs`), as [`PostWr`](crate::PostWr) says: a loop that keeps one request and
    /// changes its `wr_id` between posts, as perftest does with `ibv_post_send`, posts
    /// it borrowed and, on the doorbell path, saves moving it (a ~150-byte copy, and a
    /// store-forwarding stall when the request was written just before); through the
    /// ring a borrowed request is copied. An empty list must name its item type
    /// (`std::iter::empty::<SendWr>()`).
    pub fn post_send<W: PostWr>(&mut self, wrs: impl IntoIterator<Item = W>) -> Result<(), Error> {
        let mut posted = 0u32;
        let list_error = |index, error| match error {
            Error::Post(error) => Error::PostList { index, error },
            other => other,
        };
        let mut wrs = wrs.into_iter();
        // An empty list (a driver topping up a full window) posts nothing: no engine
        // lock. The first request is taken to find out (a size hint may be wrong) and
        // waits in `first` for its turn.
        let mut first = wrs.next();
        if first.is_none() {
            return Ok(());
        }
        let mut index = 0usize;
        // A refusal on the doorbell path, small and `Copy`: the `Error` is made of it
        // only when there is one (moving a `Result<(), Error>` through the post was
        // ~30 instructions a call).
        let mut refused = None;
        // Set when the doorbell path took the whole list.
        let mut done = false;
        // The doorbell path (nobody else in the engine, nothing of this QP waiting in
        // its ring): each request goes straight into the transport, with no ring hop
        // (a copy of the descriptor and its inline bytes in and one out). A post
        // that followed a wait goes onto the link at once (below; with inline
        // progress, one that follows another QP's in the same pass may join the next
        // pass's burst instead); otherwise the next
        // pass puts it there: with inline progress the caller's next poll, or the
        // pass below every `POSTS_PER_PASS` posts; with an engine thread the same
        // while the thread stands by for a polling application (its polls run the
        // passes), or the thread's next pass (woken for it if it sleeps without the
        // engine, `Shared::hand_back`). A thread in a pass, or asleep holding the
        // engine, makes this a ring post and a kick. What the transport has no
        // room for yet takes the ring below, behind it, so order is kept.
        let shared = self.ctx.shared();
        if self.sq.as_mut().is_none_or(Producer::is_drained) {
            if let Some(mut e) = shared.try_engine() {
                let pass = e.stats.passes;
                let (init, state) = (self.init, self.state);
                let p = e.post_list_now(
                    self.slot,
                    self.qpn,
                    self.pd.pd,
                    |wr| check_send(&init, state, wr),
                    &mut first,
                    &mut wrs,
                );
                // A post that follows a wait on a QP with less than half its window in
                // use is latency-bound (a request after its reply, a reply after its
                // request): it goes onto the link now, from this thread, with no
                // wait for the next pass (a NIC's doorbell). "Followed a wait": the
                // engine ran two or more passes since this QP's last post, i.e. the
                // application polled its queues in between. A stream of posts (a
                // bandwidth loop, or a window refilled after a reap) leaves them to
                // the next pass, one link burst for many; so does a QP whose window
                // is half full (the transport's own rule for leaving ACKs unasked).
                // With inline progress, so do up to `CROSS_QP_BATCH` posts of other
                // QPs after a flush in the same pass: a reap that freed several QPs'
                // windows (perftest's `-q` with one or two in flight per QP) is a
                // stream across QPs, where a flush per post was a transmit turn and a
                // link publish per message: with the flush per post, 16 QPs × 1 in
                // flight ran 0.8 times the rate of no flush at all (docs/results/
                // verbs.md, "One flush per pass"). The application's next call runs
                // the pass that sends them; the bound keeps a long batch (a server's
                // replies to many connections) from waiting for all of it. With an
                // engine thread every such post is still flushed: a post it deferred
                // could wait up to a quiet gap for a thread standing by.
                // Inline payloads are gathered into the engine's buffer, one for all
                // QPs: a buffer per QP was one more cold cache line per post when
                // thousands of QPs take turns.
                // A post beside an engine thread asleep without the engine (udp)
                // leaves from this thread whatever else holds: left to the next
                // pass, it would wake the thread just to send it
                // (`Shared::hand_back`), a doorbell write and a wake-up where one
                // `sendmmsg` does.
                let depth = self.init.max_send_wr.max(1);
                let mut flush = p.posted > 0
                    && (shared.asleep_without_engine()
                        || (depth - p.room.min(depth)) * 2 < depth
                            && pass >= self.last_post_pass.saturating_add(2)
                            && shared.app_drives());
                if flush
                    && shared.progress == crate::engine::Progress::Inline
                    && e.last_flush_pass == Some(pass)
                    && e.deferred_posts < CROSS_QP_BATCH
                {
                    flush = false;
                    e.deferred_posts += 1;
                }
                self.last_post_pass = pass;
                posted = p.posted as u32;
                index = p.posted;
                refused = p.error;
                done = p.exhausted;
                if flush {
                    e.last_flush_pass = Some(pass);
                    e.deferred_posts = 0;
                    e.flush(self.slot);
                }
                // The engine thread may sleep without the engine (udp): a post it
                // would leave for the next pass must wake it.
                shared.hand_back(&e);
            }
        }
        if let Some(r) = refused {
            self.posted(posted);
            return Err(r.at(index));
        }
        // The whole list went by the doorbell (a stream's every post): nothing for
        // the ring, and a plain `Ok(())` rather than the ring loop's `result`, which
        // lives on the stack and was copied out (64 bytes) on every post.
        if done {
            self.posted(posted);
            return Ok(());
        }
        let mut pushed = 0;
        let mut result = Ok(());
        // The rest of the list, if any, through the ring. Not `first.into_iter()
        // .chain(wrs)`: building the chain moved the iterator (with an array's
        // requests in it) even when nothing was left, on every post.
        while let Some(wr) = first.take().or_else(|| wrs.next()) {
            if let Err(error) = self.push_send(wr) {
                result = Err(list_error(index, error));
                break;
            }
            pushed += 1;
            index += 1;
        }
        if let Some(sq) = self.sq.as_mut().filter(|_| pushed > 0) {
            sq.doorbell();
            let shared = self.ctx.shared();
            shared.posted.mark(self.qpn, &self.flags.listed);
            shared.kick();
        }
        self.posted(posted + pushed);
        result
    }

    /// After a post of `n` requests: inline progress runs a pass every
    /// [`POSTS_PER_PASS`] posts, so a stream of posts without polls (a bandwidth loop
    /// filling its window) does not wait for the next poll (unless another thread is
    /// running one). A lone post is followed by a poll anyway, which runs the pass. A
    /// post of nothing does not count.
    fn posted(&mut self, n: u32) {
        let shared = self.ctx.shared();
        if n > 0 {
            shared.note_app_post();
        }
        if n > 0 && shared.progress == crate::engine::Progress::Inline {
            self.unprogressed += 1;
            if self.unprogressed >= POSTS_PER_PASS {
                self.unprogressed = 0;
                shared.try_progress();
            }
        }
    }

    fn push_send(&mut self, wr: impl PostWr) -> Result<(), Error> {
        check_send(&self.init, self.state, wr.wr())?;
        let mut item = SqItem {
            wr: wr.into_owned(),
            inline_len: 0,
            inline: [0u8; MAX_INLINE],
        };
        let n = gather(self.ctx.shared(), self.pd.pd, &item.wr, &mut item.inline)?;
        item.inline_len = n as u16;
        self.send_ring()
            .push(item)
            .map_err(|_| Error::Post(PostError::QueueFull))
    }

    /// The send ring, made now if this QP has none yet (one engine lock, once).
    fn send_ring(&mut self) -> &mut Producer<SqItem> {
        let (ctx, qpn) = (&self.ctx, self.qpn);
        let depth = self.init.max_send_wr.max(1);
        self.sq.get_or_insert_with(|| {
            let (tx, rx) = spsc::ring(depth);
            ctx.shared().lock().attach_sq(qpn, rx);
            tx
        })
    }

    /// Post a list of receive work requests (`ibv_post_recv`).
    pub fn post_recv(&mut self, wrs: impl IntoIterator<Item = RecvWr>) -> Result<(), Error> {
        let Some(rq) = &mut self.rq else {
            return Err(Error::Post(PostError::UsesSrq));
        };
        let shared = self.ctx.shared();
        let mut wrs = wrs.into_iter();
        let mut index = 0;
        // The doorbell path, as for sends: with nobody else in the engine and nothing
        // of this QP waiting in its receive ring, each receive goes straight into the
        // transport's queue. No ring hop, no listing of the QP for the next pass, no
        // kick: a server that re-posts its receive before it answers does not pay the
        // list's lock and fences ahead of its reply. What does not fit takes the
        // ring, behind it.
        if self.state != QpState::Reset && rq.is_drained() && shared.app_drives() {
            // One call into the transport for the lot: it takes requests while the
            // QP's queue has room (one QP lookup), and leaves the rest in `wrs`.
            let (slot, qpn, max_sge) = (self.slot, self.qpn, self.init.max_sge);
            let posted = shared
                .try_engine()
                .map(|mut e| e.post_recvs_now(slot, qpn, max_sge, &mut wrs));
            match posted {
                Some(Ok(n)) => index = n,
                Some(Err((n, error @ PostError::TooManySge))) => {
                    if n > 0 {
                        shared.note_app_post();
                    }
                    return Err(Error::PostList { index: n, error });
                }
                // The QP's own refusals take nothing: the ring path below decides, as
                // it did when the transport had no room for it.
                Some(Err(_)) | None => {}
            }
            if index > 0 {
                let mut rest = wrs.by_ref().peekable();
                if rest.peek().is_none() {
                    shared.note_app_post();
                    return Ok(());
                }
                let (pushed, r) = push_recvs(rq, self.state, self.init.max_sge, index, rest);
                return self.pushed_recvs(index, pushed, r);
            }
        }
        let (pushed, r) = push_recvs(rq, self.state, self.init.max_sge, index, wrs);
        self.pushed_recvs(index, pushed, r)
    }

    /// After a receive post: `posted` requests went straight into the transport and
    /// `pushed` into the receive ring (published now).
    fn pushed_recvs(
        &mut self,
        posted: usize,
        pushed: usize,
        r: Result<(), Error>,
    ) -> Result<(), Error> {
        let shared = self.ctx.shared();
        if posted + pushed > 0 {
            shared.note_app_post();
        }
        if pushed > 0 {
            if let Some(rq) = &mut self.rq {
                rq.doorbell();
            }
            shared.posted.mark(self.qpn, &self.flags.listed);
            shared.recv_posted(self.flags.errored.load(std::sync::atomic::Ordering::SeqCst));
        }
        r
    }
}

/// The checks ibverbs makes synchronously in `ibv_post_send`.
#[inline]
fn check_send(init: &QpInitAttr, state: QpState, wr: &SendWr) -> Result<(), PostError> {
    if matches!(state, QpState::Reset | QpState::Init | QpState::Rtr) {
        return Err(PostError::InvalidState(state));
    }
    if wr.sg_list.len() > init.max_sge.min(MAX_SGE) {
        return Err(PostError::TooManySge);
    }
    let supported = match init.qp_type {
        QpType::Rc => true,
        QpType::Uc => matches!(
            wr.op,
            weft_transport::WrOp::Send { .. } | weft_transport::WrOp::Write { .. }
        ),
        QpType::Ud => matches!(wr.op, weft_transport::WrOp::Send { .. }),
    };
    if !supported {
        return Err(PostError::UnsupportedOp);
    }
    if init.qp_type == QpType::Ud && wr.ud.is_none() {
        return Err(PostError::MissingUdDest);
    }
    if wr.inline
        && (wr.op.is_read_or_atomic() || wr.sg_len() > init.max_inline_data.min(MAX_INLINE) as u64)
    {
        return Err(PostError::InlineTooLarge);
    }
    Ok(())
}

/// An inline request's payload, gathered into `out` on the posting thread (so the
/// application may reuse its buffer on return); 0 bytes for any other request.
fn gather(shared: &Shared, pd: u32, wr: &SendWr, out: &mut [u8]) -> Result<usize, Error> {
    if !wr.inline {
        return Ok(0);
    }
    let keys = shared
        .inline_keys
        .read()
        .unwrap_or_else(PoisonError::into_inner);
    gather_inline(&mut &*keys, pd, &wr.sg_list, out).map_err(Error::InlineAccess)
}

/// The check ibverbs makes synchronously on a receive (`max_sge` already capped at
/// [`MAX_SGE`]): the doorbell path and the ring path share it.
fn check_recv(wr: &RecvWr, max_sge: usize) -> Result<(), PostError> {
    if wr.sg_list.len() > max_sge {
        return Err(PostError::TooManySge);
    }
    Ok(())
}

fn push_recvs(
    rq: &mut Producer<RecvWr>,
    state: QpState,
    max_sge: usize,
    first_index: usize,
    wrs: impl IntoIterator<Item = RecvWr>,
) -> (usize, Result<(), Error>) {
    if state == QpState::Reset {
        let error = PostError::InvalidState(state);
        let index = first_index;
        return (0, Err(Error::PostList { index, error }));
    }
    let mut pushed = 0;
    for (i, wr) in wrs.into_iter().enumerate() {
        let index = first_index + i;
        if let Err(error) = check_recv(&wr, max_sge.min(MAX_SGE)) {
            return (pushed, Err(Error::PostList { index, error }));
        }
        if rq.push(wr).is_err() {
            let error = PostError::QueueFull;
            return (pushed, Err(Error::PostList { index, error }));
        }
        pushed += 1;
    }
    (pushed, Ok(()))
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        let mut e = self.ctx.shared().lock();
        // What the transport already owes the peer leaves first: the ACK of the last
        // request this QP received goes out in the pass after the one that completed
        // it, and a program that destroys its QP as soon as it sees that completion
        // (ibv_rc_pingpong does) would otherwise leave the peer retrying into
        // RetryExcErr. One pass transmits before it receives.
        e.progress();
        e.remove_qp(self.qpn);
    }
}

/// A shared receive queue (`ibv_srq`): receive buffers any QP created with it draws
/// from.
#[derive(Debug)]
pub struct SharedReceiveQueue {
    ctx: Context,
    pd: u32,
    id: u32,
    rq: Producer<RecvWr>,
    /// Set while the engine has this queue on its list of queues posted to.
    listed: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl SharedReceiveQueue {
    /// Post receive work requests (`ibv_post_srq_recv`).
    pub fn post_recv(&mut self, wrs: impl IntoIterator<Item = RecvWr>) -> Result<(), Error> {
        let (pushed, r) = push_recvs(&mut self.rq, QpState::Init, MAX_SGE, 0, wrs);
        if pushed > 0 {
            self.rq.doorbell();
            let shared = self.ctx.shared();
            shared.posted.mark_srq(self.id, &self.listed);
            shared.kick();
        }
        r
    }
}

impl Drop for SharedReceiveQueue {
    fn drop(&mut self) {
        self.ctx.shared().lock().remove_srq(self.id);
    }
}
