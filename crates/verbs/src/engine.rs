//! The software RNIC: one engine per [`crate::Context`] runs the transport's queue
//! pairs over a datagram link.
//!
//! Applications never call the transport directly. They push work requests into
//! lock-free SPSC rings (one per send queue, receive queue and shared receive queue)
//! and ring a doorbell; completions come back through one SPSC ring per completion
//! queue. With inline progress, a send posted while no other thread is in the engine
//! and the QP's ring is empty skips the ring (`Engine::post_list_now`). The engine's state sits behind one mutex that only control operations
//! (create, modify, register) and the progress loop take:
//!
//! - [`Progress::Thread`]: a dedicated thread runs the engine's progress pass in a loop, so
//!   one-sided operations complete against a process that never calls weft again. When
//!   idle it spins for a budget learned from the recent gaps (at most `idle_spin`),
//!   then blocks on the link and the doorbell eventfd; it stands by while the
//!   application spins on its queues (see `Shared::run` and the `adapt` module).
//! - [`Progress::Inline`]: no thread; `CompletionQueue::poll` runs a progress pass
//!   when its ring is empty (lowest latency, one thread per context).
//!
//! A pass (`Engine::progress`): move posted work requests into the transport (only
//! from the QPs and shared receive queues posted to since the last pass: a post lists
//! its queue once),
//! transmit what the transport has (its deficit round robin decides whose turn it is),
//! then receive a burst, run due timers, and route completions to their queues.
//! Transmitting first lets the ACKs the previous pass owes leave in the same link burst
//! as the application's next message (docs/verbs.md, "The engine").

use crate::adapt::{GapHistory, QuietGap};
use crate::cq_ring::CqProducer;
use crate::mr::{MrEntry, MrTable, PullErrors, Pulls};
use crate::recent::Recent;
use std::collections::VecDeque;
use std::fmt;
use std::os::fd::AsFd;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::thread::JoinHandle;
use std::time::Duration;
use weft_link::datagram::path_ends;
use weft_link::spsc::Consumer;
use weft_link::wake::EventFd;
use weft_link::{Datagram, DatagramLink, LinkStats, PacketBuf};
use weft_transport::fastmap::FastMap;
use weft_transport::{
    Completion, CompletionSink, Config, Endpoint, Instant, PostError, PostWr, RecvWr, RingAnswer,
    RingTag, SendQueue, SendWr, Stats, Transmit, TxBuffers, WcStatus, WrOp,
};
use weft_wire::ring::{RingDescriptor, RingOp};
use weft_wire::roce::IcrcPath;

/// Who drives the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Progress {
    /// A dedicated engine thread (needed for passive one-sided targets).
    #[default]
    Thread,
    /// Progress runs inside `CompletionQueue::poll` and blocking waits.
    Inline,
}

/// Largest inline payload a work request can carry through the send ring.
pub const MAX_INLINE: usize = 256;

/// A send work request on its way to the engine; inline payloads travel in the ring
/// slot, so the application may reuse its buffer when `post_send` returns.
pub(crate) struct SqItem {
    pub(crate) wr: SendWr,
    pub(crate) inline_len: u16,
    pub(crate) inline: [u8; MAX_INLINE],
}

impl fmt::Debug for SqItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqItem")
            .field("wr", &self.wr)
            .field("inline_len", &self.inline_len)
            .finish()
    }
}

/// How a completion queue is woken: armed by `req_notify`, fired by the engine.
#[derive(Debug)]
pub(crate) struct CqNotify {
    pub(crate) id: u32,
    pub(crate) armed: AtomicBool,
    pub(crate) channel: Option<Arc<ChannelInner>>,
    /// When the engine last fired the channel for this queue (`CLOCK_MONOTONIC`,
    /// µs): what a blocked waiter's wait lasted before its own wake-up
    /// ([`crate::Waiter`]).
    pub(crate) fired_us: AtomicU64,
}

/// A completion channel's event queue and its eventfd.
///
/// The engine queues an event, then writes the eventfd. A take does not drain it (a
/// read per event cost a waiter that found its event without sleeping a system call,
/// and more when the write had not landed yet: `--wait block` ping-pong +14 % p50,
/// +21 % CPU over shm); a look that finds no event after the descriptor read ready,
/// or that ends without one, drains it if it still reads ready
/// ([`ChannelInner::settle_if_empty`]). So a program that watches the descriptor itself (UCX
/// puts it in its epoll set) and takes events without blocking (`ibv_get_cq_event`
/// on an `O_NONBLOCK` channel) sees it readable at most one look past its last event.
/// Before, only a blocking wait drained it and such a program found it readable for
/// good: UCX's async thread spun a core on it, four busy threads on two cores
/// (docs/results/ibverbs.md, "UCX on weft0: a completion channel that stayed
/// readable").
#[derive(Debug)]
pub(crate) struct ChannelInner {
    pub(crate) fd: EventFd,
    pub(crate) events: Mutex<VecDeque<u32>>,
}

impl ChannelInner {
    /// A look that found no event: drain the eventfd if the queue is still empty and
    /// the descriptor reads ready (the counts of events already taken, or a write by
    /// the program). Holds `events` so that an event queued meanwhile keeps its count.
    /// Never blocks: the C layer hands programs the descriptor blocking (as
    /// rdma-core's), and a read of a zero counter would then wait, holding `events`,
    /// for the next announcement; hence the zero-timeout poll first.
    pub(crate) fn settle_if_empty(&self) {
        let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        if events.is_empty()
            && weft_link::wake::poll_readable(&[self.fd.as_fd()], Duration::ZERO).unwrap_or(0) != 0
        {
            self.fd.drain();
        }
    }
}

#[derive(Debug)]
struct CqSlot {
    /// The queue's id ([`CqNotify::id`]): a QP's [`CqRef`] names its slot by index and
    /// id, so a slot reused by a later queue is never mistaken for a destroyed one.
    id: u32,
    ring: CqProducer,
    overflow: VecDeque<Completion>,
    notify: Arc<CqNotify>,
    touched: bool,
}

/// Where a QP's completions go: the completion queue's index in [`Engine`]'s slab, and
/// its id to check that the slot still holds that queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CqRef {
    idx: usize,
    id: u32,
}

/// A QP's rings. The engine takes from a ring only as many requests as the
/// transport's queue has room for, so nothing waits anywhere but in the ring.
#[derive(Debug)]
struct QpSlot {
    /// The send ring, from the QP's first post that could not take the doorbell path
    /// (`QueuePair::post_send`): a QP whose posts all take it never allocates one.
    sq: Option<Consumer<SqItem>>,
    rq: Option<Consumer<RecvWr>>,
    /// Shared with the QP's handle.
    flags: Arc<QpFlags>,
}

/// What a QP's handle (`QueuePair`) and the engine share.
#[derive(Debug, Default)]
pub(crate) struct QpFlags {
    /// True while the QP is in [`Posted`]'s list or the engine's drain list.
    pub(crate) listed: AtomicBool,
    /// True while the QP is in ERR in the transport, whether it went there by itself
    /// (retries exceeded, a NAK, a fatal responder error: the handle's own state
    /// still says RTS then) or by a modify: set by the engine when the transport says
    /// so ([`CompletionSink::qp_error`], before the completions it flushes), cleared
    /// by the modify to RESET (the only way out of ERR). A receive posted to the
    /// QP's ring while it is set is due at once (flushed): the post wakes a sleeping
    /// engine thread ([`Shared::recv_posted`]).
    pub(crate) errored: AtomicBool,
}

/// The QPs and shared receive queues whose rings the application posted to since
/// the engine last looked, so a pass visits those and not every queue. Each is
/// listed at most once (its `listed` flag); the engine clears the flag before it
/// drains the rings, so a post that races with the drain lists the queue again.
#[derive(Debug, Default)]
pub(crate) struct Posted {
    any: AtomicBool,
    list: Mutex<Listed>,
}

/// Lists of QPs and shared receive queues: [`Posted`]'s, and the engine's to drain.
#[derive(Debug, Default)]
struct Listed {
    qps: Vec<u32>,
    srqs: Vec<u32>,
}

impl Listed {
    /// Both lists empty (one test of their lengths).
    #[inline(always)]
    fn is_empty(&self) -> bool {
        (self.qps.len() | self.srqs.len()) == 0
    }
}

impl Posted {
    /// Move the listed QPs and shared receive queues into `to`: a plain load first,
    /// since most passes find nothing posted and a locked swap on every pass costs a
    /// busy-polling thread some 20 cycles each for nothing.
    /// A post this load misses is seen by the next look; before the engine thread
    /// sleeps, its SeqCst fence orders its `sleeping` store before this load (the
    /// mirror of the poster's SeqCst store and `sleeping` look in `kick`). The queues
    /// stay listed until the engine looks at their rings.
    ///
    /// The plain load is inlined into the pass; the swap and the list's lock are not
    /// (out of line, the call was ~18 instructions of every pass, most of which
    /// find nothing; callgrind, `msg_rate … lat`).
    #[inline(always)]
    fn take_into(&self, to: &mut Listed) {
        if self.any.load(Ordering::Relaxed) {
            self.take_listed(to);
        }
    }

    /// [`Posted::take_into`]'s out-of-line part: the swap that claims the listed
    /// queues, then the list's lock.
    #[inline(never)]
    fn take_listed(&self, to: &mut Listed) {
        if self.any.swap(false, Ordering::SeqCst) {
            let mut l = self.list.lock().unwrap_or_else(PoisonError::into_inner);
            to.qps.append(&mut l.qps);
            if !l.srqs.is_empty() {
                to.srqs.append(&mut l.srqs);
            }
        }
    }

    /// After publishing receives in shared receive queue `id`'s ring (before the
    /// kick): listed as a QP's posts are, so that the pass (and a receive step that
    /// looks only when something was posted, [`feed_posted_recvs`]) visits it, and
    /// no other queue.
    pub(crate) fn mark_srq(&self, id: u32, listed: &AtomicBool) {
        self.list_once(listed, |l| l.srqs.push(id));
    }

    /// After publishing work requests in QP `qpn`'s rings (before the kick).
    pub(crate) fn mark(&self, qpn: u32, listed: &AtomicBool) {
        self.list_once(listed, |l| l.qps.push(qpn));
    }

    /// List a queue (`push`) unless its `listed` flag says it already is.
    fn list_once(&self, listed: &AtomicBool, push: impl FnOnce(&mut Listed)) {
        if !listed.swap(true, Ordering::SeqCst) {
            push(&mut self.list.lock().unwrap_or_else(PoisonError::into_inner));
            self.any.store(true, Ordering::SeqCst);
        }
    }
}

#[derive(Debug)]
struct SrqSlot {
    rq: Consumer<RecvWr>,
    /// True while the queue is in [`Posted`]'s list or the engine's drain list;
    /// shared with its `SharedReceiveQueue`.
    listed: Arc<AtomicBool>,
}

/// Counters of the engine itself (the transport and the link keep their own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Progress passes run.
    pub passes: u64,
    /// Of `passes`, those a poll found certain to do nothing and ran as their
    /// counters alone (`Engine::idle_pass`).
    pub idle_passes: u64,
    /// Times the engine thread blocked.
    pub sleeps: u64,
    /// Completions that found their queue's ring full and waited in the overflow list.
    pub cq_overflows: u64,
    /// Completions that a poll's own pass put straight into the poll's vector, not
    /// through the queue's ring (the queue's ring was empty and it had room).
    pub cq_direct: u64,
    /// Completions for a queue that no longer exists.
    pub cq_orphans: u64,
    /// Work requests the transport refused when the engine posted them (reported as
    /// error completions).
    pub post_refused: u64,
    /// Datagrams dropped because the link's buffer pool was empty (or, never seen,
    /// its buffer was too small for the packet a flush wrote).
    pub tx_no_buffer: u64,
    /// Ring mode ([`weft_transport::ring`]): descriptors the link did not take at once
    /// (its ring full, or no connection to the peer yet), queued and sent in order by
    /// a later pass.
    pub ring_queued: u64,
    /// Ring mode: received items with the descriptor marker that did not parse.
    pub ring_malformed: u64,
    /// Bursts handed to the link (one system call each on udp).
    pub tx_bursts: u64,
    /// Posts that the posting thread put on the link itself, because they followed a
    /// wait on a QP with room in its window (docs/verbs.md, "The doorbell path").
    pub post_flushes: u64,
    /// Passes that transmitted again after receiving, on a link whose sends are memory
    /// writes: what the received packets made owed left in the same pass.
    pub tx_after_rx: u64,
    /// QPs whose rings a pass looked at: those that posted since the pass before (a
    /// work counter; idle QPs add nothing).
    pub qp_rings_drained: u64,
    /// Shared receive queues whose rings a pass looked at: those posted to since the
    /// pass before, and those whose receives the transport had no room for yet (a
    /// work counter; idle queues add nothing).
    pub srq_rings_drained: u64,
    /// Times the engine thread stood by because the application spun on its
    /// completion queues and made the progress itself.
    pub standbys: u64,
    /// Stand-bys the engine thread ended because the application left its queues
    /// unpolled for the learned quiet gap (it then served the link itself).
    pub takeovers: u64,
    /// Of those, takeovers at once because a packet arrived on the link (udp) while
    /// the application had stopped polling (a takeover had served it before:
    /// docs/verbs.md, "Progress").
    pub link_takeovers: u64,
    /// Of the link takeovers, those whose arrival the application had already taken
    /// when the thread looked (the socket no longer readable: its readiness was
    /// stale by the thread's wake-up).
    pub link_takeovers_stale: u64,
    /// Of the link takeovers, those that found the application gone off with its
    /// completions (not polled empty since it took them).
    pub link_takeovers_left: u64,
    /// Of the link takeovers, those that found the application's posts waiting for a
    /// pass (work the takeover's pass then finds, though the application made it).
    pub link_takeovers_posted: u64,
    /// Takeovers that armed (or re-armed) the link watch: the engine found work
    /// before the application came back, and the application had gone off with its
    /// completions.
    pub watch_arms: u64,
    /// Of those, arms after a link takeover (an armed watch re-arming itself).
    pub watch_rearms: u64,
    /// The learned quiet gap, in nanoseconds (docs/verbs.md, "Progress").
    pub quiet_gap_ns: u64,
    /// Waits of at most a quiet gap on the doorbell and the link (udp) that the idle
    /// engine thread made without holding the engine, because the application had
    /// polled within the last millisecond.
    pub watches: u64,
    /// Doorbell writes by an application thread that used the engine (a poll's pass,
    /// a post on the doorbell path) while the engine thread slept without it, and
    /// left it something to do before its wake-up: a post to put on the link, a
    /// timer due earlier, datagrams or sends the link holds (`Shared::hand_back`).
    pub handbacks: u64,
    /// Sleeps of the engine thread without holding the engine (udp, the application
    /// back after a pause, the engine thread's loop); the rest of [`EngineStats::sleeps`] held
    /// it.
    pub sleeps_free: u64,
    /// Passes that transmitted while several QPs were active (their byte budget one
    /// round of the deficit round robin, then [`DeviceConfig::shared_pass`]).
    ///
    /// [`DeviceConfig::shared_pass`]: crate::DeviceConfig::shared_pass
    pub shared_passes: u64,
    /// Of those, passes that went on transmitting past their round because their time
    /// allowance had not run out.
    pub shared_passes_extended: u64,
    /// Application polls (thread progress) that found the engine held by another
    /// thread (the engine thread's pass, another queue's poll, a post) and returned
    /// empty-handed. Millions of them in a latency test mean the engine thread loses
    /// its core inside passes and the application's polls wait for its next time
    /// slice (UCX on weft0 before its completion channel stopped staying readable:
    /// docs/results/ibverbs.md).
    pub polls_held: u64,
    /// Times the engine thread, about to block, sent the delayed ACKs the transport
    /// owed ahead of their deadline instead of waking for them
    /// (`Engine::send_owed_acks`).
    pub early_acks: u64,
    /// Receive posts through the ring that found their QP in the error state (its
    /// flag set by the transport's word, whatever the handle's own state says): each
    /// kicked the engine (a doorbell write if its thread was asleep), their flush
    /// completions being due at once ([`CompletionSink::qp_error`]).
    pub recv_flush_kicks: u64,
}

/// The completion queues' rings, and which of them each QP completes into: the
/// transport's completion sink ([`CompletionSink`]). A completion goes straight into
/// its ring from inside the transport call that completes it, with no queue in the
/// transport and no copy out of it; the pass publishes the touched rings at its end
/// ([`Engine::complete`]).
#[derive(Debug)]
pub(crate) struct CqRouter {
    /// Completion queues in a slab: a completion reaches its ring by index, not by a
    /// hash lookup ([`CqRouter::route`]).
    cqs: Vec<Option<CqSlot>>,
    /// Free slots of `cqs`.
    cq_free: Vec<usize>,
    /// Completion queue id → its slot in `cqs` (the control path's lookup).
    cq_index: FastMap<u32, usize>,
    /// Slab indices of the queues that got completions in this pass (published once).
    cq_touched: Vec<usize>,
    /// Each QP's send and receive queues.
    routes: FastMap<u32, (CqRef, CqRef)>,
    /// Each QP's flags, whose `errored` the transport's word sets
    /// ([`CompletionSink::qp_error`]).
    flags: FastMap<u32, Arc<QpFlags>>,
    /// The QP the last completion was routed for, with its queues: completions come in
    /// runs per QP, so most skip the QP table too.
    route_memo: Option<(u32, CqRef, CqRef)>,
    next_cq: u32,
    /// True while some queue's completions wait in its overflow list.
    overflowed: bool,
    /// A completion came since the last [`CqRouter::publish_touched`] (orphans
    /// included): the pass did work.
    routed: bool,
    /// The queue whose `poll` runs this pass ([`Engine::progress_into`]): while
    /// `direct_room` lasts, its completions go straight into `direct_out`, handed to
    /// the caller's vector after the pass. [`NO_CQ`] between such passes.
    direct_cq: CqRef,
    direct_room: usize,
    /// Whether the pass's first completion of `direct_cq` found its ring drained
    /// (looked at only then, so a pass that completes nothing pays nothing).
    direct_checked: bool,
    direct_out: Vec<Completion>,
    /// Completions that went straight into a polling caller's vector.
    cq_direct: u64,
    cq_overflows: u64,
    cq_orphans: u64,
}

/// No queue: [`CqRouter`]'s `direct_cq` outside a poll's pass.
const NO_CQ: CqRef = CqRef {
    idx: usize::MAX,
    id: 0,
};

impl Default for CqRouter {
    fn default() -> CqRouter {
        CqRouter {
            cqs: Vec::new(),
            cq_free: Vec::new(),
            cq_index: FastMap::default(),
            cq_touched: Vec::new(),
            routes: FastMap::default(),
            flags: FastMap::default(),
            route_memo: None,
            next_cq: 1,
            overflowed: false,
            routed: false,
            direct_cq: NO_CQ,
            direct_room: 0,
            direct_checked: false,
            direct_out: Vec::new(),
            cq_direct: 0,
            cq_overflows: 0,
            cq_orphans: 0,
        }
    }
}

impl CompletionSink for CqRouter {
    fn complete(&mut self, c: Completion) {
        self.route(c);
    }

    /// The QP's flag is set before the flushed completions are routed (and so before
    /// the pass publishes them): a poster that saw them sees the flag.
    fn qp_error(&mut self, qpn: u32) {
        if let Some(f) = self.flags.get(&qpn) {
            f.errored.store(true, Ordering::SeqCst);
        }
    }
}

impl CqRouter {
    /// Put a completion into its queue's ring: the QP's queues come from the memo of
    /// the last QP routed (or one QP-table lookup), the ring from the slab by index.
    fn route(&mut self, c: Completion) {
        self.routed = true;
        let (send, recv) = match self.route_memo {
            Some((qpn, s, r)) if qpn == c.qpn => (s, r),
            _ => match self.routes.get(&c.qpn) {
                Some(&(s, r)) => {
                    self.route_memo = Some((c.qpn, s, r));
                    (s, r)
                }
                None => {
                    self.cq_orphans += 1;
                    return;
                }
            },
        };
        let cq = if c.opcode.is_recv() { recv } else { send };
        // The polling caller's own queue, while it has room: straight into its vector.
        // Only if, at this pass's first completion for it, its ring held nothing the
        // caller had not taken: these then come after everything before them. Once the
        // room is spent (or the queue was armed, whose channel must fire) the rest
        // take the ring, after them.
        if cq == self.direct_cq && self.direct_room > 0 && self.direct_ok(cq) {
            self.direct_room -= 1;
            self.direct_out.push(c);
            self.cq_direct += 1;
            return;
        }
        let Some(slot) = self
            .cqs
            .get_mut(cq.idx)
            .and_then(Option::as_mut)
            .filter(|s| s.id == cq.id)
        else {
            self.cq_orphans += 1;
            return;
        };
        if !slot.touched {
            slot.touched = true;
            self.cq_touched.push(cq.idx);
        }
        if !slot.overflow.is_empty() {
            slot.overflow.push_back(c);
            self.cq_overflows += 1;
        } else if let Err(c) = slot.ring.push(c) {
            slot.overflow.push_back(c);
            self.cq_overflows += 1;
            self.overflowed = true;
        }
    }

    /// Publish the rings that got completions, move overflowed completions in where
    /// there is room; true when any completion came since the last call.
    fn publish_touched(&mut self) -> bool {
        let any = std::mem::take(&mut self.routed);
        for i in self.cq_touched.drain(..) {
            if let Some(slot) = &mut self.cqs[i] {
                slot.touched = false;
                publish(slot);
            }
        }
        // Completions that waited for room.
        if self.overflowed {
            self.overflowed = false;
            for slot in self.cqs.iter_mut().flatten() {
                if !slot.overflow.is_empty() {
                    while let Some(c) = slot.overflow.pop_front() {
                        if let Err(c) = slot.ring.push(c) {
                            slot.overflow.push_front(c);
                            break;
                        }
                    }
                    publish(slot);
                    self.overflowed |= !slot.overflow.is_empty();
                }
            }
        }
        any
    }

    /// The slab slot of completion queue `id` (a control-path lookup).
    fn cq_ref(&self, id: u32) -> Option<CqRef> {
        self.cq_index.get(&id).map(|&idx| CqRef { idx, id })
    }

    /// Whether a completion of `cq`, the polled queue, may go straight into the
    /// caller's vector: the first time in a pass, its ring and overflow list must hold
    /// nothing the caller has not taken; every time, it must not be armed. A no ends
    /// the direct way for the rest of the pass.
    #[inline]
    fn direct_ok(&mut self, cq: CqRef) -> bool {
        let Some(s) = self.cqs.get_mut(cq.idx).and_then(Option::as_mut) else {
            self.direct_room = 0;
            return false;
        };
        let ok = s.id == cq.id
            && !s.notify.armed.load(Ordering::Relaxed)
            && (self.direct_checked
                || (!s.touched && s.overflow.is_empty() && s.ring.is_drained()));
        self.direct_checked = true;
        if !ok {
            self.direct_room = 0;
        }
        ok
    }
}

/// The engine's state: the transport endpoint (with the completion queues as its
/// sink), the link, and the QPs' rings.
pub(crate) struct Engine {
    pub(crate) ep: Endpoint<MrTable, CqRouter>,
    /// Where the doorbell path gathers an inline payload ([`MAX_INLINE`] bytes).
    pub(crate) inline_scratch: Vec<u8>,
    /// Where [`Engine::flush`] writes a lone QP's packet (a pool buffer's room, sized
    /// at the first flush): a link that takes it as it is (shm) copies it from here.
    lone: Vec<u8>,
    link: Box<dyn DatagramLink>,
    /// The link stages packets itself ([`DatagramLink::stages_tx`], asked once): the
    /// udp link. Other links' passes make no call to ask for staged packets.
    stages_tx: bool,
    /// The link visits received datagrams in its own buffers
    /// ([`DatagramLink::visits_rx`], asked once): the shm link.
    visits_rx: bool,
    qps: FastMap<u32, QpSlot>,
    srqs: FastMap<u32, SrqSlot>,
    rx: Vec<Datagram>,
    tx: Vec<Datagram>,
    spare: Vec<PacketBuf>,
    rq_scratch: Vec<RecvWr>,
    /// QPs that posted, shared with their `QueuePair`s.
    posted: Arc<Posted>,
    /// The QPs this pass drains, and those whose rings kept requests the transport had
    /// no room for (drained again next pass).
    /// The same for the shared receive queues, in the lists' `srqs`.
    to_drain: Listed,
    carry: Listed,
    /// The engine's time zero, in [`weft_link::monotonic_micros`]' microseconds.
    origin: u64,
    /// Passes run (the clock of `recent`).
    pass: u64,
    /// The engine blocked since the last pass: the next pass checks its timers (the
    /// wait may have been a timer's).
    woke: bool,
    /// QPs that transmitted recently, with the pass they last did.
    recent: Recent,
    /// The transport's scheduling quantum in bytes.
    quantum: usize,
    /// How long a pass may keep transmitting, beyond its round of the scheduler,
    /// while several QPs are active (see [`Engine::transmit`]); microseconds.
    shared_pass_us: u64,
    /// The link's sends are memory writes ([`DatagramLink::sends_in_memory`]): what a
    /// pass's receive made owed leaves in the same pass (see [`Engine::progress`]).
    send_after_receive: bool,
    /// The pass in which the doorbell path last flushed a post, and the posts of
    /// other QPs it has left to the next pass since (see `QueuePair::post_send`).
    pub(crate) last_flush_pass: Option<u64>,
    pub(crate) deferred_posts: u32,
    /// Ring mode ([`weft_transport::ring`]): descriptors the link did not take yet, in
    /// order; each goes before anything newer.
    ring_tx: VecDeque<(PacketBuf, IcrcPath, RingTag)>,
    /// Releases (and losses) of descriptors read from the link and not yet handed to
    /// the transport: a pass hands them in after its receive found the link empty,
    /// so an ERROR the peer pushed before a release is always handled first.
    ring_released: Vec<u64>,
    ring_lost: Vec<u64>,
    /// ERROR descriptors answering refused ring-mode requests, until published.
    ring_replies: Vec<(RingDescriptor, IcrcPath)>,
    /// The link holds back the release of received items until the engine lets it
    /// ([`DatagramLink::hold_releases`], shm): see [`Engine::release_rx`]. Set when
    /// the first QP enters ring mode ([`Engine::set_ring_mode`]), and the gate of every
    /// ring-mode step of a pass: only a ring-mode QP's descriptors are tracked.
    holds_rx: bool,
    /// Received items are held unreleased: an ERROR waits for room on the link.
    rx_held: bool,
    /// Descriptors sent as tracked items whose tags the link has not handed back yet,
    /// and of them those whose release the transport waits for
    /// ([`RingTag::asks`]): kept here so that a pass asks the link only when it may
    /// have something (a virtual call each pass was ~20 instructions of an idle poll).
    ring_inflight: usize,
    ring_asking: usize,
    pub(crate) stats: EngineStats,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("local", &self.link.local_addr())
            .field("qps", &self.qps.len())
            .field("cqs", &self.ep.sink().cq_index.len())
            .finish()
    }
}

const BURST: usize = 32;
/// How long an engine thread sleeps at most while ring-mode descriptors wait for the
/// peer's release ([`Engine::sleep_budget`]): their completions come no later than
/// this after the peer took them, though nothing wakes the thread for it.
const RING_RELEASE_LOOK: Duration = Duration::from_micros(50);
/// Most spare packet buffers the engine keeps between passes ([`Engine::trim_spare`]).
const SPARE_MAX: usize = 2 * BURST;
/// Most bytes one progress pass transmits.
const TX_BYTES_PER_PASS: usize = 64 << 10;
/// QPs that sent within this many passes count as active.
const RECENT_PASSES: u64 = 16;
/// A pass that found nothing to do checks an armed transport timer only every this
/// many passes (see [`Engine::progress`]).
const IDLE_TIMER_CHECK: u64 = 16;

/// Whether pass number `pass` is one of the every-[`IDLE_TIMER_CHECK`]th passes that
/// look at the timers with nothing else calling for it.
#[inline]
fn timer_turn(pass: u64) -> bool {
    pass % IDLE_TIMER_CHECK == 0
}
/// Rounds of the transport's scheduler a pass runs at least while several QPs are
/// active.
const SHARED_ROUNDS: usize = 1;
/// While several QPs are active, a pass flushes its transmit burst every this many
/// packets, so the time it has spent (the send calls included) is known as it goes.
const SHARED_FLUSH: usize = 8;
/// The default of [`Engine::set_shared_pass`]: how long a pass may go on transmitting
/// after its scheduler round while several QPs are active.
pub(crate) const SHARED_PASS_DEFAULT: Duration = Duration::from_micros(16);
/// Most bytes one progress pass receives (checked between bursts).
const RX_BYTES_PER_PASS: usize = 64 << 10;

impl Engine {
    /// The engine over `link`, with a transport endpoint of configuration `cfg` and
    /// memory `mem`. What the transport is told about the link it runs on is set
    /// here, from the link's own word: an owed ACK rides along with its QP's reply
    /// ([`Config::ack_rides_reply`]) where the link's sends are memory writes
    /// ([`DatagramLink::sends_in_memory`], shm), a burst of them one arrival at the
    /// peer.
    pub(crate) fn new(mut cfg: Config, mem: MrTable, link: Box<dyn DatagramLink>) -> Engine {
        let send_after_receive = link.sends_in_memory();
        cfg.ack_rides_reply = send_after_receive;
        let ep = Endpoint::with_sink(cfg, mem, CqRouter::default());
        let quantum = ep.config().drr_quantum.max(1) as usize;
        let stages_tx = link.stages_tx();
        let visits_rx = link.visits_rx();
        let holds_rx = false;
        Engine {
            quantum,
            ep,
            inline_scratch: vec![0; MAX_INLINE],
            lone: Vec::new(),
            link,
            stages_tx,
            visits_rx,
            qps: FastMap::default(),
            srqs: FastMap::default(),
            rx: Vec::with_capacity(BURST),
            tx: Vec::with_capacity(BURST * 2),
            spare: Vec::with_capacity(BURST),
            rq_scratch: Vec::with_capacity(BURST),
            posted: Arc::new(Posted::default()),
            to_drain: Listed::default(),
            carry: Listed::default(),
            origin: weft_link::monotonic_micros(),
            pass: 0,
            woke: false,
            recent: Recent::default(),
            shared_pass_us: SHARED_PASS_DEFAULT.as_micros() as u64,
            send_after_receive,
            last_flush_pass: None,
            deferred_posts: 0,
            ring_tx: VecDeque::new(),
            ring_released: Vec::new(),
            ring_lost: Vec::new(),
            ring_replies: Vec::new(),
            holds_rx,
            rx_held: false,
            ring_inflight: 0,
            ring_asking: 0,
            stats: EngineStats::default(),
        }
    }

    /// How long a pass may go on transmitting after its round of the scheduler while
    /// several QPs are active (`Duration::ZERO`: one round and no more).
    pub(crate) fn set_shared_pass(&mut self, d: Duration) {
        self.shared_pass_us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    }

    pub(crate) fn link_stats(&self) -> LinkStats {
        self.link.stats()
    }

    /// A duplicate of the link's readiness descriptor
    /// ([`DatagramLink::readiness_fd`]), for the engine thread to watch the link
    /// without holding the engine; `None` on links without one (shm).
    pub(crate) fn link_readiness_fd(&self) -> Option<std::os::fd::OwnedFd> {
        self.link.readiness_fd()?.try_clone_to_owned().ok()
    }

    fn now(&self) -> Instant {
        Instant(weft_link::monotonic_micros().saturating_sub(self.origin))
    }

    pub(crate) fn add_cq(
        &mut self,
        ring: CqProducer,
        channel: Option<Arc<ChannelInner>>,
    ) -> (Arc<CqNotify>, usize) {
        let r = self.ep.sink_mut();
        // Ids are never 0 and never one a live queue holds, even after 2^32 queues:
        // a QP names its queues by slot and id, so an id must mean one queue.
        let mut id = r.next_cq;
        while id == 0 || r.cq_index.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        r.next_cq = id.wrapping_add(1);
        let notify = Arc::new(CqNotify {
            id,
            armed: AtomicBool::new(false),
            channel,
            fired_us: AtomicU64::new(0),
        });
        let slot = CqSlot {
            id,
            ring,
            overflow: VecDeque::new(),
            notify: Arc::clone(&notify),
            touched: false,
        };
        let idx = match r.cq_free.pop() {
            Some(i) => {
                r.cqs[i] = Some(slot);
                i
            }
            None => {
                r.cqs.push(Some(slot));
                r.cqs.len() - 1
            }
        };
        r.cq_index.insert(id, idx);
        (notify, idx)
    }

    pub(crate) fn remove_cq(&mut self, id: u32) {
        let r = self.ep.sink_mut();
        if let Some(i) = r.cq_index.remove(&id) {
            r.cqs[i] = None;
            r.cq_free.push(i);
            r.cq_touched.retain(|&t| t != i);
        }
    }

    /// Give QP `qpn` its send ring (see [`QpSlot`]'s `sq`).
    pub(crate) fn attach_sq(&mut self, qpn: u32, sq: Consumer<SqItem>) {
        if let Some(slot) = self.qps.get_mut(&qpn) {
            slot.sq = Some(sq);
        }
    }

    pub(crate) fn add_qp(
        &mut self,
        qpn: u32,
        sq: Option<Consumer<SqItem>>,
        rq: Option<Consumer<RecvWr>>,
        send_cq: u32,
        recv_cq: u32,
        flags: Arc<QpFlags>,
    ) {
        let gone = CqRef {
            idx: usize::MAX,
            id: 0,
        };
        // An unknown id gives a reference that matches no slot, so its completions
        // count as orphans.
        let r = self.ep.sink_mut();
        let send_cq = r.cq_ref(send_cq).unwrap_or(gone);
        let recv_cq = r.cq_ref(recv_cq).unwrap_or(gone);
        r.route_memo = None;
        r.routes.insert(qpn, (send_cq, recv_cq));
        r.flags.insert(qpn, Arc::clone(&flags));
        self.qps.insert(qpn, QpSlot { sq, rq, flags });
    }

    pub(crate) fn remove_qp(&mut self, qpn: u32) {
        let r = self.ep.sink_mut();
        r.route_memo = None;
        r.routes.remove(&qpn);
        r.flags.remove(&qpn);
        self.qps.remove(&qpn);
        self.ep.destroy_qp(qpn);
    }

    pub(crate) fn add_srq(&mut self, id: u32, rq: Consumer<RecvWr>, listed: Arc<AtomicBool>) {
        self.srqs.insert(id, SrqSlot { rq, listed });
    }

    pub(crate) fn remove_srq(&mut self, id: u32) {
        self.srqs.remove(&id);
    }

    pub(crate) fn register(&mut self, e: Arc<MrEntry>) {
        if let Some(m) = &e.shared {
            // Offered to every peer; the lkey is unique while registered.
            self.link.share_memory(u64::from(e.region.lkey), m);
        }
        self.ep.mem_mut().insert(e);
    }

    pub(crate) fn deregister(&mut self, lkey: u32) {
        let shared = self
            .ep
            .mem()
            .lkeys()
            .get(&lkey)
            .is_some_and(|e| e.shared.is_some());
        if shared {
            // Withdrawn before the memory can be freed: no peer reads it after this.
            self.link.unshare_memory(u64::from(lkey));
        }
        self.ep.mem_mut().remove(lkey);
    }

    /// The pass's clock, read on first use: `clock_gettime` was a tenth of a
    /// busy-polling udp loop when every pass read it.
    fn now_once(&self, now: &mut Option<Instant>) -> Instant {
        *now.get_or_insert_with(|| self.now())
    }

    /// One progress pass; true when it did anything.
    ///
    /// The clock is read only when the pass sends or receives something, or checks a
    /// timer. A pass that finds nothing to do checks an armed timer only every
    /// [`IDLE_TIMER_CHECK`] passes: transport timers are milliseconds, a pass a fraction
    /// of a microsecond, and a pass that moves a packet always reads the clock fresh
    /// (a stale time would arm its timers early).
    pub(crate) fn progress(&mut self) -> bool {
        self.stats.passes += 1;
        let mut now = None;
        let mut work = self.drain_posts();
        // Transmit before receiving: the ACKs that the previous pass's packets asked for
        // leave together with whatever the application posted since (typically the
        // reply to the message that pass delivered), one link burst, one system call
        // on udp, instead of an ACK burst of their own between the receive and the
        // completion. A pass that received anything reports work, so the next pass
        // (the engine thread's, or the polling application's) follows at once.
        // A pass with nothing to send (most passes of a ping-pong) skips the transmit
        // step's set-up; it still ticks the clock of `recent`, whose expired entries
        // the next transmitting pass forgets.
        if self.tx_pending() || self.ep.may_transmit() {
            work |= self.transmit(&mut now);
        } else {
            self.pass += 1;
        }
        // Ring mode's part (an engine none of whose QPs ever entered the mode reads
        // one flag).
        if self.holds_rx && self.ring_inflight > 0 {
            self.take_ring_releases(self.timer_look_due(self.stats.passes));
        }
        let received = self.receive(&mut now);
        if self.holds_rx && !(self.ring_released.is_empty() && self.ring_lost.is_empty()) {
            work |= self.ring_hand_in(&mut now);
        }
        if received {
            work = true;
            // On a link whose sends are memory writes (shm), what the packets just
            // received made owed (an ACK that a request asked for, a READ response)
            // leaves in this pass, not with the next one: the peer has it a pass
            // sooner, and a round of signaled SENDs costs one pass per side fewer.
            // A send there costs a ring push, not a system call between the receive
            // and the application's completion, and a reply posted after the
            // completion still leaves with `post_send`'s flush.
            if self.send_after_receive && self.ep.may_transmit() {
                self.stats.tx_after_rx += 1;
                self.transmit(&mut now);
            }
        }
        // Whether this pass checks a timer, asked before the timer set: most passes of
        // a ping-pong find nothing and read neither the set nor the clock (the set's
        // first entry was ~15 instructions of such a pass; callgrind, `msg_rate … lat`).
        // The wake-up flag is spent only by a pass that finds a timer, as before.
        if work || now.is_some() || self.timer_look_due(self.stats.passes) {
            if let Some(t) = self.ep.poll_timeout() {
                self.woke = false;
                let n = self.now_once(&mut now);
                // A stale entry (a timer cancelled lazily) only re-files its QP: no
                // work, so the engine thread does not spin on its account.
                if t <= n && self.ring_timers_may_fire(&mut now) && self.ep.handle_timeout(n) {
                    work = true;
                }
            }
        }
        work |= self.complete();
        work
    }

    /// A progress pass run by a poll of completion queue `cq` (slab index `idx`) that
    /// found its ring empty: up to `max` of that queue's completions from this pass
    /// go straight into `out` (appended), not through the ring, where the pass would
    /// pack and publish them and the poll unpack them again. Returns the pass's work
    /// flag and how many it appended. Other queues' completions, and this queue's
    /// beyond `max`, take their rings as in [`Engine::progress`].
    #[inline(always)]
    pub(crate) fn progress_into(
        &mut self,
        idx: usize,
        id: u32,
        out: &mut Vec<Completion>,
        max: usize,
    ) -> (bool, usize) {
        if self.idle_pass() {
            return (false, 0);
        }
        let r = self.ep.sink_mut();
        r.direct_cq = CqRef { idx, id };
        r.direct_room = max;
        r.direct_checked = false;
        let work = self.progress();
        let r = self.ep.sink_mut();
        r.direct_cq = NO_CQ;
        r.direct_room = 0;
        // The pass's completions for the caller, in the router's vector: handed over
        // by a swap when the caller's is empty (a poll loop's usual vector), else
        // appended. A pass that completed nothing for it moves no vector at all: the
        // caller's vector lent to the router for every pass and taken back cost ~24
        // instructions a poll (callgrind), most polls of a ping-pong finding nothing.
        let n = r.direct_out.len();
        if n > 0 {
            if out.is_empty() {
                std::mem::swap(out, &mut r.direct_out);
            } else {
                out.append(&mut r.direct_out);
            }
        }
        (work, n)
    }

    /// A poll's pass when it would certainly do nothing, done as its counters alone:
    /// nothing posted since the last pass, nothing queued to transmit, no timer look
    /// due (neither this pass's turn of [`IDLE_TIMER_CHECK`] nor a wake-up's, while a
    /// timer is armed: with none, the look finds nothing and keeps the wake-up), no
    /// completion routed outside a pass, and the link sure that a receive would find
    /// nothing ([`DatagramLink::rx_idle`], on shm the rings' tails read inline). Then
    /// [`Engine::progress`] would only tick its counters and return false; this
    /// ticks them (and counts the pass in `idle_passes`) without its set-up, its
    /// receive step's and the link's receive call, which were most of an empty poll
    /// (~215 instructions, callgrind, `msg_rate … lat`). True when the pass is done.
    /// A link that cannot tell (the default) never takes it.
    // Always inlined: with ring mode's check it grew past the compiler's choice, and
    // out of line it cost a poll ~90 instructions a ping-pong round (callgrind).
    #[inline(always)]
    fn idle_pass(&mut self) -> bool {
        let r = self.ep.sink();
        if (self.timer_look_due(self.stats.passes + 1) && self.ep.poll_timeout().is_some())
            || self.posted.any.load(Ordering::Relaxed)
            || !self.to_drain.is_empty()
            || self.tx_pending()
            || self.ep.may_transmit()
            || r.routed
            || r.overflowed
            || !r.cq_touched.is_empty()
            || !self.link.rx_idle()
            || (self.holds_rx && self.ring_not_idle())
        {
            return false;
        }
        self.stats.passes += 1;
        self.stats.idle_passes += 1;
        self.pass += 1;
        true
    }

    /// Read from the link the releases of this side's descriptors, when the transport
    /// waits for one ([`RingTag::asks`]) or `look` says (the pass's timer look: the
    /// others, and the losses, are read that often and handed in together, as the
    /// packet path's ACKs of messages nobody waits for are coalesced). True when any
    /// came back.
    #[inline(never)]
    fn take_ring_releases(&mut self, look: bool) -> bool {
        if self.ring_asking == 0 && !look {
            return false;
        }
        let (from, from_lost) = (self.ring_released.len(), self.ring_lost.len());
        let mut n = self.link.take_released(&mut self.ring_released);
        if look {
            n += self.link.take_lost(&mut self.ring_lost);
        }
        if n > 0 {
            let asked = self.ring_released[from..]
                .iter()
                .chain(&self.ring_lost[from_lost..])
                .filter(|&&t| RingTag::from_raw(t).asks())
                .count();
            self.ring_asking -= asked.min(self.ring_asking);
            self.ring_inflight -= n.min(self.ring_inflight);
        }
        n > 0
    }

    /// Whether ring mode leaves a pass something to do: releases read and not handed
    /// in, received items held, or a release the transport waits for that has come.
    /// Its reads are the whole cost for an engine without ring-mode QPs.
    #[inline]
    fn ring_not_idle(&mut self) -> bool {
        !self.ring_released.is_empty()
            || self.rx_held
            || (self.ring_asking > 0 && self.take_ring_releases(false))
    }

    /// Before a transport timer fires: with ring-mode descriptors in flight, their
    /// releases, read lazily, are read now and handed in (a release the engine has not
    /// read is no lost message: a timeout for it would spend one of `retry_cnt`, and
    /// enough of them fail a QP whose peer took everything). False while releases
    /// read wait for the link to be drained: the timers wait a pass too.
    #[inline]
    fn ring_timers_may_fire(&mut self, now: &mut Option<Instant>) -> bool {
        if !self.holds_rx || self.ring_inflight == 0 && self.ring_released.is_empty() {
            return true;
        }
        self.take_ring_releases(true);
        self.ring_released.is_empty() && self.ring_lost.is_empty() || self.ring_hand_in(now)
    }

    /// A descriptor went onto the link as a tracked item.
    #[inline]
    fn ring_sent(inflight: &mut usize, asking: &mut usize, tag: RingTag) {
        *inflight += 1;
        *asking += usize::from(tag.asks());
    }

    /// QP `qpn` enters (or leaves) the shm ring mode ([`Endpoint::set_ring_mode`]).
    /// The first QP that enters it makes the link hold back the release of what it
    /// receives ([`DatagramLink::hold_releases`]), so that an ERROR answering a
    /// refused request is published before the request's release
    /// ([`Engine::release_rx`]); an engine with no ring-mode QP never holds. False when
    /// there is no such QP.
    pub(crate) fn set_ring_mode(&mut self, qpn: u32, on: bool) -> bool {
        if on && !self.holds_rx && self.visits_rx && self.send_after_receive {
            self.holds_rx = self.link.hold_releases(true);
        }
        // Only the shm link is asked for the mode (`cm::Hello::ring`), and it holds.
        debug_assert!(!on || self.holds_rx, "ring mode on a link that cannot hold");
        self.ep.set_ring_mode(qpn, on)
    }

    /// Hand the ring releases and losses read before this pass's receive to the
    /// transport ([`weft_transport::ring`]), once the receive left nothing on the link:
    /// an ERROR the peer pushed before a release was then handled. With items still
    /// waiting they stay for the next pass. True when any was handed in.
    #[inline(never)]
    fn ring_hand_in(&mut self, now: &mut Option<Instant>) -> bool {
        if !self.link.rx_idle() {
            return false;
        }
        let n = self.now_once(now);
        // A QP's release acknowledges every message before it: of a run of one QP's
        // tags (in send order) only the last is handed in.
        let mut last: Option<RingTag> = None;
        for raw in self.ring_released.drain(..) {
            let t = RingTag::from_raw(raw);
            if let Some(l) = last.filter(|l| l.qpn() != t.qpn()) {
                self.ep.ring_released(n, l);
            }
            last = Some(t);
        }
        if let Some(l) = last {
            self.ep.ring_released(n, l);
        }
        for raw in self.ring_lost.drain(..) {
            self.ep.ring_lost(n, RingTag::from_raw(raw));
        }
        true
    }

    /// Whether pass number `pass` looks at the timers whether or not it found work: its
    /// turn ([`timer_turn`]) or the first pass after a wake-up. [`Engine::progress`]
    /// asks it of the pass it runs, [`Engine::idle_pass`] of the pass it would run.
    #[inline]
    fn timer_look_due(&self, pass: u64) -> bool {
        self.woke || timer_turn(pass)
    }

    /// How long the engine may sleep: until the next transport timer, at most `cap`;
    /// at most [`RING_RELEASE_LOOK`] while ring-mode descriptors wait for their release
    /// (a release wakes nobody: the peer's consumer only stores its index).
    pub(crate) fn sleep_budget(&self, cap: Duration) -> Duration {
        let cap = if self.rx_held || self.ring_inflight > 0 {
            cap.min(RING_RELEASE_LOOK)
        } else {
            cap
        };
        match self.ep.poll_timeout() {
            Some(t) => Duration::from_micros(t - self.now()).min(cap),
            None => cap,
        }
    }

    /// When a sleep of `d` from now ends, in the engine's clock's microseconds (the
    /// transport's timers' clock).
    pub(crate) fn sleep_end(&self, d: Duration) -> u64 {
        self.now()
            .0
            .saturating_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }

    /// Whether the engine thread, asleep without the engine until `until` (engine
    /// clock µs, [`Engine::sleep_end`]), has work that its sleep would leave undone:
    /// packets to send (a post the doorbell path left to the next pass, what a full
    /// socket kept), a transport timer due before `until` (one an application's
    /// pass armed: a delayed ACK, a retransmission), or datagrams and sends the
    /// link holds where its readiness descriptor does not show them
    /// ([`DatagramLink::held`]).
    pub(crate) fn needs_thread(&self, until: u64) -> bool {
        self.tx_pending()
            || self.ep.may_transmit()
            || self.link.held()
            || self.ep.poll_timeout().is_some_and(|t| t.0 < until)
    }

    /// [`DatagramLink::held`] of the engine's link.
    pub(crate) fn link_held(&self) -> bool {
        self.link.held()
    }

    /// The engine thread is about to block without the engine (a watch, see
    /// [`Shared::run`]): the pass after it looks at the timers, as the pass after a
    /// sleep does ([`Engine::wait`]). Otherwise a timer that fell due during the watch
    /// waited up to [`IDLE_TIMER_CHECK`] passes, each after another watch, and, overdue,
    /// held every watch's timeout at the quiet gap: 10 µs watches, a thousand a second
    /// (docs/results/study.md, "Idle engine threads").
    pub(crate) fn watching(&mut self) {
        self.woke = true;
    }

    /// The engine thread is about to block, its last quiet stretch (from a pass
    /// that found nothing to the next that found work) having lasted `last_quiet`:
    /// the delayed ACKs the transport owes (the coalesced ACK of messages that did
    /// not ask for one) leave now, not at their deadline, which would be a wake-up of
    /// this thread just to send them (and on shm, whose waits round a
    /// sub-millisecond timeout up to a millisecond, an ACK a millisecond late).
    /// Only after a quiet stretch at least as long as the delay: shorter ones (a
    /// saturated ping-pong, a stream) say the next message comes within it, and the
    /// ACK waits to cover it too. Sent at every block, one ACK went per message
    /// there instead of one per several, each an arrival at the peer: a saturated
    /// adaptive ping-pong over shm took 1.23× the CPU per round trip (one trace,
    /// docs/results/study.md, "Idle engine threads, second round").
    /// True when it sent any.
    pub(crate) fn send_owed_acks(&mut self, last_quiet: Duration) -> bool {
        if self.ep.poll_timeout().is_none()
            || last_quiet < Duration::from_micros(self.ep.config().ack_delay_us)
        {
            return false;
        }
        let now = self.now();
        if self.ep.ack_owed_now(now) == 0 {
            return false;
        }
        self.stats.early_acks += 1;
        self.transmit(&mut Some(now));
        true
    }

    /// Block on the link and the doorbell.
    pub(crate) fn wait(&mut self, timeout: Duration, doorbell: &EventFd) {
        self.stats.sleeps += 1;
        self.woke = true;
        // A failed wait is a spurious wakeup: the loop polls again.
        let _ = self.link.wait(timeout, Some(doorbell.as_fd()));
        doorbell.drain();
    }

    fn drain_posts(&mut self) -> bool {
        let mut work = false;
        self.posted.take_into(&mut self.to_drain);
        if self.to_drain.is_empty() {
            return false;
        }
        let Engine {
            ep,
            link,
            qps,
            srqs,
            rq_scratch,
            to_drain,
            carry,
            stats,
            ..
        } = self;
        let mut refused: Vec<Completion> = Vec::new();
        for qpn in to_drain.qps.drain(..) {
            let Some(slot) = qps.get_mut(&qpn) else {
                continue; // destroyed since it posted
            };
            stats.qp_rings_drained += 1;
            unlist(&slot.flags.listed);
            // An empty ring (one atomic load) skips the transport's queue lookup.
            let room = if slot.sq.as_mut().is_some_and(|sq| !sq.is_empty()) {
                ep.sq_room(qpn).unwrap_or(0).min(BURST)
            } else {
                0
            };
            // Straight from the ring slot: a descriptor with its inline bytes is a few
            // hundred bytes, not worth a copy into a scratch vector.
            work |= room > 0
                && slot.sq.as_mut().is_some_and(|sq| {
                    sq.pop_burst_with(room, |item| {
                        let SqItem {
                            wr,
                            inline_len,
                            inline,
                        } = item;
                        let data = wr.inline.then(|| &inline[..usize::from(inline_len)]);
                        allow_by_reference(ep, &**link, qpn, &wr);
                        if let Err(c) = post_to(ep, qpn, wr, data) {
                            refused.push(c);
                        }
                    }) > 0
                });
            work |= feed_rq(ep, qpn, slot, rq_scratch);
            // Requests the transport had no room for yet: look again next pass.
            let left = slot.sq.as_mut().is_some_and(|s| !s.is_empty())
                || slot.rq.as_mut().is_some_and(|r| !r.is_empty());
            relist(&slot.flags.listed, left, &mut carry.qps, qpn);
        }
        std::mem::swap(&mut to_drain.qps, &mut carry.qps);
        // The shared receive queues posted to, in the same way (looked at only when
        // there are any: most drains are a QP's alone).
        if !to_drain.srqs.is_empty() {
            let lists = (&mut to_drain.srqs, &mut carry.srqs);
            work |= drain_srqs(ep, srqs, lists, rq_scratch, stats);
        }
        for c in refused {
            self.refused(c);
        }
        work
    }

    /// A work request the transport refused after the application's checks passed
    /// (the QP was reset under it) completes in error, in its queue.
    fn refused(&mut self, c: Completion) {
        self.stats.post_refused += 1;
        self.ep.sink_mut().route(c);
    }

    /// The doorbell path of receives: straight from the posting thread into the
    /// transport's receive queue, as many of `wrs` as it has room for (see
    /// `Endpoint::post_recvs`; the QP found in its `slot`, checked by `qpn`). The
    /// caller checked that the QP's receive ring is empty (so order is kept). On a QP
    /// in the error state the transport flushes them as they come: their completions
    /// are published now, as a refused send's are, not by the next pass (which an
    /// engine thread in a watch would run only at its end).
    pub(crate) fn post_recvs_now(
        &mut self,
        slot: u32,
        qpn: u32,
        max_sge: usize,
        wrs: &mut impl Iterator<Item = RecvWr>,
    ) -> Result<usize, (usize, PostError)> {
        let r = self.ep.post_recvs_at(slot, qpn, max_sge, wrs);
        self.publish_direct();
        r
    }

    /// The doorbell path (inline progress): send work requests from `wrs` straight
    /// from the posting thread into QP `qpn`'s send queue in the transport, without
    /// the ring, while it has room, through one borrow of the queue (found in the
    /// QP's `slot` of the transport's table, checked by `qpn`). The caller checked
    /// that the QP's ring is empty (so order is kept). `first`, if any, goes before
    /// `wrs`. Each request passes `check` (the checks `ibv_post_send` makes) and has
    /// its inline payload gathered into the engine's buffer first; the first that
    /// fails ends the list, taken but not posted. The next pass transmits them; a
    /// refusal's error completion is published now.
    pub(crate) fn post_list_now<W: PostWr>(
        &mut self,
        slot: u32,
        qpn: u32,
        pd: u32,
        check: impl Fn(&SendWr) -> Result<(), PostError>,
        first: &mut Option<W>,
        wrs: &mut impl Iterator<Item = W>,
    ) -> ListPost {
        let Engine {
            ep,
            link,
            inline_scratch,
            lone,
            ring_tx,
            spare,
            ring_inflight,
            ring_asking,
            stats,
            origin,
            ..
        } = self;
        let link: &mut dyn DatagramLink = &mut **link;
        let mut out = ListPost {
            room: 0,
            posted: 0,
            error: None,
            exhausted: false,
        };
        let mut refused = Vec::new();
        if let Some(mut sq) = ep.send_queue_at(slot, qpn) {
            out.room = sq.room();
            // Ring mode's doorbell, set up only for a QP in the mode (opt-in): its set-up
            // on every post of the packet path was ~14 instructions a post.
            let mut ring = if sq.ring_mode() {
                Some(RingPost {
                    origin: *origin,
                    buf: lone,
                    ring_tx,
                    spare,
                    inflight: ring_inflight,
                    asking: ring_asking,
                    stats,
                })
            } else {
                None
            };
            // Each request is posted where it lies, in `first` or in `next` (the
            // iterator's slot), never moved again (`SendQueue::post_from`): the moves
            // of a freshly written request were the posting thread's store-forwarding
            // stalls on a stream of small SENDs. `first` is posted before the loop, so
            // a list of one (every post of a stream, as perftest posts) runs no loop
            // set-up: the loop's hoisted constants and pointers, spilled to the stack,
            // were ~25 instructions a call (callgrind, `msg_rate`).
            if out.room > 0 {
                if let Some(wr) = first {
                    let r = post_now(
                        &mut sq,
                        link,
                        &mut ring,
                        inline_scratch,
                        qpn,
                        pd,
                        &check,
                        wr,
                    );
                    // Taken either way: a request its checks refuse ends the list,
                    // taken but not posted.
                    *first = None;
                    match r {
                        Ok(c) => {
                            refused.extend(c);
                            out.posted += 1;
                        }
                        Err(e) => out.error = Some(e),
                    }
                }
            }
            let mut next: Option<W>;
            while out.error.is_none() && out.posted < out.room {
                next = wrs.next();
                let Some(wr) = &mut next else {
                    out.exhausted = true;
                    break;
                };
                match post_now(
                    &mut sq,
                    link,
                    &mut ring,
                    inline_scratch,
                    qpn,
                    pd,
                    &check,
                    wr,
                ) {
                    Ok(c) => {
                        refused.extend(c);
                        out.posted += 1;
                    }
                    Err(e) => out.error = Some(e),
                }
            }
        }
        for c in refused {
            self.refused(c);
        }
        self.publish_direct();
        out
    }

    /// After the doorbell path handed work requests straight to the transport: publish
    /// what that routed (a refused send's completion; on a QP in ERR the transport's
    /// flush of the sends or receives as they came), now rather than at the next
    /// pass, which an engine thread in a watch or asleep would run only later.
    fn publish_direct(&mut self) {
        if self.ep.sink().routed {
            self.complete();
        }
    }

    /// Put what the transport has ready on the link now: the doorbell path's flush of
    /// a post that followed a wait (`QueuePair::post_send`) on the QP in transport slot
    /// `slot`.
    ///
    /// Mostly that QP is the only one with anything to send and its request is one
    /// packet (a ping-pong's request or reply): on a link that does not stage its
    /// packets (udp does, and keeps the pass's path), with nothing queued for it and
    /// no other QP active, the packet is written by the QP's own turn
    /// ([`Endpoint::poll_transmit_alone`]) into the engine's own buffer (`lone`, a
    /// pool buffer's size) and handed to the link from there (only shm takes it as it
    /// is, `DatagramLink::try_send_one`; for any other link, or a refusal, it is copied
    /// into a pool buffer and queued as before), without the pass's transmit machinery (the
    /// burst's set-up, its buffer hand-over and budget checks, the round robin's
    /// upkeep). The pass's clock of `recent` ticks as a transmit's does, the QP is
    /// marked recent, and anything still ready after that packet (a longer message,
    /// a list, another QP's ACK) goes on in the same transmit, as before. Then the
    /// packet is queued, not handed over alone, so that it leaves in one burst with
    /// the rest: above all the delayed ACK a sparse peer's request left owed, which
    /// the transport queues right behind the reply on shm
    /// ([`weft_transport::Config::ack_rides_reply`]). Handed over alone, the reply
    /// would be one ring publish and the ACK a second (two notifications of a
    /// sleeping peer, and a peer that took the reply alone woken again by the ACK).
    /// The packets, and their order, are those of [`Engine::transmit`].
    pub(crate) fn flush(&mut self, slot: u32) {
        if !(self.tx_pending() || self.ep.may_transmit()) {
            return;
        }
        self.stats.post_flushes += 1;
        let mut now = None;
        if self.stages_tx || !self.tx.is_empty() {
            self.transmit(&mut now);
            return;
        }
        self.pass += 1;
        self.recent.expire(self.pass.saturating_sub(RECENT_PASSES));
        let shared = self.recent.len() >= 2;
        let (mut sent, mut bytes) = (0, 0);
        if !shared {
            let n = self.now_once(&mut now);
            if self.spare.is_empty() && self.link.pool().alloc_burst(BURST, &mut self.spare) == 0 {
                self.stats.tx_no_buffer += 1;
                return;
            }
            if self.lone.is_empty() {
                // A spare buffer's room, once (the packet may need all of it).
                let Some(mut b) = self.spare.pop() else {
                    return;
                };
                b.reset();
                self.lone = vec![0; b.capacity()];
                self.spare.push(b);
            }
            let alone = self.ep.poll_transmit_alone(n, slot, &mut self.lone);
            // Anything ready after the packet (asked before it is handed over).
            let more = self.ep.may_transmit();
            if let Some(t) = alone {
                // Straight onto the link when it is the only packet ready and the
                // link takes a lone datagram (shm, on the route it last sent on): no
                // `Datagram` queued, no burst, and no pool buffer taken and given back
                // for it. Anything else goes into a spare buffer (there is one:
                // checked above) and queues, to leave with what follows it.
                if let (Some(tag), Some(bytes_out)) = (t.ring, self.lone.get(..t.len)) {
                    // A ring descriptor: alone, tracked, straight from here when
                    // nothing of the ring's is queued before it.
                    if self.ring_tx.is_empty()
                        && self.link.send_tracked(bytes_out, &t.path, tag.raw())
                    {
                        Engine::ring_sent(&mut self.ring_inflight, &mut self.ring_asking, tag);
                    } else {
                        if let Some(mut buf) = self.spare.pop() {
                            buf.reset();
                            if buf.copy_from(bytes_out) {
                                self.stats.ring_queued += 1;
                                self.ring_tx.push_back((buf, t.path, tag));
                            } else {
                                self.spare.push(buf);
                                self.stats.tx_no_buffer += 1;
                            }
                        }
                    }
                } else if let Some(bytes_out) = self.lone.get(..t.len) {
                    if !more && self.link.try_send_one(bytes_out, &t.path) {
                        self.stats.tx_bursts += 1;
                    } else {
                        // Neither branch that drops the packet can be taken today
                        // (a spare was checked above, and `lone` is a pool buffer's
                        // size); were one taken, the drop is counted, not silent.
                        match self.spare.pop() {
                            Some(mut buf) => {
                                buf.reset();
                                if buf.copy_from(bytes_out) {
                                    self.tx.push(Datagram { buf, path: t.path });
                                } else {
                                    self.spare.push(buf);
                                    self.stats.tx_no_buffer += 1;
                                }
                            }
                            None => self.stats.tx_no_buffer += 1,
                        }
                    }
                }
                self.recent.mark(t.slot, self.pass);
                (sent, bytes) = (1, t.moves);
            }
            if !more {
                self.flush_tx();
                return;
            }
        }
        self.transmit_turns(&mut now, shared, sent, bytes);
    }

    fn receive(&mut self, now: &mut Option<Instant>) -> bool {
        if self.visits_rx {
            return self.receive_each(now);
        }
        let (mut got, mut bytes) = (0, 0);
        for _ in 0..4 {
            let n = self
                .link
                .recv_burst_reuse(&mut self.rx, BURST, &mut self.spare)
                .unwrap_or(0);
            if n == 0 {
                break;
            }
            // Receives posted since the pass drained the rings, before these
            // packets were read: a packet sent after its receive was posted finds it
            // (a UD SEND that found none would be dropped for good). The same look as
            // `receive_each`'s per packet ([`feed_posted_recvs`]): receives only, the
            // sends wait for the next pass's drain.
            feed_posted_recvs(
                &mut self.ep,
                &self.posted,
                &mut self.to_drain,
                &mut self.qps,
                &mut self.srqs,
                &mut self.rq_scratch,
            );
            let now = self.now_once(now);
            got += n;
            // Whom a by-reference payload in each datagram may be pulled from: the
            // link's word for the connection it came through, never the packet's.
            let pids = self.link.burst_pull_pids();
            // And the regions that connection's peer shared with us, mapped here.
            let maps = self.link.burst_pull_maps();
            // Bytes pulled by reference count against the pass's budget as well.
            let pulled = self.ep.stats().by_reference_bytes;
            for (i, d) in self.rx.iter().enumerate() {
                bytes += d.buf.len();
                self.ep
                    .mem_mut()
                    .set_pull_source(pids.get(i).copied().flatten(), maps.get(i));
                self.ep.handle_packet(now, &d.path, &d.buf);
            }
            self.ep.mem_mut().clear_pull_source();
            bytes += (self.ep.stats().by_reference_bytes - pulled) as usize;
            // The buffers become the next packets the pass sends: no pool lock. Popped
            // one by one (the order of spare buffers does not matter): a `drain`
            // here, its set-up and the drop of its iterator, was ~110 instructions of
            // a ping-pong round (four passes; callgrind, `msg_rate … lat`).
            while let Some(d) = self.rx.pop() {
                self.spare.push(d.buf);
            }
            self.trim_spare();
            if n < BURST || bytes >= RX_BYTES_PER_PASS {
                break;
            }
        }
        got > 0
    }

    /// [`Engine::receive`] on a link that visits each datagram in its own buffer
    /// ([`DatagramLink::recv_each`], shm): each packet goes to the transport as the
    /// link takes it, with its pull process and maps from the item itself, and its
    /// buffer stays the link's. The bursts, their budget and the pull settings per
    /// packet are `receive`'s; what goes is the burst of `Datagram`s, the two per-burst
    /// tables and their look-ups per packet, and the walk that gave the buffers back.
    fn receive_each(&mut self, now: &mut Option<Instant>) -> bool {
        let (mut got, mut bytes) = (0, 0);
        let mut malformed = 0;
        let Engine {
            ep,
            link,
            spare,
            origin,
            posted,
            to_drain,
            qps,
            srqs,
            rq_scratch,
            ring_replies,
            ..
        } = self;
        let origin = *origin;
        for _ in 0..4 {
            // Bytes pulled by reference count against the pass's budget as well.
            let pulled = ep.stats().by_reference_bytes;
            let mut burst = 0;
            let n = link
                .recv_each(BURST, spare, &mut |item| {
                    // The pass's clock, read at its first packet.
                    let t = *now.get_or_insert_with(|| {
                        Instant(weft_link::monotonic_micros().saturating_sub(origin))
                    });
                    burst += item.bytes.len();
                    // Receives posted since the pass drained the rings, before this
                    // packet was taken (the link's take orders the look after it): a
                    // packet sent after its receive was posted finds it, as in
                    // `receive`'s bursts (a UD SEND that found none would be dropped
                    // for good, an RC one would cost an RNR NAK and a retry).
                    feed_posted_recvs(ep, posted, to_drain, qps, srqs, rq_scratch);
                    if item.bytes.first() == Some(&weft_wire::ring::MARKER) {
                        if !ring_item(ep, t, item.bytes, ring_replies) {
                            malformed += 1;
                        }
                        return;
                    }
                    // Whom a by-reference payload may be pulled from: the link's word
                    // for the connection it came through, never the packet's.
                    ep.mem_mut().set_pull_source(item.pull_pid, item.pull_maps);
                    ep.handle_packet(t, item.path, item.bytes);
                })
                .unwrap_or(0);
            if n == 0 {
                break;
            }
            got += n;
            ep.mem_mut().clear_pull_source();
            bytes += burst + (ep.stats().by_reference_bytes - pulled) as usize;
            trim_spare(&**link, spare);
            if n < BURST || bytes >= RX_BYTES_PER_PASS {
                break;
            }
        }
        self.stats.ring_malformed += malformed;
        if got > 0 && self.holds_rx {
            self.release_rx();
        }
        got > 0
    }

    /// Let the link release what the receives took ([`DatagramLink::hold_releases`]):
    /// first the ERROR descriptors of ring-mode requests refused in them, published,
    /// so that the peer, which reads our release before its reverse ring, sees the
    /// ERROR of any request it sees released. While an ERROR waits for room on the
    /// link, the link keeps holding everything (`rx_held`).
    #[inline]
    fn release_rx(&mut self) {
        if !self.ring_replies.is_empty() {
            self.queue_ring_replies();
        }
        if !self.tx.is_empty() {
            self.flush_tx();
        }
        self.rx_held = !self.tx.is_empty() || !self.ring_replies.is_empty();
        if !self.rx_held {
            self.link.release_received();
        }
    }

    /// The ERROR descriptors of the pass's refusals into the transmit queue.
    #[cold]
    /// One without a buffer stays in `ring_replies`, and the releases stay held
    /// until it is out (a release without its ERROR would read as an execution).
    fn queue_ring_replies(&mut self) {
        while let Some(&(d, path)) = self.ring_replies.first() {
            if self.spare.is_empty() && self.link.pool().alloc_burst(BURST, &mut self.spare) == 0 {
                self.stats.tx_no_buffer += 1;
                return;
            }
            let Some(mut buf) = self.spare.pop() else {
                return;
            };
            self.ring_replies.remove(0);
            buf.reset();
            if buf.set_len(weft_wire::ring::HEADER_LEN) && d.emit(&mut buf[..], 0).is_ok() {
                self.tx.push(Datagram { buf, path });
            } else {
                self.spare.push(buf);
            }
        }
    }

    /// Packets the link did not take yet: queued datagrams, or packets in its stage.
    #[inline]
    fn tx_pending(&self) -> bool {
        !self.tx.is_empty()
            || (self.stages_tx && self.link.tx_staged() > 0)
            || !self.ring_tx.is_empty()
    }

    // Inlined as before ring mode's check joined it: out of line it was a call with
    // its prologue at each of a ping-pong round's flushes (~55 instructions a round,
    // callgrind).
    #[inline(always)]
    fn flush_tx(&mut self) {
        flush_tx(
            &mut *self.link,
            &mut self.tx,
            &mut self.spare,
            &mut self.stats,
        );
        if self.stages_tx && self.link.tx_staged() > 0 {
            self.stats.tx_bursts += 1;
            self.link.tx_flush();
        }
        if self.holds_rx && (!self.ring_tx.is_empty() || self.rx_held) {
            self.flush_ring();
        }
    }

    /// Ring mode's part of [`Engine::flush_tx`]: the descriptors the link did not take
    /// before, and the release of received items held for an ERROR that is now out.
    #[inline(never)]
    fn flush_ring(&mut self) {
        if !self.ring_replies.is_empty() {
            self.queue_ring_replies();
            flush_tx(
                &mut *self.link,
                &mut self.tx,
                &mut self.spare,
                &mut self.stats,
            );
        }
        flush_ring_tx(
            &mut *self.link,
            &mut self.ring_tx,
            &mut self.spare,
            &mut self.ring_inflight,
            &mut self.ring_asking,
        );
        if self.rx_held && self.tx.is_empty() && self.ring_replies.is_empty() {
            self.rx_held = false;
            self.link.release_received();
        }
    }

    /// Spare buffers beyond [`SPARE_MAX`] go back to the pool ([`trim_spare`]).
    #[inline]
    fn trim_spare(&mut self) {
        trim_spare(&*self.link, &mut self.spare);
    }

    fn transmit(&mut self, now: &mut Option<Instant>) -> bool {
        self.flush_tx();
        if self.tx_pending() {
            // The link is full: let the transport keep its packets until it drains.
            return false;
        }
        // How much a pass may send. The engine is CPU-bound, so a pass is also a share
        // of CPU. Alone, a QP gets `TX_BYTES_PER_PASS`. While several QPs sent
        // recently, a pass sends at least one round of the transport's deficit round
        // robin (a quantum per active QP), and goes on only while it has transmitted for
        // less than `shared_pass_us`: a bulk transfer cannot hold the engine for long in
        // the passes in which a closed-loop flow of small messages has nothing queued
        // yet (its next request is then served at most that much later), yet it is not
        // cut to one round per pass either, which spent most of the engine on the
        // pass's fixed costs (receive calls, completions) and lost a 4 MB flow 67-84 %
        // of its rate beside small operations (docs/results/study.md, Fig. 5). The
        // bound is in time, not bytes, because what the flows share is the CPU: a byte
        // costs a different time on every link.
        self.pass += 1;
        self.recent.expire(self.pass.saturating_sub(RECENT_PASSES));
        let shared = self.recent.len() >= 2;
        self.transmit_turns(now, shared, 0, 0)
    }

    /// [`Engine::transmit`] after its tick of `recent`'s clock: the transport's turns
    /// into the pass's buffers, `sent` packets of `bytes` already queued by this
    /// transmit ([`Engine::flush`]) counted against its budget; `shared`: several QPs
    /// transmitted recently.
    fn transmit_turns(
        &mut self,
        now: &mut Option<Instant>,
        shared: bool,
        sent: usize,
        bytes: usize,
    ) -> bool {
        // Alone, `round` is the whole pass's bytes, so the time bound never applies.
        let round = if shared {
            SHARED_ROUNDS * self.quantum * self.recent.len()
        } else {
            TX_BYTES_PER_PASS
        };
        if !self.ep.may_transmit() {
            return false;
        }
        let now = self.now_once(now);
        // The pass's start, for the time bound (the transport's clock, microseconds):
        // read only while several QPs share the pass, so a lone stream pays no clock
        // read for it.
        let start = if shared {
            weft_link::monotonic_micros()
        } else {
            0
        };
        let Engine {
            ep,
            link,
            tx,
            spare,
            stats,
            recent,
            pass,
            shared_pass_us,
            stages_tx,
            ring_tx,
            ring_inflight,
            ring_asking,
            ..
        } = self;
        let mut run = TxRun {
            link: &mut **link,
            tx,
            ring_tx,
            ring_inflight,
            ring_asking,
            spare,
            stats,
            recent,
            pass: *pass,
            cur: None,
            flush_at: if shared { SHARED_FLUSH } else { BURST },
            round,
            start,
            shared_pass_us: *shared_pass_us,
            sent,
            bytes,
            extended: false,
            marked: None,
            stop: false,
        };
        if *stages_tx {
            let mut staged = StagedRun {
                run: &mut run,
                lent: false,
            };
            ep.poll_transmit_burst(now, &mut staged);
        } else {
            ep.poll_transmit_burst(now, &mut run);
        }
        if let Some(b) = run.cur.take() {
            run.spare.push(b);
        }
        if let Some(q) = run.marked {
            run.mark(q);
        }
        let (sent, extended) = (run.sent, run.extended);
        self.flush_tx();
        if shared && sent > 0 {
            self.stats.shared_passes += 1;
            self.stats.shared_passes_extended += u64::from(extended);
        }
        sent > 0
    }

    /// Publish what the pass completed (the transport put each completion into its
    /// ring as it happened); true when anything completed.
    #[inline]
    fn complete(&mut self) -> bool {
        let r = self.ep.sink_mut();
        // No ring touched (nothing routed, or all of it straight into a polling
        // caller's vector) and nothing waiting for room.
        if r.cq_touched.is_empty() && !r.overflowed {
            return std::mem::take(&mut r.routed);
        }
        r.publish_touched()
    }

    /// Counters of the engine, with the completion queues'.
    pub(crate) fn stats(&self) -> EngineStats {
        let r = self.ep.sink();
        EngineStats {
            cq_direct: r.cq_direct,
            cq_overflows: r.cq_overflows,
            cq_orphans: r.cq_orphans,
            ..self.stats
        }
    }
}

/// Hand the queued datagrams to the link. A send error leaves them queued; the next
/// pass retries and the transport's timers recover anything that is finally lost. The
/// buffers the link copied out come back for the next packets: no pool lock each.
fn flush_tx(
    link: &mut dyn DatagramLink,
    tx: &mut Vec<Datagram>,
    spare: &mut Vec<PacketBuf>,
    stats: &mut EngineStats,
) {
    if !tx.is_empty() {
        stats.tx_bursts += 1;
        let _ = link.send_burst_reuse(tx, spare);
        trim_spare(link, spare);
    }
}

/// Put ring-mode descriptor `buf` (tagged `tag`) on the link as one tracked item, or,
/// when the link does not take it now or descriptors wait before it, queue it
/// ([`Engine::ring_tx`]): a descriptor is never dropped and never overtakes another.
fn send_descriptor(
    link: &mut dyn DatagramLink,
    ring_tx: &mut VecDeque<(PacketBuf, IcrcPath, RingTag)>,
    spare: &mut Vec<PacketBuf>,
    stats: &mut EngineStats,
    buf: PacketBuf,
    path: IcrcPath,
    tag: RingTag,
) -> bool {
    if ring_tx.is_empty() && link.send_tracked(&buf[..], &path, tag.raw()) {
        spare.push(buf);
        true
    } else {
        stats.ring_queued += 1;
        ring_tx.push_back((buf, path, tag));
        false
    }
}

/// A received ring-mode item ([`weft_transport::ring`]) for the transport: an ERROR
/// refuses one of this side's descriptors; anything else is a request, and a refusal
/// of it adds the ERROR descriptor and its path to `replies` (the engine publishes
/// them before it lets the link release the item: [`Engine::receive_each`]). False:
/// the item did not parse.
fn ring_item(
    ep: &mut Endpoint<MrTable, CqRouter>,
    now: Instant,
    bytes: &[u8],
    replies: &mut Vec<(RingDescriptor, IcrcPath)>,
) -> bool {
    let Ok((d, payload)) = RingDescriptor::parse(bytes) else {
        return false;
    };
    if let RingOp::Error { .. } = d.op {
        ep.ring_refused(now, &d);
        return true;
    }
    if let Some(RingAnswer::Refused { syndrome, .. }) = ep.ring_request(now, &d, payload) {
        replies.extend(ep.ring_refusal(&d, syndrome));
    }
    true
}

/// Send the queued ring-mode descriptors, in order, while the link takes them;
/// count each sent in `inflight` and `asking` ([`Engine::ring_inflight`]).
fn flush_ring_tx(
    link: &mut dyn DatagramLink,
    ring_tx: &mut VecDeque<(PacketBuf, IcrcPath, RingTag)>,
    spare: &mut Vec<PacketBuf>,
    inflight: &mut usize,
    asking: &mut usize,
) {
    while let Some((buf, path, tag)) = ring_tx.front() {
        if !link.send_tracked(&buf[..], path, tag.raw()) {
            return;
        }
        Engine::ring_sent(inflight, asking, *tag);
        if let Some((buf, ..)) = ring_tx.pop_front() {
            spare.push(buf);
        }
    }
}

/// Spare buffers (received, sent, or taken from the pool) beyond [`SPARE_MAX`] go
/// back to the pool, down to [`BURST`], under one lock.
#[inline]
fn trim_spare(link: &dyn DatagramLink, spare: &mut Vec<PacketBuf>) {
    if spare.len() > SPARE_MAX {
        free_spare(link, spare);
    }
}

#[cold]
fn free_spare(link: &dyn DatagramLink, spare: &mut Vec<PacketBuf>) {
    link.pool().free_burst(spare.drain(BURST..));
}

/// One pass's transmit as the transport's burst sees it ([`Engine::transmit`]): it
/// lends spare buffers, queues each written packet for the link, flushes every
/// `flush_at`, and ends the burst at the pass's budget.
struct TxRun<'a> {
    link: &'a mut dyn DatagramLink,
    tx: &'a mut Vec<Datagram>,
    /// Ring-mode descriptors the link did not take yet ([`Engine::ring_tx`]).
    ring_tx: &'a mut VecDeque<(PacketBuf, IcrcPath, RingTag)>,
    /// [`Engine::ring_inflight`], [`Engine::ring_asking`].
    ring_inflight: &'a mut usize,
    ring_asking: &'a mut usize,
    spare: &'a mut Vec<PacketBuf>,
    stats: &'a mut EngineStats,
    recent: &'a mut Recent,
    pass: u64,
    /// The buffer lent and not yet written.
    cur: Option<PacketBuf>,
    flush_at: usize,
    /// Bytes after which the time bound applies (see [`Engine::transmit`]).
    round: usize,
    /// The pass's start (microseconds; read only while QPs share the pass).
    start: u64,
    shared_pass_us: u64,
    sent: usize,
    bytes: usize,
    extended: bool,
    /// The slot of the QP whose packets the pass is writing, marked recent when its
    /// run ends: a burst from one QP updates the set once.
    marked: Option<u32>,
    /// The link took less than a whole flush: the pass ends.
    stop: bool,
}

impl TxRun<'_> {
    /// The QP in slot `slot` transmitted in this pass.
    #[inline]
    fn mark(&mut self, slot: u32) {
        self.recent.mark(slot, self.pass);
    }

    /// Whether the pass's budget allows one more packet (counts an extension).
    #[inline(always)]
    fn may_send(&mut self) -> bool {
        if self.stop || self.sent >= 4 * BURST || self.bytes >= TX_BYTES_PER_PASS {
            return false;
        }
        if self.bytes >= self.round {
            if weft_link::monotonic_micros().saturating_sub(self.start) >= self.shared_pass_us {
                return false;
            }
            self.extended = true;
        }
        true
    }
}

/// [`TxRun`] on a link that stages packets itself ([`DatagramLink::tx_room`], the udp
/// link): the transport writes into the link's room, packet after packet, so a GSO
/// run leaves from one buffer. A type of its own, so the pool-buffer path the other
/// links take is compiled as before.
struct StagedRun<'r, 'a> {
    run: &'r mut TxRun<'a>,
    /// The link's room was lent and not yet written.
    lent: bool,
}

impl TxBuffers for StagedRun<'_, '_> {
    #[inline(always)]
    fn next_buffer(&mut self) -> Option<&mut [u8]> {
        if !self.lent {
            if !self.run.may_send() {
                return None;
            }
            self.lent = true;
        }
        self.run.link.tx_room()
    }

    #[inline(always)]
    fn written(&mut self, t: Transmit) -> bool {
        self.lent = false;
        let run = &mut *self.run;
        let staged = run.link.tx_commit(t.len, t.path);
        run.sent += 1;
        run.bytes += t.moves;
        if run.marked != Some(t.slot) {
            if let Some(q) = run.marked.replace(t.slot) {
                run.mark(q);
            }
        }
        if staged >= run.flush_at {
            run.stats.tx_bursts += 1;
            if run.link.tx_flush() > 0 {
                run.stop = true;
                return false;
            }
        }
        true
    }
}

impl TxBuffers for TxRun<'_> {
    #[inline(always)]
    fn next_buffer(&mut self) -> Option<&mut [u8]> {
        if self.cur.is_none() {
            if !self.may_send() {
                return None;
            }
            if self.spare.is_empty() && self.link.pool().alloc_burst(BURST, self.spare) == 0 {
                self.stats.tx_no_buffer += 1;
                return None;
            }
            let mut buf = self.spare.pop()?;
            buf.reset();
            self.cur = Some(buf);
        }
        self.cur.as_mut().map(PacketBuf::spare_mut)
    }

    #[inline(always)]
    fn written(&mut self, t: Transmit) -> bool {
        let Some(mut buf) = self.cur.take() else {
            // The transport writes only into a buffer it was lent.
            debug_assert!(false, "a packet written without a lent buffer");
            return false;
        };
        if !buf.set_len(t.len) {
            self.spare.push(buf);
        } else if let Some(tag) = t.ring {
            if send_descriptor(
                self.link,
                self.ring_tx,
                self.spare,
                self.stats,
                buf,
                t.path,
                tag,
            ) {
                Engine::ring_sent(self.ring_inflight, self.ring_asking, tag);
            }
        } else {
            self.tx.push(Datagram { buf, path: t.path });
        }
        self.sent += 1;
        self.bytes += t.moves;
        // The previous QP's run ended: mark it (the last QP's run is marked by
        // `Engine::transmit` after the burst).
        if self.marked != Some(t.slot) {
            if let Some(q) = self.marked.replace(t.slot) {
                self.mark(q);
            }
        }
        if self.tx.len() >= self.flush_at {
            flush_tx(self.link, self.tx, self.spare, self.stats);
            if !self.tx.is_empty() {
                self.stop = true;
                return false;
            }
        }
        true
    }
}

/// Tell the transport whether a large WRITE of QP `qpn` may go by reference: when the
/// link says the QP's peer pulls payloads from our memory (shm with cross-memory
/// attach, probed per connection). The transport decides per message
/// ([`weft_transport::byref`]); a link that cannot (udp, or a refused probe) keeps
/// every payload in its packets. Only WRITEs big enough to qualify pay for the look.
fn allow_by_reference(
    ep: &mut Endpoint<MrTable, CqRouter>,
    link: &dyn DatagramLink,
    qpn: u32,
    wr: &SendWr,
) {
    if wr.inline || !matches!(wr.op, WrOp::Write { .. }) {
        return;
    }
    if wr.sg_len() < ep.config().by_reference_min {
        return;
    }
    let Some(path) = ep.qp_attrs(qpn).and_then(|a| a.path) else {
        return;
    };
    let pulls = link.peer_pulls(path_ends(&path).1);
    if pulls != ep.by_reference(qpn) {
        ep.set_by_reference(qpn, pulls);
    }
}

/// What [`Engine::post_list_now`] did: the send queue's room before it, how many
/// requests it posted, the refusal that ended the list early, and whether the list
/// ran out (nothing of it is left for the ring).
#[derive(Debug)]
pub(crate) struct ListPost {
    pub(crate) room: usize,
    pub(crate) posted: usize,
    pub(crate) error: Option<ListRefusal>,
    pub(crate) exhausted: bool,
}

/// Why the doorbell path refused a request: a check of `ibv_post_send`'s, or an
/// inline payload's memory. Small and `Copy`, not a [`crate::Error`] (whose moves and
/// drop checks on every post were ~30 instructions of the post path, callgrind); the
/// caller makes the error of it ([`ListRefusal::at`]) only when there is one.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ListRefusal {
    Post(PostError),
    Inline(weft_transport::AccessError),
}

impl ListRefusal {
    /// The error of `post_send` for a list refused at `index`.
    pub(crate) fn at(self, index: usize) -> crate::Error {
        match self {
            ListRefusal::Post(error) => crate::Error::PostList { index, error },
            ListRefusal::Inline(e) => crate::Error::InlineAccess(e),
        }
    }
}

/// One request of the doorbell path ([`Engine::post_list_now`]): `check`ed, its
/// inline payload gathered into `scratch`, and posted where it lies. A refusal of
/// the checks or of the inline payload's memory is the error (the request is not
/// posted); the transport's own refusal is the error completion it turns into.
#[allow(clippy::too_many_arguments)]
#[inline]
fn post_now<W: PostWr>(
    sq: &mut SendQueue<'_, MrTable>,
    link: &mut dyn DatagramLink,
    ring: &mut Option<RingPost<'_>>,
    scratch: &mut [u8],
    qpn: u32,
    pd: u32,
    check: &impl Fn(&SendWr) -> Result<(), PostError>,
    posting: &mut W,
) -> Result<Option<Completion>, ListRefusal> {
    let wr = posting.wr();
    check(wr).map_err(ListRefusal::Post)?;
    let len = if wr.inline {
        crate::mr::gather_inline(sq.mem_mut(), pd, &wr.sg_list, scratch)
            .map_err(ListRefusal::Inline)?
    } else {
        0
    };
    if !wr.inline && matches!(wr.op, WrOp::Write { .. }) {
        allow_by_reference_sq(sq, link, wr);
    }
    let (wr_id, op) = (wr.wr_id, wr.op);
    let data = wr.inline.then(|| &scratch[..len]);
    let posted = if let Some(ring) = ring {
        ring.post(sq, link, posting, data)
    } else {
        sq.post_from(posting, data)
    };
    Ok(posted
        .err()
        .map(|_| Completion::new(wr_id, WcStatus::LocQpOpErr, op.wc_opcode(), qpn)))
}

/// What the doorbell path needs to send a ring-mode descriptor at once
/// ([`SendQueue::post_ring`]): a buffer to write it in (the engine's `lone`), and the
/// engine's queue and counters of descriptors.
struct RingPost<'a> {
    /// The engine's time zero ([`Engine::origin`]): a descriptor's ACK timer starts
    /// from the clock read at its post.
    origin: u64,
    buf: &'a mut Vec<u8>,
    ring_tx: &'a mut VecDeque<(PacketBuf, IcrcPath, RingTag)>,
    spare: &'a mut Vec<PacketBuf>,
    inflight: &'a mut usize,
    asking: &'a mut usize,
    stats: &'a mut EngineStats,
}

impl RingPost<'_> {
    /// Post on a ring-mode QP: the descriptor, when the transport writes it at once,
    /// goes onto the link as a tracked item (or, when the link does not take it, or
    /// descriptors wait before it, into the engine's queue of them).
    ///
    /// Cold while ring mode is opt-in: the call's block is then cold to the compiler,
    /// which keeps the packet path's estimate of its own frequency, and with it the
    /// inlining of the send queue's pushes into the post (without it, `push_back` of
    /// the WQE went out of line: ~40 instructions a streamed message, callgrind,
    /// docs/results/verbs-inline-20261202s35). Should ring mode become the default,
    /// the packet path's post is the one to mark.
    #[cold]
    #[inline(never)]
    fn post<W: PostWr>(
        &mut self,
        sq: &mut SendQueue<'_, MrTable>,
        link: &mut dyn DatagramLink,
        posting: &mut W,
        data: Option<&[u8]>,
    ) -> Result<(), PostError> {
        if self.buf.is_empty() {
            // Room for any descriptor (an MTU and the headers), once.
            self.buf.resize(
                link.max_datagram().max(4096 + weft_transport::MAX_OVERHEAD),
                0,
            );
        }
        // A buffer to keep the descriptor in should the link not take it, before it is
        // written: without one the post takes the ordinary path (the transport keeps
        // the request and the pass sends it), never a descriptor written and lost.
        if self.spare.is_empty() && link.pool().alloc_burst(BURST, self.spare) == 0 {
            self.stats.tx_no_buffer += 1;
            return sq.post_from(posting, data);
        }
        let now = Instant(weft_link::monotonic_micros().saturating_sub(self.origin));
        let Some((len, tag)) = sq.post_ring(now, posting, data, self.buf)? else {
            return Ok(());
        };
        let Some(path) = sq.attrs().path else {
            return Ok(());
        };
        let bytes = &self.buf[..len];
        if self.ring_tx.is_empty() && link.send_tracked(bytes, &path, tag.raw()) {
            Engine::ring_sent(self.inflight, self.asking, tag);
            return Ok(());
        }
        // A spare buffer is there (taken above), and a pool buffer holds any datagram
        // the link carries.
        if let Some(mut buf) = self.spare.pop() {
            buf.reset();
            let kept = buf.copy_from(bytes);
            debug_assert!(kept, "a descriptor longer than a pool buffer");
            self.stats.ring_queued += 1;
            self.ring_tx.push_back((buf, path, tag));
        }
        Ok(())
    }
}

/// [`allow_by_reference`] through a borrowed send queue, for a WRITE that is not
/// inline.
fn allow_by_reference_sq(sq: &mut SendQueue<'_, MrTable>, link: &dyn DatagramLink, wr: &SendWr) {
    if wr.sg_len() < sq.config().by_reference_min {
        return;
    }
    let Some(path) = sq.attrs().path else {
        return;
    };
    let pulls = link.peer_pulls(path_ends(&path).1);
    if pulls != sq.by_reference() {
        sq.set_by_reference(pulls);
    }
}

/// Hand one send work request to the transport; a refusal comes back as the error
/// completion it turns into.
fn post_to(
    ep: &mut Endpoint<MrTable, CqRouter>,
    qpn: u32,
    wr: SendWr,
    inline: Option<&[u8]>,
) -> Result<(), Completion> {
    let (wr_id, op) = (wr.wr_id, wr.op);
    let r = match inline {
        Some(data) => ep.post_send_inline(qpn, wr, data),
        None => ep.post_send(qpn, wr),
    };
    r.map_err(|_| Completion::new(wr_id, WcStatus::LocQpOpErr, op.wc_opcode(), qpn))
}

/// Move up to `room` receive work requests from the ring into the transport.
/// The receive half of [`Engine::drain_posts`], for the receive step (per burst, or
/// per packet where the link hands them over one by one): the receive rings of the
/// QPs and shared receive queues posted to since the last look, and of those still
/// listed (carried by the last drain, or taken by an earlier packet of this step: a
/// post to a listed queue does not announce itself again), go into the transport.
/// `to_drain`: the engine's lists. One relaxed load and one test of the lists'
/// lengths when nothing was posted. The QPs' send rings wait for the next pass's
/// drain, and the queues stay listed for it.
// Inlined at its two calls (its first look is all most packets pay): out of line,
// it cost ~25 instructions a packet of entry and exit (callgrind, `msg_rate … lat`).
#[inline(always)]
fn feed_posted_recvs(
    ep: &mut Endpoint<MrTable, CqRouter>,
    posted: &Posted,
    to_drain: &mut Listed,
    qps: &mut FastMap<u32, QpSlot>,
    srqs: &mut FastMap<u32, SrqSlot>,
    scratch: &mut Vec<RecvWr>,
) {
    if !posted.any.load(Ordering::Relaxed) && to_drain.is_empty() {
        return;
    }
    posted.take_into(to_drain);
    for &qpn in to_drain.qps.iter() {
        if let Some(slot) = qps.get_mut(&qpn) {
            feed_rq(ep, qpn, slot, scratch);
        }
    }
    for &id in to_drain.srqs.iter() {
        if let Some(slot) = srqs.get_mut(&id) {
            feed_srq(ep, id, slot, scratch);
        }
    }
}

/// Feed what QP `qpn`'s receive ring holds into its transport queue, as far as it
/// has room; true when it moved any.
fn feed_rq(
    ep: &mut Endpoint<MrTable, CqRouter>,
    qpn: u32,
    slot: &mut QpSlot,
    scratch: &mut Vec<RecvWr>,
) -> bool {
    let Some(rq) = slot.rq.as_mut() else {
        return false;
    };
    if rq.is_empty() {
        return false;
    }
    let room = ep.rq_room(qpn).unwrap_or(0);
    feed(room, rq, scratch, |wr| ep.post_recv(qpn, wr))
}

/// The shared receive queues' part of [`Engine::drain_posts`]: each queue listed in
/// `drain` is unlisted, then its ring fed into the transport; one whose ring keeps
/// receives the transport has no room for yet is listed again in `carry`, and the
/// two lists swap (`carry` the next pass's). True when it moved any.
fn drain_srqs(
    ep: &mut Endpoint<MrTable, CqRouter>,
    srqs: &mut FastMap<u32, SrqSlot>,
    (drain, carry): (&mut Vec<u32>, &mut Vec<u32>),
    scratch: &mut Vec<RecvWr>,
    stats: &mut EngineStats,
) -> bool {
    let mut work = false;
    for id in drain.drain(..) {
        let Some(slot) = srqs.get_mut(&id) else {
            continue; // destroyed since it was posted to
        };
        stats.srq_rings_drained += 1;
        unlist(&slot.listed);
        work |= feed_srq(ep, id, slot, scratch);
        relist(&slot.listed, !slot.rq.is_empty(), carry, id);
    }
    std::mem::swap(drain, carry);
    work
}

/// Before the engine looks at a listed queue's rings: unlisted first, and the fence
/// orders the two, so a post that the look misses lists the queue again
/// ([`Posted`]).
#[inline]
fn unlist(listed: &AtomicBool) {
    listed.store(false, Ordering::SeqCst);
    fence(Ordering::SeqCst);
}

/// After the look: a queue whose rings kept requests the transport had no room for
/// (`left`) goes into `carry` for the next pass, unless a post listed it meanwhile.
#[inline]
fn relist(listed: &AtomicBool, left: bool, carry: &mut Vec<u32>, id: u32) {
    if left && !listed.swap(true, Ordering::SeqCst) {
        carry.push(id);
    }
}

/// [`feed_rq`] for shared receive queue `id`.
fn feed_srq(
    ep: &mut Endpoint<MrTable, CqRouter>,
    id: u32,
    slot: &mut SrqSlot,
    scratch: &mut Vec<RecvWr>,
) -> bool {
    if slot.rq.is_empty() {
        return false;
    }
    let room = ep.srq_room(id).unwrap_or(0);
    feed(room, &mut slot.rq, scratch, |wr| ep.post_srq_recv(id, wr))
}

fn feed(
    room: usize,
    ring: &mut Consumer<RecvWr>,
    scratch: &mut Vec<RecvWr>,
    mut post: impl FnMut(RecvWr) -> Result<(), PostError>,
) -> bool {
    if room == 0 || ring.pop_burst(scratch, room.min(BURST)) == 0 {
        return false;
    }
    for wr in scratch.drain(..) {
        // The application checked the request and the room was counted; a refusal
        // means the queue went away, and its receives go with it (a destroyed queue
        // completes nothing, as with ibverbs).
        let _ = post(wr);
    }
    true
}

/// Make a completion queue's new entries visible and fire its channel if armed.
fn publish(slot: &mut CqSlot) {
    slot.ring.doorbell();
    if slot.notify.armed.swap(false, Ordering::AcqRel) {
        if let Some(ch) = &slot.notify.channel {
            slot.notify
                .fired_us
                .store(weft_link::monotonic_micros(), Ordering::Relaxed);
            ch.events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push_back(slot.notify.id);
            ch.fd.notify();
        }
    }
}

/// What every handle of one context shares: the engine and how to wake it.
#[derive(Debug)]
pub(crate) struct Shared {
    engine: Mutex<Engine>,
    pub(crate) doorbell: EventFd,
    /// The engine thread blocks on the link (holding the engine) or is about to.
    sleeping: AtomicBool,
    stop: AtomicBool,
    waiters: AtomicUsize,
    pub(crate) progress: Progress,
    /// Whether the posting thread may send itself (see [`Shared::app_drives`]).
    app_sends: bool,
    pub(crate) idle_spin: Duration,
    pub(crate) local_addr: std::net::SocketAddr,
    /// The engine's list of QPs that posted (the posting side marks its QP there).
    pub(crate) posted: Arc<Posted>,
    /// lkeys of live regions, for gathering inline sends on the posting thread.
    pub(crate) inline_keys: std::sync::RwLock<FastMap<u32, Arc<MrEntry>>>,
    /// Empty polls of the application's completion queues under thread progress
    /// ([`Shared::assist`]): how the engine thread sees that the application spins.
    app_polls: AtomicU64,
    /// When the application last polled an empty queue (ns since `origin`).
    app_last_poll: AtomicU64,
    /// The application's last poll took completions, and it has not polled empty
    /// since: it went off to act on them (perftest's `ib_write_lat` then spins on
    /// memory). An application that polls empty and is away is only preempted.
    app_left: AtomicBool,
    /// The application posted (a send or a receive) since the engine thread last
    /// looked (thread progress): it is in its loop, driving its own work, even when
    /// its polls take completions and so do not count as polling
    /// ([`Shared::note_app_post`]).
    app_posted: AtomicBool,
    origin: std::time::Instant,
    /// The engine thread stands by for a spinning application (see [`Shared::run`]).
    standing_by: AtomicBool,
    /// The application is about to block: the engine thread must watch the link again.
    app_blocking: AtomicBool,
    /// Application threads asleep on a completion channel right now: while any is,
    /// the engine thread does not hold a doorbell-only watch for the application's
    /// next poll (it serves the link instead).
    app_asleep: AtomicUsize,
    /// Stand-bys so far ([`EngineStats::standbys`]).
    pub(crate) standbys: AtomicU64,
    /// [`EngineStats::polls_held`].
    pub(crate) polls_held: AtomicU64,
    /// [`EngineStats::recv_flush_kicks`].
    pub(crate) recv_flush_kicks: AtomicU64,
    /// Stand-bys ended because the application stopped polling
    /// ([`EngineStats::takeovers`]).
    pub(crate) takeovers: AtomicU64,
    /// Takeovers for a packet on the link ([`EngineStats::link_takeovers`]).
    pub(crate) link_takeovers: AtomicU64,
    /// [`EngineStats::link_takeovers_stale`].
    pub(crate) link_takeovers_stale: AtomicU64,
    /// [`EngineStats::link_takeovers_left`].
    pub(crate) link_takeovers_left: AtomicU64,
    /// [`EngineStats::link_takeovers_posted`].
    pub(crate) link_takeovers_posted: AtomicU64,
    /// [`EngineStats::watch_arms`].
    pub(crate) watch_arms: AtomicU64,
    /// [`EngineStats::watch_rearms`].
    pub(crate) watch_rearms: AtomicU64,
    /// Waits on the doorbell and the link without the engine ([`EngineStats::watches`]).
    pub(crate) watches: AtomicU64,
    /// The learned quiet gap in ns ([`EngineStats::quiet_gap_ns`]).
    pub(crate) quiet_gap_ns: AtomicU64,
    /// The link's readiness descriptor, duplicated (udp; `None` on shm): watched
    /// without the engine while the application is briefly away ([`Shared::run`]).
    link_fd: Option<std::os::fd::OwnedFd>,
    /// When the engine thread's sleep without the engine ends (engine clock µs,
    /// [`Engine::sleep_end`]); written under the engine before it lets go.
    sleep_until: AtomicU64,
    /// [`EngineStats::handbacks`].
    pub(crate) handbacks: AtomicU64,
    /// When the application last took completions after an empty poll (`app_left`
    /// set; ns since `origin`).
    app_took_at: AtomicU64,
    /// The application's last stay away from its queues was at least [`SPARSE_AWAY`]
    /// ([`Shared::note_app_away`]): the engine thread may sleep without the engine.
    app_sparse: AtomicBool,
}

/// Engine threads of this process that spin idle or stand by for a spinning
/// application: together at most one per core ([`Spinner`]).
static SPINNERS: AtomicUsize = AtomicUsize::new(0);

/// A spinning thread's claim on a core, released on drop.
struct Spinner;

impl Spinner {
    /// A claim, if fewer spinning threads than cores hold one.
    fn claim() -> Option<Spinner> {
        static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let cores = *CORES.get_or_init(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        });
        SPINNERS
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| {
                (n < cores).then_some(n + 1)
            })
            .ok()
            .map(|_| Spinner)
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        SPINNERS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How long after the application's last poll the idle engine thread watches the link
/// without holding the engine before it blocks holding it ([`Shared::run`]); also
/// how long a thread standing by with the link watched waits between looks
/// ([`Shared::stand_by`]). 1 ms, the quiet gap's longest before it grew to 4 ms
/// ([`QuietGap::MAX`]): these watches wake for arrivals and the doorbell, not on
/// every look.
const APP_AWAY: Duration = Duration::from_millis(1);

/// An application that stayed this long away from its queues after taking
/// completions (from the poll that took them to its next empty poll: a pause, or work
/// of its own) is sparse: its engine thread sleeps without holding the engine
/// ([`Shared::run`]), so that its next post and poll, after the pause, run at once
/// instead of waking the thread. Back sooner (a back-to-back ping-pong posts its next
/// message within microseconds) the thread sleeps holding it, as where the link has
/// no descriptor (docs/results/study.md, "Idle engine threads, fifth round").
const SPARSE_AWAY: Duration = Duration::from_millis(2);

/// The engine thread's timer slack: its stand-by waits are tens of microseconds.
const TIMER_SLACK: Duration = Duration::from_micros(2);

/// A packet arrived while the engine thread stood by: an application that has not
/// polled for this long is not polling for it (one that polls does so every
/// microsecond or less), so the thread takes over; otherwise it looks again after
/// this long.
const ARRIVAL_GRACE: Duration = Duration::from_micros(3);

impl Shared {
    pub(crate) fn new(
        engine: Engine,
        progress: Progress,
        idle_spin: Duration,
    ) -> std::io::Result<Shared> {
        let local_addr = engine.link.local_addr();
        let app_sends = progress == Progress::Inline || engine.link.sends_in_memory();
        let posted = Arc::clone(&engine.posted);
        let link_fd = engine.link_readiness_fd();
        Ok(Shared {
            engine: Mutex::new(engine),
            doorbell: EventFd::new()?,
            sleeping: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            waiters: AtomicUsize::new(0),
            progress,
            app_sends,
            idle_spin,
            local_addr,
            posted,
            inline_keys: std::sync::RwLock::new(FastMap::default()),
            app_polls: AtomicU64::new(0),
            app_last_poll: AtomicU64::new(0),
            app_left: AtomicBool::new(false),
            app_posted: AtomicBool::new(false),
            origin: std::time::Instant::now(),
            standing_by: AtomicBool::new(false),
            app_blocking: AtomicBool::new(false),
            app_asleep: AtomicUsize::new(0),
            standbys: AtomicU64::new(0),
            polls_held: AtomicU64::new(0),
            recv_flush_kicks: AtomicU64::new(0),
            takeovers: AtomicU64::new(0),
            link_takeovers: AtomicU64::new(0),
            link_takeovers_stale: AtomicU64::new(0),
            link_takeovers_left: AtomicU64::new(0),
            link_takeovers_posted: AtomicU64::new(0),
            watch_arms: AtomicU64::new(0),
            watch_rearms: AtomicU64::new(0),
            watches: AtomicU64::new(0),
            quiet_gap_ns: AtomicU64::new(QuietGap::default().get().as_nanos() as u64),
            link_fd,
            sleep_until: AtomicU64::new(0),
            handbacks: AtomicU64::new(0),
            app_took_at: AtomicU64::new(0),
            app_sparse: AtomicBool::new(false),
        })
    }

    /// Nanoseconds since this context was created.
    fn clock(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// An application poll found its completion queue empty (thread progress): note
    /// it, and run a pass if the engine thread is not in one. When the application
    /// spins like this, the engine thread stands by and these passes are the progress:
    /// two spinning threads per process would be one more than the work needs, and on
    /// a machine with as many cores as processes they take turns on a core. If the
    /// engine thread is asleep on the link (it holds the engine then), the poll rings
    /// its doorbell and waits for the engine, blocked, until the thread lets go (and
    /// then stands by); then it runs its pass. The pass's own
    /// completions of the polled queue (`idx`, `id`) go straight into `out`, up to
    /// `max` ([`Engine::progress_into`]); returns how many.
    pub(crate) fn assist(
        &self,
        idx: usize,
        id: u32,
        out: &mut Vec<Completion>,
        max: usize,
    ) -> usize {
        self.app_polls.fetch_add(1, Ordering::Relaxed);
        let now = self.clock();
        self.app_last_poll.store(now, Ordering::Relaxed);
        if self.app_left.load(Ordering::Relaxed) {
            self.app_left.store(false, Ordering::Relaxed);
            // Back from acting on completions: how long it stayed away.
            let took = self.app_took_at.load(Ordering::Relaxed);
            self.note_app_away(Duration::from_nanos(now.saturating_sub(took)));
        }
        match self.engine.try_lock() {
            Ok(mut g) => {
                let n = g.progress_into(idx, id, out, max).1;
                self.hand_back(&g);
                n
            }
            // Held, not poisoned: a poisoned engine (its thread panicked) is not
            // waited for here.
            Err(TryLockError::WouldBlock) if self.sleeping.load(Ordering::Relaxed) => {
                // The engine thread sleeps holding the engine, or was just woken and
                // has not let go yet. Wait for it blocked, counted as a waiter (the
                // thread then neither goes back to sleep holding the engine nor
                // misses the doorbell, [`Shared::lock_waking`]). Spinning on kept an
                // application back from a pause, and this poll's own progress, off
                // its core for the rest of a time slice: the thread, woken on this
                // core, does not preempt it (a ping-pong with 10 ms pauses measured a
                // 0.96 ms p50). A `yield_now` instead cost a CPU hog's slice beside
                // hogs (on EEVDF a yield puts the thread behind them), after which
                // the application had not polled for a quiet gap and the thread took
                // over again: thread progress beside two hogs was 3–50× inline's
                // round trip (docs/results/study.md, "The application's wait for
                // its engine thread"). Blocked, the application is woken by the
                // release itself.
                let mut g = self.lock_waking();
                let n = g.progress_into(idx, id, out, max).1;
                self.hand_back(&g);
                n
            }
            Err(TryLockError::WouldBlock) => {
                self.polls_held.fetch_add(1, Ordering::Relaxed);
                0
            }
            Err(TryLockError::Poisoned(_)) => 0,
        }
    }

    /// The application posted work (thread progress): a standing-by engine thread does
    /// not take over while posts keep coming, and a post right after a takeover means
    /// the application came back, not that the engine served it ([`Shared::stand_by`],
    /// [`Shared::run`]). A bandwidth loop whose polls mostly take completions (so
    /// they do not count as polling) was otherwise taken over every quiet gap, and
    /// each post the engine thread then found counted as work served, which halved
    /// the gap to its 10 µs floor: two busy threads per process and half the shm
    /// message rate of inline progress (docs/results/verbs.md, "Posts count as the
    /// application's activity"). A store only when the flag is clear: no locked
    /// instruction on the post path.
    pub(crate) fn note_app_post(&self) {
        if self.progress == Progress::Thread && !self.app_posted.load(Ordering::Relaxed) {
            self.app_posted.store(true, Ordering::Relaxed);
        }
    }

    /// An application poll (thread progress) took completions: it goes off to act on
    /// them, and until its next empty poll it is not polling ([`Shared::stand_by`]).
    pub(crate) fn app_took_completions(&self) {
        if !self.app_left.load(Ordering::Relaxed) {
            self.app_took_at.store(self.clock(), Ordering::Relaxed);
            self.app_left.store(true, Ordering::Relaxed);
        }
    }

    /// The application is about to block (on a completion channel): the engine thread
    /// stops standing by and watches the link, since nobody else will.
    pub(crate) fn app_blocks(&self) {
        self.app_blocking.store(true, Ordering::SeqCst);
        if self.standing_by.load(Ordering::SeqCst) {
            self.doorbell.notify();
        }
    }

    /// An application thread goes to sleep on a completion channel (after
    /// [`Shared::app_blocks`]); [`Shared::app_woke`] when it returns.
    pub(crate) fn app_sleeps(&self) {
        self.app_asleep.fetch_add(1, Ordering::SeqCst);
    }

    /// The thread of [`Shared::app_sleeps`] is back.
    pub(crate) fn app_woke(&self) {
        self.app_asleep.fetch_sub(1, Ordering::SeqCst);
    }

    /// The engine, for a control operation: wakes a sleeping engine thread first and
    /// tells it someone is waiting, so it lets go between passes.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Engine> {
        // With inline progress there is no engine thread to wake: a free engine is
        // taken without the doorbell write. Every control call (`QueuePair::query`,
        // `modify`, the context's statistics) paid that system call; a loop that
        // looks at its QP's state between polls paid it on every look. With an engine
        // thread the write stays for calls that change something: it also wakes a
        // thread standing by, and without it an adaptive ping-pong beside CPU hogs had
        // more slow runs (not proven either way in 10 runs; docs/results/verbs.md,
        // "Beside CPU hogs"). Looks take [`Shared::lock_to_look`].
        if self.progress == Progress::Inline {
            if let Some(g) = self.try_free() {
                return g;
            }
        }
        self.lock_waking()
    }

    /// The engine, for a look that gives it no work (`QueuePair::query`, the
    /// context's statistics): a free engine is taken at once under either progress,
    /// with no doorbell write. Under thread progress that write woke the standing-by
    /// engine thread on every look: `weft perf`'s send-bw server, which looks at its
    /// QP between polls, spent a fifth of its time in the write and the wake-ups
    /// (docs/results/verbs.md, "Posts count as the application's activity").
    pub(crate) fn lock_to_look(&self) -> MutexGuard<'_, Engine> {
        self.try_free().unwrap_or_else(|| self.lock_waking())
    }

    /// The engine if no thread holds it (a poisoned lock is taken as it is).
    fn try_free(&self) -> Option<MutexGuard<'_, Engine>> {
        match self.engine.try_lock() {
            Ok(g) => Some(g),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// The engine, waking its thread first (see [`Shared::lock`]).
    fn lock_waking(&self) -> MutexGuard<'_, Engine> {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        self.doorbell.notify();
        let g = self.engine.lock().unwrap_or_else(PoisonError::into_inner);
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        g
    }

    /// True when the posting thread may do more than hand a send to the transport on
    /// the doorbell path (put the post on the link; take a receive without the
    /// ring): with inline progress, and with an engine thread on a link whose sends
    /// are memory writes (shm). With an engine thread on udp, holding the engine
    /// longer in the application's thread (a `sendmmsg` under the mutex) risks a
    /// preemption with the mutex held: an adaptive ping-pong beside two CPU hogs had
    /// slow runs (10–540 µs p50 against 4.5 µs) in 10 of 12 runs with them on, also
    /// when limited to an engine thread standing by, against about one in five
    /// without (docs/results/verbs.md, "Beside CPU hogs").
    pub(crate) fn app_drives(&self) -> bool {
        self.app_sends
    }

    /// The application polled empty `away` after the poll that took its last
    /// completions: it is sparse if that was at least [`SPARSE_AWAY`]. Measured from
    /// the completions, not from its previous empty poll: that gap holds the wait
    /// itself (a round trip, longer beside CPU hogs) and any preemption of a spin. A
    /// store only when it changes.
    fn note_app_away(&self, away: Duration) {
        let sparse = away >= SPARSE_AWAY;
        if self.app_sparse.load(Ordering::Relaxed) != sparse {
            self.app_sparse.store(sparse, Ordering::Relaxed);
        }
    }

    /// Whether the idle engine thread sleeps without holding the engine ([`Shared::run`]):
    /// where the link has a readiness descriptor (udp), holds nothing the descriptor
    /// does not show (`link_held`), and the application is sparse
    /// ([`Shared::note_app_away`]).
    fn sleeps_free(&self, link_held: bool) -> bool {
        self.link_fd.is_some() && !link_held && self.app_sparse.load(Ordering::Relaxed)
    }

    /// An application thread used the engine while the engine thread may sleep
    /// without it (`g`, still held): a poll's pass ([`Shared::assist`]) or a post on
    /// the doorbell path (`QueuePair::post_send`). If the thread sleeps so (udp,
    /// [`Shared::run`]) and what the application left needs it before its sleep
    /// would end ([`Engine::needs_thread`]: a post for the link, an earlier timer,
    /// datagrams the link holds), ring its doorbell: nothing else would wake it.
    /// Read under the engine, `sleeping` is exact enough: the thread sets it, and
    /// `sleep_until`, before it lets go of the engine for its sleep, and clears it
    /// only after waking, after which it runs a pass anyway.
    pub(crate) fn hand_back(&self, g: &Engine) {
        if self.sleeping.load(Ordering::Relaxed)
            && g.needs_thread(self.sleep_until.load(Ordering::Relaxed))
        {
            self.handbacks.fetch_add(1, Ordering::Relaxed);
            self.doorbell.notify();
        }
    }

    /// Whether the engine thread sleeps without the engine (udp, [`Shared::run`]);
    /// asked holding the engine, when `sleeping` can mean nothing else (the thread
    /// sets it under the engine before its last pass, and asleep holding the engine
    /// it would not be free). A post may then put its packets on the link itself
    /// (`QueuePair::post_send`).
    pub(crate) fn asleep_without_engine(&self) -> bool {
        self.sleeping.load(Ordering::Relaxed)
    }

    /// The engine, if no other thread holds it (the doorbell path of inline progress).
    pub(crate) fn try_engine(&self) -> Option<MutexGuard<'_, Engine>> {
        self.engine.try_lock().ok()
    }

    /// [`Engine::progress_into`] if nobody else is running a pass (inline progress);
    /// how many completions it appended to `out`.
    pub(crate) fn try_progress_into(
        &self,
        idx: usize,
        id: u32,
        out: &mut Vec<Completion>,
        max: usize,
    ) -> usize {
        match self.engine.try_lock() {
            Ok(mut g) => g.progress_into(idx, id, out, max).1,
            Err(_) => 0,
        }
    }

    /// A progress pass if nobody else is running one (inline progress).
    pub(crate) fn try_progress(&self) -> bool {
        match self.engine.try_lock() {
            Ok(mut g) => g.progress(),
            Err(_) => false,
        }
    }

    /// After publishing work in a ring: wake the engine if it sleeps. The fence pairs
    /// with the one in [`Shared::run`] (Dekker): either the engine sees our ring
    /// update in its re-check, or we see its `sleeping` flag.
    pub(crate) fn kick(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            self.doorbell.notify();
        }
    }

    /// After publishing receives in a QP's ring (`errored`: the QP's flag
    /// [`QpFlags::errored`]). Unlike a send, a receive gives a sleeping engine
    /// nothing to do until a packet comes for it, and the pass that takes that packet
    /// drains the rings first ([`Engine::progress`]); so it is not woken: the
    /// doorbell's write and the engine thread's wake-up were one of a sparse round
    /// trip's ~17 context switches (the client re-posts its receive as it takes the
    /// reply; docs/results/study.md, "Idle engine threads"). The application's next
    /// poll takes the engine ([`Shared::assist`]), and a sleep lasts at most 50 ms.
    /// A receive on a QP in error completes at once (flushed): that one wakes it.
    pub(crate) fn recv_posted(&self, errored: bool) {
        if errored {
            self.recv_flush_kicks.fetch_add(1, Ordering::Relaxed);
            self.kick();
        }
    }

    /// Wake the engine unconditionally (after a state change it must act on).
    pub(crate) fn kick_now(&self) {
        self.doorbell.notify();
    }

    pub(crate) fn deregister(&self, lkey: u32) {
        self.inline_keys
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&lkey);
        self.lock().deregister(lkey);
    }

    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.doorbell.notify();
    }

    /// Stand by while the application polls: sleep on the doorbell until it has left
    /// its queues unpolled for the learned quiet gap, then return true (take over);
    /// false when it is about to block on a channel or the context stops.
    ///
    /// The wait is timed from the application's last poll, so while it polls the
    /// thread wakes about once per gap; [`QuietGap`] makes those wake-ups rare for an
    /// application that polls for everything and the gap short for one that leaves
    /// one-sided operations to the engine.
    fn stand_by(&self, quiet: &mut QuietGap, by_link: &mut bool) -> bool {
        self.standbys.fetch_add(1, Ordering::Relaxed);
        *by_link = false;
        self.standing_by.store(true, Ordering::SeqCst);
        let mut seen = self.app_polls.load(Ordering::Relaxed);
        // Posts seen while standing by count as activity from when they were seen.
        self.app_posted.store(false, Ordering::Relaxed);
        let mut posted_at = 0;
        let took_over = loop {
            if self.stop.load(Ordering::Acquire) || self.app_blocking.load(Ordering::SeqCst) {
                break false;
            }
            let gap = quiet.get();
            let now = self.clock();
            if self.app_posted.load(Ordering::Relaxed) {
                self.app_posted.store(false, Ordering::Relaxed);
                posted_at = now;
                quiet.app_still_polling();
            }
            let active = self.app_last_poll.load(Ordering::Relaxed).max(posted_at);
            let since = Duration::from_nanos(now.saturating_sub(active));
            let limit = if quiet.watch_link() && self.link_fd.is_some() {
                APP_AWAY
            } else {
                gap
            };
            if since >= limit {
                break true;
            }
            // A failed wait is a spurious wakeup: the loop looks again.
            let db = self.doorbell.as_fd();
            let woke = match self.link_fd.as_ref().filter(|_| quiet.watch_link()) {
                // Watching the link, the thread need not look every gap: an arrival
                // wakes it, and the application's own passes run the timers while it
                // polls. It looks after `APP_AWAY` in case the application went
                // away with nothing arriving. Timed looks every 10 µs would make it
                // a third busy thread that the scheduler then stops preferring on
                // wake-up: a 2-core machine with two spinning programs measured
                // ib_write_lat at 70–110 µs with them.
                Some(l) => weft_link::wake::poll_readable_precise(&[db, l.as_fd()], limit - since),
                None => weft_link::wake::poll_readable_precise(&[db], limit - since),
            }
            .unwrap_or(0);
            if woke & 1 != 0 {
                // A control operation, the application blocking, or stop.
                self.doorbell.drain();
                continue;
            }
            if woke & 2 != 0 {
                // A packet waits on the link. An application polling this moment
                // takes it itself; one that has not polled for `ARRIVAL_GRACE` waits
                // on the engine (spinning on memory for a WRITE) or lost its core:
                // serve it now, not a quiet gap later.
                let away = self
                    .clock()
                    .saturating_sub(self.app_last_poll.load(Ordering::Relaxed));
                if Duration::from_nanos(away) >= ARRIVAL_GRACE {
                    self.link_takeovers.fetch_add(1, Ordering::Relaxed);
                    if let Some(l) = self.link_fd.as_ref() {
                        let still =
                            weft_link::wake::poll_readable_precise(&[l.as_fd()], Duration::ZERO)
                                .unwrap_or(0);
                        if still & 1 == 0 {
                            self.link_takeovers_stale.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if self.app_left.load(Ordering::Relaxed) {
                        self.link_takeovers_left.fetch_add(1, Ordering::Relaxed);
                    }
                    if self.posted.any.load(Ordering::Relaxed) {
                        self.link_takeovers_posted.fetch_add(1, Ordering::Relaxed);
                    }
                    *by_link = true;
                    break true;
                }
                quiet.arrival_while_polling();
                // Give its poll the moment to drain the socket before looking again
                // (the descriptor stays readable until then).
                let _ = weft_link::wake::poll_readable_precise(&[db], ARRIVAL_GRACE);
                continue;
            }
            let polls = self.app_polls.load(Ordering::Relaxed);
            if polls != seen {
                seen = polls;
                quiet.app_still_polling();
            }
        };
        self.standing_by.store(false, Ordering::SeqCst);
        // A post from here on is the application coming back after a takeover.
        self.app_posted.store(false, Ordering::Relaxed);
        self.quiet_gap_ns
            .store(quiet.get().as_nanos() as u64, Ordering::Relaxed);
        took_over
    }

    /// Whether the idle engine thread, about to block, watches the doorbell and the
    /// link without the engine for the application's next poll ([`Shared::run`])
    /// rather than sleeping: the thread may spin at all (`idle_spin` not zero), the
    /// application has polled, last `away` ago (less than [`APP_AWAY`]), no
    /// application thread is asleep on a channel, and the thread's sleep would hold
    /// the engine. Where it would not (udp, a sparse application, nothing held by the
    /// link: [`Shared::sleeps_free`]), the sleep already leaves the engine to the
    /// application's polls, and covers more than the watch: it publishes `sleeping`
    /// and its end, so a post or a poll's pass that leaves work rings it
    /// ([`Shared::hand_back`]), where during a watch such work waited for the watch's
    /// timeout. The watches (backing off, each followed by a pass) mostly ended in
    /// that sleep anyway: a sparse ping-pong's client took one a round trip, its
    /// engine thread woken 1 ms after every reply for nothing
    /// (docs/results/study-wake-20261202s31).
    fn watches_for_app(&self, away: Duration, link_held: bool) -> bool {
        !self.idle_spin.is_zero()
            && self.app_polls.load(Ordering::Relaxed) > 0
            && away < APP_AWAY
            && self.app_asleep.load(Ordering::SeqCst) == 0
            && !self.sleeps_free(link_held)
    }

    /// The engine thread's loop: spin while there is work and spinning pays, then
    /// block; stand by while the application spins on its queues.
    ///
    /// - While the application polls its completion queues (each empty poll runs a
    ///   pass, [`Shared::assist`]), those passes are the progress and this thread
    ///   stands by ([`Shared::stand_by`]): it sleeps on the doorbell and takes over
    ///   when the application has not polled for the learned quiet gap
    ///   ([`QuietGap`]) or is about to block on a completion channel
    ///   ([`Shared::app_blocks`]). Taking over, it runs passes and watches the link,
    ///   so a program that stops polling and spins on memory for a WRITE (perftest's
    ///   `ib_write_lat`) is served within about one gap.
    /// - Otherwise it runs passes while they find work; idle, it spins for the budget
    ///   learned from the recent gaps between passes that found work
    ///   ([`GapHistory::spin_budget`], at most `idle_spin`), and only while fewer
    ///   threads than cores spin ([`Spinner`]); then it blocks on the link and the
    ///   doorbell until a timer is due.
    /// - `idle_spin == Duration::MAX` forces polling: the thread never stands by or
    ///   blocks. `idle_spin == Duration::ZERO` blocks at once when idle.
    pub(crate) fn run(self: &Arc<Self>) {
        let force_poll = self.idle_spin == Duration::MAX;
        // Without it the kernel may end a 10 µs stand-by 50 µs late.
        let _ = weft_link::wake::set_thread_timer_slack(TIMER_SLACK);
        let mut gaps = GapHistory::default();
        let mut quiet = QuietGap::default();
        let mut seen_polls = self.app_polls.load(Ordering::Relaxed);
        // A takeover whose outcome is not known yet: did the engine find work before
        // the application polled again?
        let mut takeover_pending = false;
        // Whether that takeover found the application gone off with its completions
        // (waiting on the engine) rather than preempted in its polling loop.
        let mut left = false;
        // Whether that takeover was for an arrival on the link (counters only).
        let mut by_link = false;
        // The current idle period: when it began, its spin budget, whether it spins
        // the whole cap to measure, and the claim on a core while it spins.
        let mut idle_since: Option<std::time::Instant> = None;
        let mut budget = Duration::ZERO;
        let mut exploring = false;
        let mut spinner: Option<Spinner> = None;
        // The current quiet stretch (passes without work, across spins, watches and
        // sleeps) began then; the last one lasted this long ([`Engine::send_owed_acks`]).
        let mut quiet_since: Option<std::time::Instant> = None;
        let mut last_quiet = Duration::MAX;
        while !self.stop.load(Ordering::Acquire) {
            if self.waiters.load(Ordering::Relaxed) > 0 {
                std::thread::yield_now();
            }
            if self.app_blocking.swap(false, Ordering::SeqCst) {
                seen_polls = self.app_polls.load(Ordering::Relaxed);
            }
            if !force_poll {
                let polls = self.app_polls.load(Ordering::Relaxed);
                if polls != seen_polls {
                    if takeover_pending {
                        quiet.takeover_idle();
                        takeover_pending = false;
                    }
                    // The spin caught the application coming back: a gap like work's.
                    if let Some(since) = idle_since.take() {
                        if spinner.is_some() {
                            gaps.record(since.elapsed());
                        }
                    }
                    spinner = None;
                    // The application's thread spins now: it holds this thread's claim.
                    let _claim = Spinner::claim();
                    // Its polls run the passes now: this thread's stretch is over.
                    // `last_quiet` keeps the last stretch that ended in work, on
                    // purpose: every wait of a blocking application passes through
                    // a stand-by (its polls before it arms), so a sparse round trip's
                    // server stands by between the pass that delivered the request
                    // and its reply; ended here, the stretch would read the few µs
                    // since that pass instead of the pause before the request, and
                    // the ACK it owes would wait for its deadline (a wake-up) instead
                    // of leaving as the thread blocks (`send_owed_acks`).
                    quiet_since = None;
                    if self.stand_by(&mut quiet, &mut by_link) {
                        self.takeovers.fetch_add(1, Ordering::Relaxed);
                        takeover_pending = true;
                        left = self.app_left.load(Ordering::Relaxed);
                    }
                    seen_polls = self.app_polls.load(Ordering::Relaxed);
                    continue;
                }
            }
            if takeover_pending && self.app_posted.load(Ordering::Relaxed) {
                // The application posted before the engine found work of its own: it
                // came back (its post is the work a pass would find next).
                quiet.takeover_idle();
                takeover_pending = false;
            }
            let mut g = self.engine.lock().unwrap_or_else(PoisonError::into_inner);
            if g.progress() {
                if let Some(q) = quiet_since.take() {
                    last_quiet = q.elapsed();
                }
                if takeover_pending {
                    quiet.takeover_served(left);
                    if left {
                        self.watch_arms.fetch_add(1, Ordering::Relaxed);
                        if by_link {
                            self.watch_rearms.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    takeover_pending = false;
                }
                if let Some(since) = idle_since.take() {
                    if spinner.is_some() {
                        gaps.record(since.elapsed());
                    }
                }
                spinner = None;
                continue;
            }
            if force_poll {
                drop(g);
                std::hint::spin_loop();
                continue;
            }
            let since = *idle_since.get_or_insert_with(|| {
                exploring = gaps.explore();
                let want = if quiet.watch_link() && self.link_fd.is_some() {
                    // The application waits on the engine and does not poll: it
                    // spins on memory (ib_write_lat) or works. Either way it holds a
                    // core, and a spin here would take the other one from its peer;
                    // the link watch below wakes this thread for the next arrival.
                    Duration::ZERO
                } else if exploring {
                    self.idle_spin
                } else {
                    gaps.spin_budget(self.idle_spin)
                };
                spinner = if want.is_zero() {
                    None
                } else {
                    Spinner::claim()
                };
                budget = if spinner.is_some() {
                    want
                } else {
                    Duration::ZERO
                };
                std::time::Instant::now()
            });
            quiet_since.get_or_insert(since);
            if since.elapsed() < budget {
                drop(g);
                std::hint::spin_loop();
                continue;
            }
            if spinner.take().is_some() && budget >= self.idle_spin {
                // Spun the whole cap without work: a gap longer than any spin.
                gaps.record_long();
            }
            // About to block (a watch or a sleep): the delayed ACKs owed leave now
            // instead of with a wake-up at their deadline.
            g.send_owed_acks(last_quiet);
            let away = Duration::from_nanos(
                self.clock()
                    .saturating_sub(self.app_last_poll.load(Ordering::Relaxed)),
            );
            if self.watches_for_app(away, g.link_held()) {
                // The application polled a moment ago and will likely poll again:
                // blocking here would hold the engine asleep, and its polls could
                // not run passes until this thread got a core again. Watch the
                // doorbell and the link (udp) without the engine for a quiet gap,
                // then run a pass, until it comes back or stays away.
                // Watching the link, it wakes for arrivals and timers only: a look
                // every quiet gap would cost a wake-up per 10 µs while the
                // application spins on memory (see `stand_by`).
                // Otherwise every quiet gap, backing off as the application stays
                // away (half its time away so far, never past a timer): one that
                // left its queues half a millisecond ago is not likely back within
                // the next 10 µs, and a look every quiet gap for the whole
                // `APP_AWAY` was up to 100 wake-ups per pause, most of the CPU of a
                // ping-pong with 10 ms pauses over shm (3 000 watches and 640–725
                // µs per round at a 10 µs gap, against 400 µs at 1 400).
                let timeout = match &self.link_fd {
                    Some(_) if quiet.watch_link() => g.sleep_budget(APP_AWAY),
                    _ => quiet.get().max(g.sleep_budget(away / 2)),
                };
                g.watching();
                drop(g);
                self.watches.fetch_add(1, Ordering::Relaxed);
                let db = self.doorbell.as_fd();
                let woke = match &self.link_fd {
                    Some(l) => weft_link::wake::poll_readable_precise(&[db, l.as_fd()], timeout),
                    None => weft_link::wake::poll_readable_precise(&[db], timeout),
                };
                if woke.unwrap_or(0) & 1 != 0 {
                    self.doorbell.drain();
                }
                // The idle period goes on: no new spin after the watch.
                continue;
            }
            // Going to sleep: announce it, then look once more (see `kick`).
            self.sleeping.store(true, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if !g.progress() && self.waiters.load(Ordering::SeqCst) == 0 {
                let sleep = g.sleep_budget(Duration::from_millis(50));
                match self
                    .link_fd
                    .as_ref()
                    .filter(|_| self.sleeps_free(g.link_held()))
                {
                    // Where the link has a readiness descriptor (udp) and holds
                    // nothing it does not show, the thread sleeps without the
                    // engine: an application that posts and then polls runs its
                    // pass at once (`assist` takes the free engine) instead of
                    // blocking on the mutex until this thread has woken for the
                    // post's doorbell and let go (docs/results/study.md, "Idle
                    // engine threads"). `sleeping` stays set, so ring posts still
                    // ring the doorbell.
                    //
                    // Only for a sparse application (away `SPARSE_AWAY` or more after
                    // taking completions): one whose waits follow each other (a back-to-back
                    // blocking ping-pong) then did the engine's work on its own
                    // thread on every round trip — the `sendmmsg` of each post, a
                    // pass in each of its polls — and the thread, finding less to do,
                    // slept more; beside two CPU hogs its round trip took 1.3–1.6×
                    // the held sleep's (docs/results/study.md, "Idle engine
                    // threads, fifth round"). What the sleep saves, a wake-up of this
                    // thread for the post after a pause, is paid once a pause there.
                    //
                    // The engine being free, an application thread can give it
                    // work that nothing announces: a post on the doorbell path goes
                    // into the transport with no ring and no kick (a free engine
                    // used to mean a thread about to run its next pass), and a
                    // poll's pass can arm a timer (a delayed ACK, a retransmission)
                    // due before this sleep ends, or leave datagrams the link holds.
                    // Without a word of it the thread slept on to its timeout (up to
                    // 50 ms) or the next arrival: a sender that posted without
                    // polling had its messages leave in batches, 50 ms late
                    // (tests/wait.rs). So it publishes when its sleep ends
                    // (`sleep_until`, under the engine), and whoever used the engine
                    // meanwhile rings the doorbell if it left it such work
                    // ([`Shared::hand_back`]).
                    Some(l) => {
                        g.stats.sleeps += 1;
                        g.stats.sleeps_free += 1;
                        g.watching();
                        self.sleep_until
                            .store(g.sleep_end(sleep), Ordering::Relaxed);
                        drop(g);
                        let db = self.doorbell.as_fd();
                        let woke = weft_link::wake::poll_readable_precise(&[db, l.as_fd()], sleep);
                        if woke.unwrap_or(0) & 1 != 0 {
                            self.doorbell.drain();
                        }
                    }
                    None => g.wait(sleep, &self.doorbell),
                }
            }
            self.sleeping.store(false, Ordering::SeqCst);
            idle_since = None;
        }
    }
}

/// Start the engine thread.
pub(crate) fn spawn(shared: &Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
    let s = Arc::clone(shared);
    std::thread::Builder::new()
        .name("weft-engine".into())
        .spawn(move || s.run())
}

/// Engine-level counters plus the transport's and the link's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContextStats {
    /// The engine's own counters.
    pub engine: EngineStats,
    /// The transport's counters (drops by reason, retransmissions, …).
    pub transport: Stats,
    /// The link's counters.
    pub link: LinkStats,
    /// By-reference WRITEs whose payload could not be pulled from the peer, by cause
    /// (each also a Remote Access NAK; see [`weft_transport::byref`]).
    pub pull_errors: PullErrors,
    /// By-reference WRITEs pulled, by path (mapped region or `process_vm_readv`).
    pub pulls: Pulls,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cq_ring::ring as cq_ring;
    use weft_link::dgram_sim::DgramFabric;
    use weft_link::spsc::ring;
    use weft_link::BufferPool;
    use weft_transport::{Config, QpType, WcOpcode};

    fn engine() -> Engine {
        let fabric = DgramFabric::new(1);
        let addr = "127.0.0.1:4791".parse().unwrap();
        let link = fabric.link(addr, BufferPool::new(8, 2048), 8).unwrap();
        Engine::new(Config::default(), MrTable::default(), Box::new(link))
    }

    /// The bring-up the tests' QPs share: the connection manager's INIT bring-up with
    /// its default timers (a 67 ms ACK timeout, 7 retries), every right, Q_Key 0,
    /// MTU 1024 and a window of 1024; no path, no peer, PSNs 0.
    fn bringup() -> weft_transport::Bringup {
        crate::cm::init_bringup(&crate::cm::ConnParam {
            access: weft_transport::Access::ALL,
            qkey: 0,
            path_mtu: weft_transport::Mtu::M1024,
            max_inflight: 1024,
            ..Default::default()
        })
    }

    /// Two engines on one fabric with an RC QP each (pd 1), connected to each other,
    /// and the QPs' numbers: A's local ACK timeout 67 ms and B's delayed-ACK bound
    /// announced, so A's unsignaled SENDs leave AckReq clear.
    fn connected() -> ((Engine, u32), (Engine, u32)) {
        connected_with(false)
    }

    /// [`connected`] on links whose sends are memory writes (`in_memory`: a lone
    /// datagram goes at once, as on shm) or not.
    fn connected_with(in_memory: bool) -> ((Engine, u32), (Engine, u32)) {
        let fabric = DgramFabric::new(1);
        let a: std::net::SocketAddr = "127.0.0.1:4791".parse().unwrap();
        let b: std::net::SocketAddr = "127.0.0.1:4792".parse().unwrap();
        let mk = |addr| {
            let mut link = fabric.link(addr, BufferPool::new(8, 2048), 8).unwrap();
            link.set_in_memory(in_memory);
            let mut e = Engine::new(Config::default(), MrTable::default(), Box::new(link));
            let qpn =
                e.ep.create_qp(weft_transport::QpInit {
                    qp_type: QpType::Rc,
                    pd: 1,
                    max_send_wr: 64,
                    max_recv_wr: 64,
                    srq: None,
                })
                .unwrap();
            (e, qpn)
        };
        let (mut ea, mut eb) = (mk(a), mk(b));
        let (qa, qb) = (ea.1, eb.1);
        for ((e, qpn), me, peer, dest) in [(&mut ea, a, b, qb), (&mut eb, b, a, qa)] {
            let up = weft_transport::Bringup {
                path: weft_link::datagram::path_between(me, peer),
                dest_qpn: dest,
                max_inflight: 64,
                peer_ack_delay_us: 64,
                ..bringup()
            };
            for step in &up.steps(QpType::Rc) {
                e.ep.modify_qp(*qpn, step).unwrap();
            }
        }
        (ea, eb)
    }

    /// Moves `e`'s pass count off the pass that looks at the timers every
    /// [`IDLE_TIMER_CHECK`]: the next pass looks only if something calls for it.
    fn off_timer_turn(e: &mut Engine) {
        while timer_turn(e.stats.passes + 1) {
            e.stats.passes += 1;
        }
    }

    /// Moves `e`'s pass count to just before the pass that looks at the timers every
    /// [`IDLE_TIMER_CHECK`]: the next pass looks.
    fn onto_timer_turn(e: &mut Engine) {
        while !timer_turn(e.stats.passes + 1) {
            e.stats.passes += 1;
        }
    }

    /// QP `qpn` added to `e` with one receive (`wr_id` 1) waiting in its ring, posted
    /// while `e` ran no pass (as to an engine thread asleep, not woken) and listed;
    /// the ring's producer, to keep it open.
    fn listed_recv(e: &mut Engine, qpn: u32) -> weft_link::spsc::Producer<RecvWr> {
        let (mut rq_tx, rq) = ring::<RecvWr>(4);
        let flags = Arc::new(QpFlags::default());
        e.add_qp(qpn, None, Some(rq), 0, 0, Arc::clone(&flags));
        rq_tx
            .push(RecvWr {
                wr_id: 1,
                sg_list: Default::default(),
            })
            .unwrap();
        rq_tx.doorbell();
        e.posted.mark(qpn, &flags.listed);
        rq_tx
    }

    /// A's unsignaled empty SEND, taken by B (a pass each): B owes the delayed ACK.
    /// B's receive waits in its QP's ring, posted while B's engine ran no pass (as
    /// to an engine thread asleep, not woken: [`Shared::recv_posted`]); the pass
    /// that takes the SEND drains the ring first, so the SEND finds it.
    fn owing_b() -> (Engine, Engine) {
        let ((a, _), (b, _)) = owing_b_qps(false);
        (a, b)
    }

    /// [`owing_b`] with the two engines' QP numbers, over links whose sends are
    /// memory writes (shm's kind) when `in_memory`: there an owed ACK rides along
    /// with its QP's reply (`Config::ack_rides_reply`, set by `Engine::new`).
    fn owing_b_qps(in_memory: bool) -> ((Engine, u32), (Engine, u32)) {
        let ((mut a, qa), (mut b, qb)) = connected_with(in_memory);
        assert_eq!(
            (a.ep.config().ack_rides_reply, b.ep.config().ack_rides_reply),
            (in_memory, in_memory),
            "set from the link"
        );
        let _rq_tx = listed_recv(&mut b, qb);
        let mut send = SendWr::new(1, WrOp::Send { imm: None }, vec![]);
        send.signaled = false;
        a.ep.post_send(qa, send).unwrap();
        assert!(a.progress(), "A sends");
        assert_eq!(a.link_stats().tx_frames, 1);
        assert!(b.progress(), "B takes the SEND");
        assert_eq!(
            b.stats().cq_orphans,
            1,
            "B's receive completed (no queue here)"
        );
        assert_eq!(b.ep.stats().rnr_naks_sent, 0);
        assert!(b.ep.poll_timeout().is_some(), "B owes the delayed ACK");
        ((a, qa), (b, qb))
    }

    /// A poll's pass that would certainly do nothing is only counted
    /// (`Engine::idle_pass`); one with anything to do — a packet arrived, a post, a
    /// transmit owed, a timer look due — is a whole pass, with its outcome.
    #[test]
    fn a_poll_with_nothing_to_do_runs_no_pass_and_one_with_anything_does() {
        let ((mut a, qa), (mut b, qb)) = connected();
        let mut out = Vec::new();
        off_timer_turn(&mut b);
        let passes = b.stats().passes;
        assert_eq!(b.progress_into(0, 0, &mut out, 16), (false, 0));
        assert_eq!(b.stats().idle_passes, 1, "nothing arrived: counted only");
        assert_eq!(b.stats().passes, passes + 1);
        // A packet on the link: a whole pass (B takes the SEND and owes an RNR NAK,
        // no receive being posted).
        let mut send = SendWr::new(1, WrOp::Send { imm: None }, vec![]);
        send.signaled = false;
        a.ep.post_send(qa, send).unwrap();
        assert!(a.progress(), "A sends");
        off_timer_turn(&mut b);
        let (work, _) = b.progress_into(0, 0, &mut out, 16);
        assert!(work, "B's pass took the SEND");
        assert_eq!(b.stats().idle_passes, 1);
        assert_eq!(b.ep.stats().rx_packets, 1);
        assert_eq!(b.ep.stats().rnr_naks_sent, 1);
        // The pass sent its NAK (shm-like links send after receiving; here the next
        // pass does): nothing is owed once it left.
        if b.ep.may_transmit() {
            b.progress_into(0, 0, &mut out, 16);
        }
        assert_eq!(b.link_stats().tx_frames, 1, "the NAK left");
        // A post to B's QP: a whole pass that drains it, though nothing arrived.
        let _rq_tx = listed_recv(&mut b, qb);
        off_timer_turn(&mut b);
        let idle = b.stats().idle_passes;
        b.progress_into(0, 0, &mut out, 16);
        assert_eq!(b.stats().idle_passes, idle, "a post is work");
        assert_eq!(
            b.ep.rq_room(qb),
            Some(63),
            "the receive reached the transport"
        );
        // No timer armed: a timer look's turn finds nothing, the pass stays idle.
        assert_eq!(b.ep.poll_timeout(), None);
        onto_timer_turn(&mut b);
        b.progress_into(0, 0, &mut out, 16);
        assert_eq!(b.stats().idle_passes, idle + 1, "nothing to do again");
    }

    /// While a timer is armed, a poll's pass whose turn it is to look at the timers
    /// (every `IDLE_TIMER_CHECK`th, or the first after a wake-up) is a whole pass:
    /// the timer that fell due runs in it.
    #[test]
    fn a_poll_whose_turn_it_is_to_look_at_an_armed_timer_runs_the_pass() {
        let (_a, mut b) = owing_b();
        let mut out = Vec::new();
        off_timer_turn(&mut b);
        b.progress_into(0, 0, &mut out, 16);
        assert_eq!(b.stats().idle_passes, 1, "not the timers' turn");
        let due = b.ep.poll_timeout().expect("B owes the delayed ACK");
        while b.now() < due {
            std::thread::sleep(Duration::from_micros(100));
        }
        b.watching();
        assert!(b.progress_into(0, 0, &mut out, 16).0, "the due timer ran");
        assert_eq!(b.stats().idle_passes, 1);
        b.progress_into(0, 0, &mut out, 16);
        assert_eq!(b.link_stats().tx_frames, 1, "the delayed ACK left");
        let (_a, mut b) = owing_b();
        onto_timer_turn(&mut b);
        b.progress_into(0, 0, &mut out, 16);
        assert_eq!(b.stats().idle_passes, 0, "the timers' turn");
    }

    /// An engine thread about to block after a quiet stretch at least as long as the
    /// ACK delay sends the delayed ACKs it owes at once (`send_owed_acks`), which the
    /// pass alone would send only at their deadline, and its timer is gone: the
    /// thread does not wake for it. After a shorter stretch (the next message is
    /// likely within the delay) the ACK waits.
    #[test]
    fn an_engine_about_to_block_sends_the_acks_it_owes() {
        let (mut a, mut b) = owing_b();
        // Passes that find nothing look at timers every `IDLE_TIMER_CHECK`: one that
        // does not (a deadline 64 µs away could pass meanwhile).
        off_timer_turn(&mut b);
        assert!(!b.progress());
        assert_eq!(
            b.link_stats().tx_frames,
            0,
            "the ACK waits for its deadline"
        );
        let delay = Duration::from_micros(b.ep.config().ack_delay_us);
        assert!(!b.send_owed_acks(delay / 2), "after a short quiet stretch");
        assert_eq!(b.link_stats().tx_frames, 0, "the ACK still waits");
        assert!(b.ep.poll_timeout().is_some());
        assert!(b.send_owed_acks(delay));
        assert_eq!(b.link_stats().tx_frames, 1, "the ACK left");
        assert_eq!(b.stats().early_acks, 1);
        assert_eq!(b.ep.poll_timeout(), None, "nothing to wake for");
        assert!(!b.send_owed_acks(Duration::MAX), "nothing owed any more");
        a.progress();
        assert!(a.ep.is_idle(), "A's SEND retired on the ACK");
        assert_eq!(a.ep.stats().messages_completed, 1);
        assert_eq!(a.ep.stats().timeouts, 0);
    }

    /// A post's flush after a request that came after a quiet stretch on its QP (a
    /// sparse peer's request, here the QP's first) sends the delayed ACK owed for it
    /// in the same burst as the post's own packet (the reply), one arrival at the
    /// peer instead of two, on a link whose bursts are one arrival (shm's kind, where
    /// `Engine::new` sets `Config::ack_rides_reply`); after a request that came within
    /// the ACK delay of the QP's previous one (a dense ping-pong, a stream) the ACK
    /// waits to cover the next messages too. On a link whose sends are system calls
    /// (udp; here the fabric as it comes) the reply leaves alone: each datagram is its
    /// own arrival there, and the ACK in the reply's burst saved the peer no wake-up.
    #[test]
    fn a_reply_to_a_sparse_request_carries_its_ack_only_where_a_burst_is_one_arrival() {
        for (in_memory, sparse) in [(true, true), (true, false), (false, true)] {
            let case = format!("in memory {in_memory}, sparse {sparse}");
            let ((mut a, qa), (mut b, qb)) = if sparse {
                owing_b_qps(in_memory)
            } else {
                dense_owing_b(in_memory)
            };
            let slot = b.ep.qp_slot(qb).unwrap();
            let (frames, bursts) = (b.link_stats().tx_frames, b.stats().tx_bursts);
            let acks_before = b.ep.stats().acks_sent;
            let _rq = listed_recv(&mut a, qa);
            let mut reply = SendWr::new(2, WrOp::Send { imm: None }, vec![]);
            reply.signaled = false;
            b.ep.post_send(qb, reply).unwrap();
            b.flush(slot);
            let rides = in_memory && sparse;
            let (sent, acks) = if rides { (2, 1) } else { (1, 0) };
            assert_eq!(b.link_stats().tx_frames - frames, sent, "{case}");
            assert_eq!(
                b.stats().tx_bursts - bursts,
                1,
                "{case}: the reply and its ACK, one burst"
            );
            assert_eq!(b.ep.stats().acks_with_reply, acks, "{case}");
            assert_eq!(b.ep.stats().acks_sent - acks_before, acks, "{case}");
            if rides {
                a.progress();
                assert_eq!(
                    a.ep.stats().messages_completed,
                    1,
                    "{case}: A's SEND retired"
                );
            } else {
                assert!(
                    b.ep.poll_timeout().is_some(),
                    "{case}: the ACK is still owed"
                );
            }
        }
    }

    /// A's signaled SEND and an unsignaled one right behind it, taken by B in one pass
    /// (one clock reading: the second came within the ACK delay of the first): the
    /// first's ACK left in that pass (asked for; on links whose sends are memory
    /// writes, in the pass that received, elsewhere the next), the second's is owed,
    /// and it began owing within the delay of the QP's previous request (dense).
    fn dense_owing_b(in_memory: bool) -> ((Engine, u32), (Engine, u32)) {
        let ((mut a, qa), (mut b, qb)) = connected_with(in_memory);
        let mut rq_tx = listed_recv(&mut b, qb);
        rq_tx
            .push(RecvWr {
                wr_id: 2,
                sg_list: Default::default(),
            })
            .unwrap();
        rq_tx.doorbell();
        a.ep.post_send(qa, SendWr::new(1, WrOp::Send { imm: None }, vec![]))
            .unwrap();
        let mut send = SendWr::new(2, WrOp::Send { imm: None }, vec![]);
        send.signaled = false;
        a.ep.post_send(qa, send).unwrap();
        assert!(a.progress(), "A sends");
        assert_eq!(a.link_stats().tx_frames, 2);
        assert!(b.progress(), "B takes both SENDs");
        if b.ep.may_transmit() {
            b.progress();
        }
        assert_eq!(b.ep.stats().rx_packets, 2);
        assert_eq!(b.ep.stats().acks_sent, 1, "the asked-for ACK left");
        assert!(b.ep.poll_timeout().is_some(), "B owes the second's ACK");
        ((a, qa), (b, qb))
    }

    /// The pass after a watch (the engine thread blocked without the engine) looks at
    /// the timers, as the pass after a sleep does: a timer that fell due meanwhile
    /// (here B's delayed ACK) runs in it, not up to `IDLE_TIMER_CHECK` passes later.
    #[test]
    fn the_pass_after_a_watch_runs_a_timer_that_fell_due() {
        let (_a, mut b) = owing_b();
        let due = b.ep.poll_timeout().unwrap();
        while b.now() < due {
            std::thread::sleep(Duration::from_micros(100));
        }
        off_timer_turn(&mut b);
        b.watching();
        assert!(b.progress(), "the due timer ran");
        // It queued the ACK; the pass that follows (a pass with work is followed at
        // once) sends it.
        b.progress();
        assert_eq!(b.link_stats().tx_frames, 1, "the delayed ACK left");
        assert_eq!(b.stats().early_acks, 0);
    }

    /// A receive posted to the ring of an engine thread asleep holding the engine
    /// rings no doorbell (the pass that takes its packet drains the ring first, see
    /// `owing_b`); one on a QP the poster knows is in error does: its flush is due now.
    #[test]
    fn a_receive_post_wakes_a_sleeping_engine_only_for_a_qp_in_error() {
        let shared = Shared::new(engine(), Progress::Thread, Duration::from_micros(50)).unwrap();
        shared.sleeping.store(true, Ordering::SeqCst);
        shared.recv_posted(false);
        assert_eq!(shared.doorbell.drain(), 0, "a receive woke the engine");
        shared.recv_posted(true);
        assert_eq!(
            shared.doorbell.drain(),
            1,
            "a receive to flush must wake it"
        );
        // A send does.
        shared.kick();
        assert_eq!(shared.doorbell.drain(), 1);
    }

    fn done(wr_id: u64, opcode: WcOpcode, qpn: u32) -> Completion {
        Completion::new(wr_id, WcStatus::Success, opcode, qpn)
    }

    #[test]
    fn completions_go_to_their_qps_queues_and_never_to_a_queue_that_reused_a_slot() {
        let mut e = engine();
        let (send_tx, mut send_rx) = cq_ring(8);
        let (recv_tx, mut recv_rx) = cq_ring(8);
        let send = e.add_cq(send_tx, None).0.id;
        let recv = e.add_cq(recv_tx, None).0.id;
        let (_sq_tx, sq) = ring::<SqItem>(2);
        e.add_qp(7, Some(sq), None, send, recv, Arc::new(QpFlags::default()));
        e.ep.sink_mut().route(done(1, WcOpcode::Send, 7));
        e.ep.sink_mut().route(done(2, WcOpcode::Recv, 7));
        e.complete();
        assert_eq!(send_rx.pop().map(|c| c.wr_id), Some(1));
        assert_eq!(recv_rx.pop().map(|c| c.wr_id), Some(2));

        // The send queue goes away and a new queue takes its slot: the QP's send
        // completions are orphans, not the new queue's.
        e.remove_cq(send);
        let (other_tx, mut other_rx) = cq_ring(8);
        let other = e.add_cq(other_tx, None).0.id;
        assert_ne!(other, send);
        e.ep.sink_mut().route(done(3, WcOpcode::Send, 7));
        e.ep.sink_mut().route(done(4, WcOpcode::Recv, 7));
        e.complete();
        assert!(other_rx.pop().is_none());
        assert_eq!(recv_rx.pop().map(|c| c.wr_id), Some(4));
        assert_eq!(e.stats().cq_orphans, 1);

        // A completion for a QP that no longer exists.
        e.remove_qp(7);
        e.ep.sink_mut().route(done(5, WcOpcode::Recv, 7));
        e.complete();
        assert!(recv_rx.pop().is_none());
        assert_eq!(e.stats().cq_orphans, 2);
    }

    /// A receive posted through its ring after the pass drained the rings (the engine
    /// was held), for a SEND already waiting in the link: the pass's receive step
    /// finds the receive before it handles the SEND — on both receive paths, bursts
    /// and the visit of each datagram (the shm link's), and for a receive posted to
    /// the QP's own queue or to its shared receive queue. A UD SEND that finds no
    /// receive is dropped for good, so without the look the receive never completes.
    #[test]
    fn a_receive_posted_after_the_drain_meets_its_send_in_the_same_receive_step() {
        use crate::{Context, DeviceConfig, LinkKind};
        use std::net::SocketAddr;
        use weft_link::datagram::{pool_buf_size, DEFAULT_MAX_DATAGRAM};
        use weft_transport::{Access, Bringup, QpType, SendWr, WrOp};
        // `listed`: the queue was listed already when its receive was posted (carried
        // by the drain, or taken by an earlier packet of the step), so the post does
        // not announce itself again. `srq`: the receive goes to A's shared receive
        // queue.
        let cases = [(false, false), (true, false), (false, true), (true, true)];
        for (srq, (visits, listed)) in [false, true]
            .into_iter()
            .flat_map(|srq| cases.map(|c| (srq, c)))
        {
            let fabric = DgramFabric::new(7);
            let dev = |ip: [u8; 4]| {
                let addr = SocketAddr::from((ip, 4791));
                let pool = BufferPool::new(64, pool_buf_size(DEFAULT_MAX_DATAGRAM));
                let mut link = fabric.link(addr, pool, 64).unwrap();
                link.set_visits(visits);
                let mut cfg = DeviceConfig::new(LinkKind::Udp, addr);
                cfg.progress = Progress::Inline;
                Context::with_link(Box::new(link), cfg).unwrap()
            };
            let (a, b) = (dev([198, 18, 0, 1]), dev([198, 18, 0, 2]));
            let (pa, pb) = (a.alloc_pd(), b.alloc_pd());
            let mut cqa = crate::CompletionQueue::new(&a, 8, None);
            let cqb = crate::CompletionQueue::new(&b, 8, None);
            let init = crate::QpInitAttr::new(QpType::Ud);
            let mut sa = pa.create_srq(8);
            let mut qa = pa.create_qp(&cqa, &cqa, srq.then_some(&sa), init).unwrap();
            let mut qb = pb.create_qp(&cqb, &cqb, None, init).unwrap();
            let up = Bringup {
                qkey: 0x1111_1111,
                ..bringup()
            };
            for step in up.steps(QpType::Ud) {
                qa.modify(&step).unwrap();
                qb.modify(&step).unwrap();
            }
            let (ma, mb) = (
                pa.alloc_mr(4096, Access::ALL),
                pb.alloc_mr(4096, Access::ALL),
            );
            mb.write(0, b"hello").unwrap();
            let ah = pb.create_ah(a.local_addr()).unwrap();
            let mut wr = SendWr::new(1, WrOp::Send { imm: None }, vec![mb.sge(0, 5)]);
            wr.ud = Some(ah.dest(qa.qp_num(), up.qkey));
            qb.post_send([wr]).unwrap();
            for _ in 0..100 {
                if fabric.stats().delivered > 0 {
                    break;
                }
                b.progress();
            }
            assert_eq!(fabric.stats().delivered, 1, "the SEND never left");

            // The pass has drained the rings (it holds the engine): the receive takes
            // the ring, and the receive step runs next.
            let mut e = a.shared().engine.lock().unwrap();
            e.drain_posts();
            let wr = RecvWr {
                wr_id: 9,
                sg_list: [ma.sge(0, 2048)].into(),
            };
            if srq {
                sa.post_recv([wr]).unwrap();
            } else {
                qa.post_recv([wr]).unwrap();
            }
            if listed {
                let Engine {
                    posted, to_drain, ..
                } = &mut *e;
                posted.take_into(to_drain);
            }
            assert!(e.receive(&mut None), "nothing received (visits: {visits})");
            assert_eq!(
                e.stats.srq_rings_drained, 0,
                "a pass's drain fed it, not the step"
            );
            drop(e);
            let mut got = Vec::new();
            for _ in 0..100 {
                if cqa.poll(&mut got, 1) > 0 {
                    break;
                }
            }
            assert_eq!(
                got.len(),
                1,
                "the SEND found no receive (visits: {visits}, listed: {listed}, srq: {srq})"
            );
            assert_eq!(got[0].status, WcStatus::Success);
            assert_eq!(got[0].wr_id, 9);
        }
    }

    /// A pass drains the rings of the shared receive queues posted to since the pass
    /// before, and of no other: a ring that holds receives nobody announced (as one
    /// a post has filled but not yet listed) stays as it is, however many passes
    /// run. Receives the transport has no room for keep their queue listed, and each
    /// pass looks again until they fit. Before, every pass fed every queue.
    #[test]
    fn a_pass_drains_the_shared_receive_queues_posted_to_and_no_other() {
        let mut e = engine();
        let mut srqs = Vec::new();
        for _ in 0..3 {
            // Room for two receives in the transport.
            let id = e.ep.create_srq(1, 2);
            let (tx, rx) = ring::<RecvWr>(4);
            let listed = Arc::new(AtomicBool::new(false));
            e.add_srq(id, rx, Arc::clone(&listed));
            srqs.push((id, tx, listed));
        }
        let push = |tx: &mut weft_link::spsc::Producer<RecvWr>, n: u64| {
            for i in 0..n {
                tx.push(recv(i)).unwrap();
            }
            tx.doorbell();
        };
        let room = |e: &Engine, id: u32| e.ep.srq_room(id).unwrap();
        // Filled, not announced: no pass looks.
        push(&mut srqs[0].1, 1);
        for _ in 0..IDLE_TIMER_CHECK + 1 {
            e.progress();
        }
        assert_eq!(
            room(&e, srqs[0].0),
            2,
            "a pass fed a queue nobody posted to"
        );
        assert_eq!(e.stats.srq_rings_drained, 0);
        // Announced: the next pass drains that ring, and only that one.
        e.posted.mark_srq(srqs[0].0, &srqs[0].2);
        assert!(e.progress());
        assert_eq!(room(&e, srqs[0].0), 1);
        assert_eq!(e.stats.srq_rings_drained, 1);
        assert!(!srqs[0].2.load(Ordering::SeqCst), "still listed");
        e.progress();
        assert_eq!(e.stats.srq_rings_drained, 1, "an idle pass drained a ring");
        // Three receives for room for two: the third waits, its queue listed, and
        // each pass looks again.
        push(&mut srqs[1].1, 3);
        e.posted.mark_srq(srqs[1].0, &srqs[1].2);
        assert!(e.progress());
        assert_eq!(room(&e, srqs[1].0), 0);
        assert_eq!(e.stats.srq_rings_drained, 2);
        assert!(
            srqs[1].2.load(Ordering::SeqCst),
            "the waiting receive's queue"
        );
        e.progress();
        e.progress();
        assert_eq!(e.stats.srq_rings_drained, 4);
        assert_eq!(room(&e, srqs[2].0), 2, "the idle queue's room");
        assert_eq!(room(&e, srqs[0].0), 1, "the queue posted to before");
    }

    /// An RC QP of context `ctx` brought up against `peer`, where nobody answers, with
    /// a 9 µs ACK timeout and one retry; a SEND posted on it; and its queues. The
    /// SEND's retries run out at once: the transport moves the QP to ERR by itself.
    fn doomed_qp(
        ctx: &crate::Context,
        peer: std::net::SocketAddr,
        channel: Option<&crate::CompletionChannel>,
    ) -> (
        crate::QueuePair,
        crate::CompletionQueue,
        crate::CompletionQueue,
    ) {
        use weft_transport::{Bringup, SendWr, WrOp};
        let pd = ctx.alloc_pd();
        let scq = crate::CompletionQueue::new(ctx, 8, channel);
        let rcq = crate::CompletionQueue::new(ctx, 8, channel);
        let init = crate::QpInitAttr::new(QpType::Rc);
        let mut qp = pd.create_qp(&scq, &rcq, None, init).unwrap();
        let up = Bringup {
            path: Some(ctx.path_to(peer).unwrap()),
            dest_qpn: 0x1234,
            timeout: 1,
            retry_cnt: 1,
            ..bringup()
        };
        for step in up.steps(QpType::Rc) {
            qp.modify(&step).unwrap();
        }
        qp.post_send([SendWr::new(1, WrOp::Send { imm: None }, vec![])])
            .unwrap();
        (qp, scq, rcq)
    }

    fn recv(wr_id: u64) -> RecvWr {
        RecvWr {
            wr_id,
            sg_list: Default::default(),
        }
    }

    /// A QP the transport moved to ERR by itself (its SEND's retries ran out against
    /// a peer that never answers) while its handle still says RTS: a receive posted
    /// to its ring while the engine thread sleeps holding the engine (played here by
    /// the test) rings the doorbell, since its flush completion is due now, and the
    /// pass it wakes delivers it. Judged by the handle's own state, the receive left
    /// the engine asleep until its next timed wake-up (up to 50 ms). A receive taking
    /// the doorbell path (the engine free) is flushed by the transport at once, and
    /// its completion published with it: the poll that finds it runs no pass.
    #[test]
    fn a_receive_posted_to_a_qp_the_transport_errored_wakes_a_sleeping_engine() {
        use crate::{Context, DeviceConfig, LinkKind};
        use std::net::SocketAddr;
        use weft_link::datagram::{pool_buf_size, DEFAULT_MAX_DATAGRAM};
        use weft_transport::QpState;
        let fabric = DgramFabric::new(7);
        let addr = SocketAddr::from(([198, 18, 0, 1], 4791));
        let pool = BufferPool::new(64, pool_buf_size(DEFAULT_MAX_DATAGRAM));
        let link = fabric.link(addr, pool, 64).unwrap();
        let mut cfg = DeviceConfig::new(LinkKind::Udp, addr);
        cfg.progress = Progress::Inline;
        let a = Context::with_link(Box::new(link), cfg).unwrap();
        // Nobody at 198.18.0.2.
        let nobody = SocketAddr::from(([198, 18, 0, 2], 4791));
        let (mut qp, mut scq, mut rcq) = doomed_qp(&a, nobody, None);
        let mut got = Vec::new();
        // Passes until the retries run out (a watchdog, not a timed assertion: 9 µs
        // timeouts end in microseconds).
        let watchdog = std::time::Instant::now() + Duration::from_secs(20);
        while scq.poll(&mut got, 1) == 0 {
            assert!(std::time::Instant::now() < watchdog, "no RetryExcErr");
        }
        assert_eq!(got[0].status, WcStatus::RetryExcErr);
        assert_eq!(qp.query().unwrap().0, QpState::Err);

        // The engine thread asleep, holding the engine.
        let shared = a.shared();
        let e = shared.engine.lock().unwrap();
        shared.sleeping.store(true, Ordering::SeqCst);
        shared.doorbell.drain();
        qp.post_recv([recv(9)]).unwrap();
        assert_eq!(
            shared.doorbell.drain(),
            1,
            "the receive's flush left to the engine's next timed wake-up"
        );
        shared.sleeping.store(false, Ordering::SeqCst);
        drop(e);
        // The pass the doorbell woke.
        assert!(a.progress());
        got.clear();
        assert_eq!(rcq.poll(&mut got, 2), 1);
        assert_eq!((got[0].wr_id, got[0].status), (9, WcStatus::WrFlushErr));

        // The doorbell path: flushed and published by the post itself.
        let passes = a.stats().engine.passes;
        qp.post_recv([recv(10)]).unwrap();
        got.clear();
        assert_eq!(rcq.poll(&mut got, 2), 1);
        assert_eq!((got[0].wr_id, got[0].status), (10, WcStatus::WrFlushErr));
        assert_eq!(a.stats().engine.passes, passes, "the poll ran a pass");
        assert_eq!(a.stats().engine.recv_flush_kicks, 1);
        // A send on the doorbell path likewise (`publish_direct`).
        qp.post_send([SendWr::new(12, WrOp::Send { imm: None }, vec![])])
            .unwrap();
        got.clear();
        assert_eq!(scq.poll(&mut got, 2), 1);
        assert_eq!((got[0].wr_id, got[0].status), (12, WcStatus::WrFlushErr));
        assert_eq!(
            a.stats().engine.passes,
            passes,
            "the send's poll ran a pass"
        );

        // Reset (and INIT): the flag goes with the error state, and a receive posted
        // to the ring no longer wakes the engine.
        qp.modify(&weft_transport::QpAttr {
            state: Some(QpState::Reset),
            ..Default::default()
        })
        .unwrap();
        qp.modify(&bringup().steps(QpType::Rc)[0]).unwrap();
        let e = shared.engine.lock().unwrap();
        shared.sleeping.store(true, Ordering::SeqCst);
        qp.post_recv([recv(11)]).unwrap();
        assert_eq!(shared.doorbell.drain(), 0, "a receive woke the engine");
        shared.sleeping.store(false, Ordering::SeqCst);
        drop(e);
        assert_eq!(a.stats().engine.recv_flush_kicks, 1);
    }

    /// The same with a real engine thread and a program blocked on its completion
    /// channel: the QP errored by the transport, the thread asleep (it blocks as soon
    /// as it is idle), a receive posted to the ring comes back flushed through the
    /// channel, its post having kicked the engine (`recv_flush_kicks`: the post saw the
    /// flag). Without the kick the event still came, at the thread's next timed
    /// wake-up (a watchdog here, not a timed assertion); this test checks the post's
    /// decision, and the one above that the decision rings a sleeping thread.
    #[test]
    fn a_receive_posted_to_a_qp_the_transport_errored_comes_back_through_the_channel() {
        use crate::{CompletionChannel, Context, DeviceConfig, LinkKind};
        let void = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut cfg = DeviceConfig::local(LinkKind::Udp);
        cfg.idle_spin = Duration::ZERO;
        let a = Context::open_with(cfg).unwrap();
        let ch = CompletionChannel::new(&a).unwrap();
        let (mut qp, mut scq, mut rcq) = doomed_qp(&a, void.local_addr().unwrap(), Some(&ch));
        let mut got = Vec::new();
        let event = |cq: &mut crate::CompletionQueue, got: &mut Vec<Completion>| loop {
            cq.req_notify();
            if cq.poll(got, 1) > 0 {
                return;
            }
            let id = ch.get_cq_event(Duration::from_secs(20)).expect("no event");
            assert_eq!(id, cq.id());
            cq.ack_events(1);
        };
        event(&mut scq, &mut got);
        assert_eq!(got[0].status, WcStatus::RetryExcErr);
        // The engine thread goes to sleep: nothing left to do, no timer.
        let watchdog = std::time::Instant::now() + Duration::from_secs(20);
        while !a.shared().sleeping.load(Ordering::SeqCst) {
            assert!(
                std::time::Instant::now() < watchdog,
                "the engine never slept"
            );
            std::thread::yield_now();
        }
        qp.post_recv([recv(9)]).unwrap();
        got.clear();
        event(&mut rcq, &mut got);
        assert_eq!((got[0].wr_id, got[0].status), (9, WcStatus::WrFlushErr));
        assert_eq!(a.stats().engine.recv_flush_kicks, 1);
    }

    /// A look at a free engine writes no doorbell under thread progress (the write
    /// woke a standing-by engine thread on every `QueuePair::query`); a control call
    /// that changes state still writes it, and a look at a busy engine falls back to
    /// the waking lock. No engine thread runs here: the doorbell's counter is read
    /// directly.
    #[test]
    fn a_look_at_a_free_engine_rings_no_doorbell_and_a_change_still_does() {
        let shared = Shared::new(engine(), Progress::Thread, Duration::from_micros(50)).unwrap();
        for _ in 0..10 {
            drop(shared.lock_to_look());
        }
        assert_eq!(shared.doorbell.drain(), 0, "looks rang the doorbell");
        drop(shared.lock());
        assert_eq!(shared.doorbell.drain(), 1, "a control call must ring it");
        // Held elsewhere (an engine thread in a pass, or asleep holding it): the look
        // rings, so that the holder lets go.
        let held = shared.engine.lock().unwrap();
        std::thread::scope(|s| {
            let look = s.spawn(|| drop(shared.lock_to_look()));
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while shared.waiters.load(Ordering::SeqCst) == 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the look never waited"
                );
                std::thread::yield_now();
            }
            drop(held);
            look.join().unwrap();
        });
        assert_eq!(
            shared.doorbell.drain(),
            1,
            "a look at a held engine must ring"
        );
    }

    /// An application poll that finds the engine held by a sleeping engine thread
    /// rings the doorbell and waits for the engine as a counted waiter (so the thread
    /// does not sleep on holding it), then runs its own pass; one that finds the
    /// engine held by a thread in a pass neither rings nor waits. No engine thread
    /// runs here: this thread plays it, holding the engine and setting `sleeping`.
    #[test]
    fn a_poll_waits_for_an_engine_held_asleep_and_not_for_one_in_a_pass() {
        let shared = Shared::new(engine(), Progress::Thread, Duration::from_micros(50)).unwrap();
        let mut out = Vec::new();
        let held = shared.engine.lock().unwrap();
        assert_eq!(shared.assist(NO_CQ.idx, NO_CQ.id, &mut out, 8), 0);
        assert_eq!(shared.doorbell.drain(), 0, "a poll beside a pass rang");
        assert_eq!(shared.waiters.load(Ordering::SeqCst), 0);

        shared.sleeping.store(true, Ordering::SeqCst);
        std::thread::scope(|s| {
            let poll = s.spawn(|| {
                let mut out = Vec::new();
                shared.assist(NO_CQ.idx, NO_CQ.id, &mut out, 8);
            });
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while shared.waiters.load(Ordering::SeqCst) == 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the poll never waited for the engine"
                );
                std::thread::yield_now();
            }
            assert!(
                !poll.is_finished(),
                "the poll returned with the engine held"
            );
            shared.sleeping.store(false, Ordering::SeqCst);
            drop(held);
            poll.join().unwrap();
        });
        assert_eq!(shared.doorbell.drain(), 1, "the waiting poll must ring");
        assert_eq!(shared.waiters.load(Ordering::SeqCst), 0);
        assert_eq!(shared.app_polls.load(Ordering::Relaxed), 2);
        assert_eq!(shared.engine.lock().unwrap().stats().passes, 1);
    }

    /// A post on the doorbell path beside an engine thread asleep without the engine
    /// (udp's sleep, [`Shared::run`]; played here: `sleeping` set) is not left in
    /// the transport for the thread's next pass: it goes onto the link from the
    /// posting thread, and the doorbell stays quiet (a UD SEND arms no timer). Beside
    /// a thread awake it is left to that pass (udp under thread progress). Before,
    /// such a post stayed in the transport, unannounced, until the sleep ended (up to
    /// 50 ms): the three failures of tests/wait.rs with the sleep without the engine.
    #[test]
    fn a_post_beside_a_thread_asleep_without_the_engine_leaves_at_once() {
        use crate::{Context, DeviceConfig, LinkKind};
        use std::net::SocketAddr;
        use weft_link::datagram::{pool_buf_size, DEFAULT_MAX_DATAGRAM};
        use weft_transport::{Bringup, QpType};
        let fabric = DgramFabric::new(7);
        let dev = |ip: [u8; 4]| {
            let addr = SocketAddr::from((ip, 4791));
            let pool = BufferPool::new(64, pool_buf_size(DEFAULT_MAX_DATAGRAM));
            let link = fabric.link(addr, pool, 64).unwrap();
            let mut cfg = DeviceConfig::new(LinkKind::Udp, addr);
            cfg.progress = Progress::Thread;
            Context::with_link(Box::new(link), cfg).unwrap()
        };
        let (a, b) = (dev([198, 18, 0, 1]), dev([198, 18, 0, 2]));
        // B's engine thread stops (it lets go of its `Arc` as it returns): this
        // thread plays it.
        let shared = b.shared();
        shared.stop();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while Arc::strong_count(shared) > 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "the engine thread did not stop"
            );
            std::thread::yield_now();
        }
        let pb = b.alloc_pd();
        let cqb = crate::CompletionQueue::new(&b, 8, None);
        let init = crate::QpInitAttr::new(QpType::Ud);
        let mut qb = pb.create_qp(&cqb, &cqb, None, init).unwrap();
        let up = Bringup {
            qkey: 0x1111_1111,
            ..bringup()
        };
        for step in up.steps(QpType::Ud) {
            qb.modify(&step).unwrap();
        }
        let ah = pb.create_ah(a.local_addr()).unwrap();
        let wr = || {
            let mut wr = SendWr::new(1, WrOp::Send { imm: None }, vec![]);
            wr.ud = Some(ah.dest(1, up.qkey));
            wr
        };
        let sent = || shared.engine.lock().unwrap().link_stats().tx_frames;
        // Control calls rang it; the thread's pass would have drained it.
        shared.doorbell.drain();
        qb.post_send([wr()]).unwrap();
        assert_eq!(sent(), 0, "left to the awake thread's pass");
        assert_eq!(
            shared.doorbell.drain(),
            0,
            "a post beside an awake thread rang"
        );
        assert!(
            shared.engine.lock().unwrap().progress(),
            "the pass sends it"
        );
        assert_eq!(sent(), 1);
        shared.sleeping.store(true, Ordering::SeqCst);
        shared.sleep_until.store(u64::MAX, Ordering::Relaxed);
        qb.post_send([wr()]).unwrap();
        assert_eq!(
            sent(),
            2,
            "a post beside a thread asleep without the engine must not wait for it"
        );
        assert!(!shared.engine.lock().unwrap().needs_thread(u64::MAX));
        assert_eq!(shared.doorbell.drain(), 0, "nothing to wake the thread for");
        drop(qb);
    }

    /// An application's pass ([`Shared::assist`]) beside an engine thread asleep
    /// without the engine rings its doorbell when it leaves the thread work due
    /// before the sleep ends: here the retransmission timer of the SEND the pass put
    /// on the link. Not when the thread is awake, nor when its sleep ends before the
    /// timer anyway.
    #[test]
    fn a_poll_beside_a_thread_asleep_without_the_engine_hands_back_an_earlier_timer() {
        let ((a, qa), _b) = connected();
        let shared = Shared::new(a, Progress::Thread, Duration::from_micros(50)).unwrap();
        let send_and_poll = || {
            let mut send = SendWr::new(1, WrOp::Send { imm: None }, vec![]);
            send.signaled = false;
            shared
                .engine
                .lock()
                .unwrap()
                .ep
                .post_send(qa, send)
                .unwrap();
            let mut out = Vec::new();
            shared.assist(NO_CQ.idx, NO_CQ.id, &mut out, 8);
            let e = shared.engine.lock().unwrap();
            assert!(!e.ep.may_transmit(), "the poll's pass sent the SEND");
            assert!(e.ep.poll_timeout().is_some(), "its timer is armed");
        };
        send_and_poll();
        assert_eq!(
            shared.doorbell.drain(),
            0,
            "a poll beside an awake thread rang"
        );
        shared.sleeping.store(true, Ordering::SeqCst);
        shared.sleep_until.store(0, Ordering::Relaxed);
        send_and_poll();
        assert_eq!(
            shared.doorbell.drain(),
            0,
            "the sleep ends before the timer"
        );
        shared.sleep_until.store(u64::MAX, Ordering::Relaxed);
        send_and_poll();
        assert_eq!(
            shared.doorbell.drain(),
            1,
            "a timer due before the sleep ends must ring"
        );
        assert_eq!(shared.handbacks.load(Ordering::Relaxed), 1);
    }

    /// The udp engine thread sleeps without the engine only for a sparse application
    /// ([`Shared::sleeps_free`]): one back after a pause (its first empty poll
    /// [`SPARSE_AWAY`] or more after the poll that took completions), not one whose
    /// waits follow each other (a back-to-back blocking ping-pong, which posts its next
    /// message at once), which then did the engine's work on its own thread on every
    /// round trip (the `sendmmsg` of its posts, a pass in each poll). A link holding
    /// datagrams its descriptor does not show keeps the engine held, and so does a
    /// link without a descriptor.
    #[test]
    fn only_a_sparse_application_lets_the_udp_engine_thread_sleep_without_the_engine() {
        let udp = |addr: &str| {
            let link =
                weft_link::udp::UdpLink::bind(addr.parse().unwrap(), Default::default()).unwrap();
            Engine::new(Config::default(), MrTable::default(), Box::new(link))
        };
        let shared = Shared::new(
            udp("127.0.0.1:0"),
            Progress::Thread,
            Duration::from_micros(50),
        )
        .unwrap();
        assert!(
            !shared.sleeps_free(false),
            "nothing known of the application yet"
        );
        shared.note_app_away(Duration::from_millis(10));
        assert!(shared.sleeps_free(false), "back after a 10 ms pause");
        assert!(!shared.sleeps_free(true), "the link holds datagrams");
        shared.note_app_away(Duration::from_micros(30));
        assert!(
            !shared.sleeps_free(false),
            "an application back at once must keep the engine held"
        );
        // `assist` measures it: from the poll that took completions to the next
        // empty one (3 ms or more here).
        shared.app_took_completions();
        std::thread::sleep(Duration::from_millis(3));
        let mut out = Vec::new();
        shared.assist(NO_CQ.idx, NO_CQ.id, &mut out, 8);
        assert!(shared.sleeps_free(false), "back 3 ms after its completions");
        let ((a, _), _) = connected();
        let sim = Shared::new(a, Progress::Thread, Duration::from_micros(50)).unwrap();
        sim.note_app_away(Duration::from_millis(10));
        assert!(!sim.sleeps_free(false), "a link without a descriptor");
    }

    /// The idle engine thread watches for the next poll of an application that polled
    /// a moment ago only where its sleep would hold the engine
    /// ([`Shared::watches_for_app`]): for a sparse application on udp it sleeps
    /// without the engine at once, and the watch would only add a wake-up at its
    /// timeout (one a round trip of a ping-pong with pauses). A dense one, a link
    /// holding datagrams, a link without a descriptor: the watch stays.
    #[test]
    fn the_watch_for_the_next_poll_is_skipped_only_where_the_sleep_would_be_free() {
        let link =
            weft_link::udp::UdpLink::bind("127.0.0.1:0".parse().unwrap(), Default::default())
                .unwrap();
        let shared = Shared::new(
            Engine::new(Config::default(), MrTable::default(), Box::new(link)),
            Progress::Thread,
            Duration::from_micros(50),
        )
        .unwrap();
        let mut out = Vec::new();
        shared.assist(NO_CQ.idx, NO_CQ.id, &mut out, 8);
        // The application's last poll was this long ago: just now.
        let polled_just_now = Duration::ZERO;
        assert!(
            shared.watches_for_app(polled_just_now, false),
            "an application that is not known sparse polled a moment ago"
        );
        shared.note_app_away(Duration::from_millis(10));
        assert!(
            shared.sleeps_free(false),
            "sparse on udp: the sleep is free"
        );
        assert!(
            !shared.watches_for_app(polled_just_now, false),
            "a sparse application on udp: the free sleep, no watch first"
        );
        assert!(
            shared.watches_for_app(polled_just_now, true),
            "the link holds datagrams: the sleep would hold the engine"
        );
        assert!(!shared.watches_for_app(APP_AWAY, true), "away too long");
        shared.note_app_away(Duration::from_micros(30));
        assert!(
            shared.watches_for_app(polled_just_now, false),
            "back at once: dense"
        );
        let ((a, _), _) = connected();
        let sim = Shared::new(a, Progress::Thread, Duration::from_micros(50)).unwrap();
        sim.assist(NO_CQ.idx, NO_CQ.id, &mut out, 8);
        sim.note_app_away(Duration::from_millis(10));
        assert!(
            sim.watches_for_app(polled_just_now, false),
            "a link without a descriptor sleeps holding the engine"
        );
    }
}
