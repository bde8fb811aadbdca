//! The endpoint: every QP of one host keyed by QP number, shared receive queues, the
//! completion queue, counters, and the quinn-style entry points.
//!
//! Inputs: [`Endpoint::handle_packet`], [`Endpoint::post_send`],
//! [`Endpoint::post_recv`], [`Endpoint::modify_qp`], [`Endpoint::handle_timeout`].
//! After any of them, call [`Endpoint::poll_transmit`] until it returns `None`,
//! [`Endpoint::poll_completion`] until `None`, and re-read [`Endpoint::poll_timeout`].
//!
//! The cost of a call does not grow with the number of idle QPs. The endpoint keeps
//! every armed timer in a set ordered by deadline, and a queue of the QPs that may
//! have a packet to send (each QP an input touched since it last had nothing). So
//! [`Endpoint::poll_timeout`] reads the set's first entry, [`Endpoint::handle_timeout`]
//! visits only due QPs, and [`Endpoint::poll_transmit`] only queued ones
//! ([`Stats::qp_visits`] counts the visits).
//!
//! Timers are cancelled lazily. A QP's entry in the set moves only when its deadline
//! comes *earlier*; an ACK that stops or pushes back the retransmission timer leaves
//! the entry where it was, and when that time comes [`Endpoint::handle_timeout`] finds
//! the QP not due and files it under its real deadline (or none). A message costs no
//! set update on the common path (each one used to cost an insert and a remove), and
//! [`Endpoint::poll_timeout`] stays a safe lower bound: never later than a real
//! deadline, sometimes earlier.

use crate::cc::{CongestionControl, CongestionState};
use crate::ctx::{check_sges, gather, Ctx, QpCommon, Srq};
use crate::memory::{Access, Memory};
use crate::qp::{apply_attr, check_transition, ModifyError, QpAttr, QpAttrs, QpState, QpType};
use crate::requester::{Emitted, Fault, Requester};
use crate::responder::{Responder, RingAnswer};
use crate::ring::RingTag;
use crate::slots::Slots;
use crate::status::local_status;
use crate::time::Instant;
use crate::wr::{
    Completion, CompletionSink, PostWr, RecvWr, SendWr, SgList, WcOpcode, WcStatus, WrOp, MAX_SGE,
};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use weft_wire::roce::{
    opcode::len, IbPacket, IbPacketRepr, IcrcPath, Ipv4IdDeltas, Opcode, Operation,
};

/// Bytes a packet may need beyond its payload: BTH, the largest extension-header set
/// (AtomicETH, 28 bytes), pad and ICRC. `poll_transmit` needs `path_mtu + MAX_OVERHEAD`.
pub const MAX_OVERHEAD: usize = len::BTH + len::ATOMIC_ETH + 3 + len::ICRC;

/// Endpoint-wide settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Verify the ICRC of every received packet (drop and count on mismatch).
    pub check_icrc: bool,
    /// Compute the ICRC of every sent packet. A link whose two ends agreed to carry
    /// no ICRC (weft's shm link) turns this off; the four bytes are then unspecified.
    pub write_icrc: bool,
    /// IPv4 identifications a received packet's ICRC may have been computed for
    /// (0 up to this, exclusive). 1: only 0, what a sender that never segments
    /// writes. A link whose peers send UDP GSO (consecutive identifications, taken
    /// whole by `UDP_GRO`) needs [`weft_wire::roce::GSO_MAX_SEGMENTS`]; each one accepted
    /// beyond the first makes a corrupted packet a little likelier to pass (64 in
    /// all: 2^-26 instead of 2^-32).
    pub icrc_ids: u16,
    /// Accept an ICRC computed for *any* IPv4 identification (off by default). For
    /// peers that number their packets, as Linux's rdma_rxe does, when the receiver
    /// cannot see the IP header (a UDP socket): the identification is solved from the
    /// ICRC ([`IcrcPath::check_any_id`](weft_wire::roce::IcrcPath::check_any_id)), every
    /// other covered byte is still checked, and a corrupted packet passes with
    /// probability 2^-16 instead of 2^-32. Such packets count in
    /// [`Stats::icrc_segment_id`]. Overrides `icrc_ids`.
    pub icrc_any_ipv4_id: bool,
    /// Longest message accepted, in bytes (IBTA allows 2^31).
    pub max_msg_len: u64,
    /// The requester asks for an ACK at least every this many PSNs.
    pub ack_req_interval: u32,
    /// Longest a responder holds the ACK of request packets that did not ask for one
    /// (AckReq clear), in microseconds: it acknowledges them at the latest this long
    /// after the first of them arrived, sooner when a later packet asks (one ACK then
    /// covers them all, IBTA Vol 1 §9.7). 0: every SEND or WRITE packet is acknowledged
    /// at once, asked or not. This is the responder's half; a peer's requester learns
    /// it as [`QpAttrs::peer_ack_delay_us`](crate::QpAttrs::peer_ack_delay_us) (weft's
    /// connection manager carries it in the handshake). A requester leaves AckReq
    /// clear on the last packet of an unsignaled SEND or WRITE (nobody waits for its
    /// completion) only when the peer's bound is known and non-zero, its send queue is
    /// less than half full, and its local ACK timeout is infinite or at least
    /// [`ACK_DELAY_MARGIN`] times that bound, so the delayed ACK never looks like a
    /// loss. A ping-pong of unsignaled SENDs then costs one ACK per `ack_req_interval`
    /// messages or per this delay, not one per message.
    pub ack_delay_us: u64,
    /// A delayed ACK owed after a quiet stretch leaves right behind the next request
    /// packet of its QP (most likely the reply), in the same transmit, instead of at
    /// its deadline (off by default). "After a quiet stretch": the request that began
    /// owing it arrived at least [`Config::ack_delay_us`] after the QP's previous
    /// accepted request (or was its first), a sparse peer's request; requests closer
    /// together (a dense ping-pong, a stream) keep coalescing as before, the ACK
    /// waiting to cover the next ones too. Only for a link where a burst of sends is
    /// one arrival at the peer (weft's shm link, whose burst is one ring publish):
    /// there the reply and its request's ACK wake a sleeping peer once instead of
    /// twice. Over udp each datagram of a burst is its own arrival, the peer woken by
    /// the reply was woken again by the ACK, and the idle CPU per sparse round trip
    /// did not drop (docs/results/study-ack-20261202s31). Counted in
    /// [`Stats::acks_with_reply`]. The verbs engine sets it from its link
    /// (`DatagramLink::sends_in_memory`), whatever the configuration it was given says.
    pub ack_rides_reply: bool,
    /// Largest inline payload.
    pub max_inline: usize,
    /// Seed of the QP-number generator (QPNs must be unguessable; the caller supplies
    /// the randomness, the transport has none of its own).
    pub qpn_seed: u64,
    /// Bytes a QP may send per scheduling round before the next QP's turn.
    pub drr_quantum: u32,
    /// Smallest WRITE sent by reference on a QP that allows it
    /// ([`Endpoint::set_by_reference`], [`crate::byref`]); never one of a path MTU or
    /// less. `u64::MAX`: never.
    pub by_reference_min: u64,
    /// Congestion control of RC QPs ([`crate::cc`]): off (a fixed window of
    /// `max_inflight` PSNs, the default) or a delay-based window.
    pub congestion: CongestionControl,
}

/// How many delayed-ACK bounds ([`Config::ack_delay_us`]) a requester's local ACK
/// timeout must span before it lets a responder delay the ACK of its messages.
pub const ACK_DELAY_MARGIN: u64 = 8;

impl Default for Config {
    fn default() -> Config {
        Config {
            check_icrc: true,
            write_icrc: true,
            icrc_ids: 1,
            icrc_any_ipv4_id: false,
            max_msg_len: 1 << 31,
            ack_req_interval: 16,
            ack_delay_us: 64,
            ack_rides_reply: false,
            max_inline: 256,
            qpn_seed: 0x5eed,
            drr_quantum: 4096,
            by_reference_min: u64::MAX,
            congestion: CongestionControl::Off,
        }
    }
}

/// Counters. Every dropped packet lands in exactly one of the drop counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct Stats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Dropped: not a well-formed IB packet.
    pub malformed: u64,
    /// Dropped: ICRC mismatch.
    pub icrc_errors: u64,
    /// Packets whose ICRC matched a non-zero IPv4 identification: later segments of
    /// a peer's UDP GSO send, received whole, or with [`Config::icrc_any_ipv4_id`] any
    /// packet of a peer that numbers them (accepted; see
    /// [`IcrcPath::check_id`](weft_wire::roce::IcrcPath::check_id)).
    pub icrc_segment_id: u64,
    /// Dropped: no QP with that number.
    pub unknown_qpn: u64,
    /// Dropped: opcode of another transport than the QP's.
    pub wrong_transport: u64,
    /// Dropped: partition key mismatch.
    pub pkey_mismatch: u64,
    /// Dropped: the QP's state does not accept it.
    pub dropped_state: u64,
    /// Ring mode: descriptors discarded while an RNR was outstanding (go-back-N;
    /// [`Endpoint::ring_request`]).
    pub ring_discarded: u64,
    /// Ring mode: descriptors for a QP that does not take them (not RC, or not in
    /// ring mode: [`Endpoint::set_ring_mode`]).
    pub ring_refused: u64,
    /// Ring mode, the requester: descriptors written ([`crate::ring`]; also counted in
    /// `tx_packets`).
    pub ring_sent: u64,
    /// Ring mode, the requester: releases, losses or ERRORs that named no descriptor
    /// in flight (sent before an RNR sent the requester back, or forged).
    pub ring_stale: u64,
    /// Dropped: UD Q_Key mismatch.
    pub qkey_mismatch: u64,
    /// Dropped: UD datagram with no receive WQE posted.
    pub ud_no_recv: u64,
    /// UC packets discarded with their message.
    pub uc_discarded: u64,
    /// RoCEv2 congestion notifications (counted only: the congestion window,
    /// [`crate::cc`], reacts to delay and loss, not to CNPs).
    pub cnp_received: u64,
    /// RTT samples the congestion window took ([`crate::cc`]; 0 when it is off).
    pub cc_rtt_samples: u64,
    /// Times a congestion window shrank (delay over the target, a loss, a timeout).
    pub cc_decreases: u64,
    pub out_of_sequence: u64,
    /// Selective mode: WRITE packets placed in memory ahead of ePSN.
    pub placed_out_of_order: u64,
    pub duplicate_requests: u64,
    pub duplicate_responses: u64,
    pub out_of_order_responses: u64,
    pub ghost_responses: u64,
    pub bad_responses: u64,
    pub unexpected_opcode: u64,
    pub acks_sent: u64,
    /// Delayed ACKs queued right behind a request packet of their QP, to leave with
    /// it ([`Config::ack_rides_reply`]): a sparse peer's request acknowledged by the
    /// reply's transmit, not at the ACK's deadline.
    pub acks_with_reply: u64,
    pub naks_sent: u64,
    pub seq_naks_sent: u64,
    pub rnr_naks_sent: u64,
    pub fatal_naks_sent: u64,
    pub read_responses_sent: u64,
    pub seq_naks_received: u64,
    pub rnr_naks_received: u64,
    pub fatal_naks_received: u64,
    pub sacks_received: u64,
    pub implicit_naks: u64,
    pub timeouts: u64,
    pub retransmitted_packets: u64,
    pub messages_completed: u64,
    pub bytes_completed: u64,
    /// WRITEs sent by reference ([`crate::byref`]), counted once per message.
    pub by_reference_sent: u64,
    /// By-reference WRITEs whose payload was pulled into memory.
    pub by_reference_received: u64,
    /// Bytes those pulls moved.
    pub by_reference_bytes: u64,
    /// By-reference WRITEs whose pull failed (answered with a Remote Access NAK).
    pub by_reference_failed: u64,
    /// QPs [`Endpoint::poll_transmit`] and [`Endpoint::handle_timeout`] looked at: a
    /// work counter, not a drop. A call with no QP to serve adds nothing, however many
    /// QPs exist.
    pub qp_visits: u64,
    /// Request packets taken by the receive path of the common shape (an RC SEND
    /// Only or WRITE Only in order, see `Endpoint::handle_request_only`): a work
    /// counter, not a drop; the rest of `rx_packets` took the general path.
    pub rx_lean: u64,
}

/// One packet written by [`Endpoint::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Bytes written at the start of the buffer (the UDP payload).
    pub len: usize,
    /// The IP/UDP path to send it on (source is this host).
    pub path: IcrcPath,
    /// The sending QP.
    pub qpn: u32,
    /// The sending QP's slot in the endpoint's table ([`Endpoint::send_queue_at`]): a
    /// driver that keeps per-QP state for the packets it is handed (the verbs engine's
    /// count of recently transmitting QPs) indexes it by slot, with no hash of `qpn`.
    /// A slot is reused after its QP is destroyed.
    pub slot: u32,
    /// Bytes the packet moves: `len`, except for a by-reference WRITE
    /// ([`crate::byref`]), which moves its whole message (the peer pulls it). The
    /// deficit round robin charges this, so one by-reference packet of 4 MiB counts
    /// as the 4 MiB it costs; a driver budgeting a pass in bytes should count it too.
    pub moves: usize,
    /// Set when the bytes are a shm ring-mode descriptor, not a RoCEv2 packet
    /// ([`crate::ring`]): the driver sends them alone, as one item its link tracks
    /// with this tag, and hands the item's release back
    /// ([`Endpoint::ring_released`]).
    pub ring: Option<RingTag>,
}

/// The buffers a driver lends [`Endpoint::poll_transmit_burst`], one packet each.
pub trait TxBuffers {
    /// The buffer for the next packet (at least `path_mtu + MAX_OVERHEAD` bytes), or
    /// `None` to end the burst. Until [`TxBuffers::written`] is called, a second call
    /// must hand out the same buffer: a QP with nothing to send leaves it unwritten.
    fn next_buffer(&mut self) -> Option<&mut [u8]>;

    /// The packet just written at the start of the buffer last handed out; false
    /// ends the burst.
    fn written(&mut self, t: Transmit) -> bool;
}

/// One buffer, one packet: [`Endpoint::poll_transmit`] as a burst.
struct OneBuffer<'a> {
    buf: Option<&'a mut [u8]>,
    sent: Option<Transmit>,
}

impl TxBuffers for OneBuffer<'_> {
    fn next_buffer(&mut self) -> Option<&mut [u8]> {
        self.buf.as_deref_mut()
    }

    fn written(&mut self, t: Transmit) -> bool {
        self.buf = None;
        self.sent = Some(t);
        false
    }
}

/// What a QP is created with (`ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInit {
    /// Transport service.
    pub qp_type: QpType,
    /// Protection domain.
    pub pd: u32,
    /// Send queue depth.
    pub max_send_wr: usize,
    /// Receive queue depth (ignored with an SRQ).
    pub max_recv_wr: usize,
    /// Shared receive queue to take receives from.
    pub srq: Option<u32>,
}

/// Why a post was refused synchronously (the `errno` of `ibv_post_send`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostError {
    /// No QP (or SRQ) with this number.
    UnknownQp(u32),
    /// The QP's state does not accept this post (RESET, INIT/RTR for sends).
    InvalidState(QpState),
    /// The queue is full.
    QueueFull,
    /// More than [`MAX_SGE`] entries.
    TooManySge,
    /// Inline data longer than `Config::max_inline`.
    InlineTooLarge,
    /// The operation does not exist on this QP type (READ on UC, WRITE on UD...).
    UnsupportedOp,
    /// A UD send without a destination.
    MissingUdDest,
    /// The QP uses an SRQ; post receives there.
    UsesSrq,
}

impl core::fmt::Display for PostError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for PostError {}

#[derive(Debug)]
struct Qp {
    common: QpCommon,
    init: QpInit,
    req: Requester,
    resp: Responder,
    rq: VecDeque<RecvWr>,
    deficit: i64,
    /// The deadline of this QP's entry in the endpoint's timer set: at or before its
    /// requester's real deadline (see the module doc: cancelling is lazy).
    armed: Option<Instant>,
    /// True while the QP is in the endpoint's transmit queue.
    queued: bool,
    /// A plain ACK of this QP let a request packet go ahead of it; the next packet of
    /// the QP is the ACK (see [`Qp::poll_transmit`]).
    ack_yielded: bool,
    /// True while the QP is in the endpoint's queue of owed ACKs and NAKs.
    ack_queued: bool,
    /// The QP's slot in the endpoint's table: what the transmit and ACK queues hold.
    slot: u32,
}

/// What the endpoint schedules QPs by: armed timers ordered by deadline, the QPs
/// that may have a packet to send, in deficit-round-robin order, and the QPs whose
/// responder owes an ACK or NAK.
///
/// Owed ACKs and NAKs go out ahead of the round robin. They carry no payload, so
/// they cost the link next to nothing, and a peer's retransmission timer runs
/// while one waits. Behind another QP's turn an ACK could wait without bound: with
/// a quantum no QP uses up (FIFO), a bulk transfer whose window keeps opening holds
/// the turn for as long as it has data, and the peer's requester retransmits until
/// its retry count is spent (`RetryExcErr`, seen in the study's Fig. 5 FIFO point).
/// An RNIC's responder likewise answers from its own pipeline, not from the send
/// scheduler's queues.
#[derive(Debug, Default)]
struct Sched {
    timers: BTreeSet<(Instant, u32)>,
    /// The transmit queue, by slot ([`Qp::slot`]).
    ready: VecDeque<u32>,
    /// The QPs that owe an ACK or NAK, by slot.
    acks: VecDeque<u32>,
    /// [`Endpoint::handle_timeout`]'s due QPs, kept for the next call (empty between).
    due: Vec<u32>,
}

/// Post send work request `posted` on `qp` (the body of [`Endpoint::post_send`] and
/// [`SendQueue::post`]): the checks `ibv_post_send` makes, the inline gather, the push
/// onto the requester's queue and the QP's place in the transmit queue. The request is
/// read where it lies, not moved; without an inline payload the WQE keeps its gather
/// list, taken from an owned request and copied from a borrowed one ([`PostWr`],
/// [`SendQueue::post_from`]).
// Always inlined: with two instances (`DIRECT`, ring mode's doorbell) the compiler
// put it out of line, and a post paid the call and `Requester::push`'s with it
// (~120 instructions a streamed message, callgrind).
#[inline(always)]
fn post_one<M: Memory, W: PostWr, const DIRECT: bool>(
    ctx: &mut Ctx<'_, M>,
    qp: &mut Qp,
    sched: &mut Sched,
    posted: &mut W,
    inline_src: Option<&[u8]>,
) -> Result<(), PostError> {
    let wr = posted.wr();
    // A payload the caller gathered makes the request inline and its gather list
    // moot; the request itself is not changed, so a refused one is left as it came.
    let is_inline = wr.inline || inline_src.is_some();
    let q = &qp.common;
    if matches!(q.state, QpState::Reset | QpState::Init | QpState::Rtr) {
        return Err(PostError::InvalidState(q.state));
    }
    if inline_src.is_none() && wr.sg_list.len() > MAX_SGE {
        return Err(PostError::TooManySge);
    }
    if qp.req.wqes.len() >= qp.init.max_send_wr {
        return Err(PostError::QueueFull);
    }
    let supported = match q.qp_type {
        QpType::Rc => true,
        QpType::Uc => matches!(wr.op, WrOp::Send { .. } | WrOp::Write { .. }),
        QpType::Ud => matches!(wr.op, WrOp::Send { .. }),
    };
    if !supported {
        return Err(PostError::UnsupportedOp);
    }
    if q.qp_type == QpType::Ud && wr.ud.is_none() {
        return Err(PostError::MissingUdDest);
    }
    let len = match inline_src {
        Some(d) => d.len() as u64,
        None if wr.op.is_atomic() => 8,
        None => wr.sg_len(),
    };
    if is_inline && (wr.op.is_read_or_atomic() || len > ctx.config.max_inline as u64) {
        return Err(PostError::InlineTooLarge);
    }
    // Checks a NIC makes when it processes the WQE; reported as completions.
    let mut pre_fault = None;
    if len > ctx.config.max_msg_len || (wr.op.is_atomic() && wr.sg_len() != 8) {
        pre_fault = Some(WcStatus::LocLenErr);
    }
    let need = if wr.op.is_read_or_atomic() {
        Access::LOCAL_WRITE
    } else {
        Access::NONE
    };
    // An inline payload is gathered now (on the stack when it is small), and the
    // requester keeps it in its inline ring. The stack buffer is filled only on
    // that path: an ordinary post does not pay for zeroing it.
    let mut small: [u8; 256];
    let mut large = Vec::new();
    let mut inline = inline_src;
    if pre_fault.is_none() && inline_src.is_none() {
        if let Err(e) = check_sges(&*ctx.mem, q.pd, &wr.sg_list, need) {
            pre_fault = Some(local_status(e));
        } else if wr.inline {
            let n = len as usize;
            let out = if n <= 256 {
                small = [0u8; 256];
                &mut small[..n]
            } else {
                large.resize(n, 0);
                &mut large[..]
            };
            match gather(&*ctx.mem, q.pd, &wr.sg_list, 0, out) {
                Ok(()) => inline = Some(out),
                Err(e) => pre_fault = Some(local_status(e)),
            }
        }
    }
    let ud = if q.qp_type == QpType::Ud { wr.ud } else { None };
    // The gather list goes to the WQE only without an inline payload (taken from an
    // owned request, copied from a borrowed one).
    let sg_list = if inline.is_some() {
        SgList::new()
    } else {
        posted.take_sg_list()
    };
    qp.req
        .push(posted.wr(), sg_list, inline, ud, len, pre_fault);
    if matches!(q.state, QpState::Err | QpState::Sqe) {
        qp.flush_sends(ctx);
        sched.touched(qp);
    } else if !DIRECT {
        // (A direct post, `SendQueue::post_ring`, files the QP itself if its output
        // did not leave at once.)
        sched.posted(qp);
    }
    Ok(())
}

/// A QP's send queue, borrowed from its [`Endpoint`] for a batch of posts
/// ([`Endpoint::send_queue`]): each [`SendQueue::post`] is what
/// [`Endpoint::post_send`] does, without the QP lookup. A poster with many requests
/// for one QP (the doorbell path of `ibv_post_send` with a list) pays the lookup once.
pub struct SendQueue<'a, M: Memory> {
    ctx: Ctx<'a, M>,
    qp: &'a mut Qp,
    sched: &'a mut Sched,
}

impl<M: Memory> std::fmt::Debug for SendQueue<'_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SendQueue")
            .field("qpn", &self.qp.common.qpn)
            .finish_non_exhaustive()
    }
}

impl<M: Memory> SendQueue<'_, M> {
    /// Free slots in the send queue ([`Endpoint::sq_room`]).
    pub fn room(&self) -> usize {
        self.qp
            .init
            .max_send_wr
            .saturating_sub(self.qp.req.wqes.len())
    }

    /// The endpoint's memory (an inline payload's gather reads it).
    pub fn mem(&self) -> &M {
        self.ctx.mem
    }

    /// The endpoint's memory, to change (the verbs engine's inline gather keeps the
    /// region of its last key in it).
    pub fn mem_mut(&mut self) -> &mut M {
        self.ctx.mem
    }

    /// The endpoint's configuration.
    pub fn config(&self) -> &Config {
        self.ctx.config
    }

    /// The QP's attributes ([`Endpoint::qp_attrs`]).
    pub fn attrs(&self) -> &QpAttrs {
        self.qp.common.attrs()
    }

    /// Whether the QP may send large WRITEs by reference ([`Endpoint::by_reference`]).
    pub fn by_reference(&self) -> bool {
        self.qp.common.by_reference
    }

    /// Let the QP send large WRITEs by reference, or not
    /// ([`Endpoint::set_by_reference`]).
    pub fn set_by_reference(&mut self, on: bool) {
        self.qp.common.by_reference = on;
    }

    /// Post a send work request ([`Endpoint::post_send`]).
    #[inline]
    pub fn post(&mut self, mut wr: SendWr) -> Result<(), PostError> {
        post_one::<M, SendWr, false>(&mut self.ctx, self.qp, self.sched, &mut wr, None)
    }

    /// Post an inline send whose payload the caller gathered
    /// ([`Endpoint::post_send_inline`]).
    #[inline]
    pub fn post_inline(&mut self, mut wr: SendWr, data: &[u8]) -> Result<(), PostError> {
        post_one::<M, SendWr, false>(&mut self.ctx, self.qp, self.sched, &mut wr, Some(data))
    }

    /// [`SendQueue::post`] (`inline` `None`) or [`SendQueue::post_inline`] of the
    /// request `wr` points at, without moving it: its fields are read in place. An
    /// owned request posted without an inline payload gives its gather list to the WQE
    /// (`wr.sg_list` is left empty); one posted with an inline payload (given here, or
    /// gathered from its list), or refused, is left as it was. A borrowed request
    /// (`&mut &SendWr`, [`PostWr`]) is never changed: its list is copied. A poster that
    /// holds requests in a list or an iterator's slot saves the moves of ~150 bytes
    /// each that the by-value calls cost; on a stream of small SENDs such a move, read
    /// back right after the application wrote the request field by field, was a
    /// store-forwarding stall on the posting thread (`perf`, docs/results/verbs.md).
    #[inline]
    pub fn post_from<W: PostWr>(
        &mut self,
        wr: &mut W,
        inline: Option<&[u8]>,
    ) -> Result<(), PostError> {
        post_one::<M, W, false>(&mut self.ctx, self.qp, self.sched, wr, inline)
    }

    /// Whether the QP is in the shm ring mode ([`Endpoint::set_ring_mode`]).
    #[inline]
    pub fn ring_mode(&self) -> bool {
        self.qp.common.ring_mode
    }

    /// Ring mode's doorbell ([`crate::ring`]): [`SendQueue::post_from`], and when the
    /// request is the QP's next output and goes as a descriptor (a SEND or WRITE of up
    /// to one MTU on a ring-mode QP in RTS, everything before it sent, the window and
    /// the ordering rules letting it start), its descriptor written into `buf` at once:
    /// `Ok(Some((len, tag)))`, which the driver sends as one tracked item, or queues
    /// behind its own unsent descriptors. No turn of the transmit queue, no
    /// [`Transmit`]: what the prototype of the mode measured as most of its gain
    /// (docs/results/verbs-ring-proto-20261202s33). `Ok(None)`: posted, and its output
    /// goes the usual way ([`Endpoint::poll_transmit`]). `buf` must hold an MTU and
    /// [`MAX_OVERHEAD`].
    ///
    /// `now` is the driver's clock: the descriptor's local ACK timer starts from it
    /// (a send queue's own clock is [`Instant::ZERO`]: the plain posts start no timer).
    pub fn post_ring<W: PostWr>(
        &mut self,
        now: Instant,
        wr: &mut W,
        inline: Option<&[u8]>,
        buf: &mut [u8],
    ) -> Result<Option<(usize, RingTag)>, PostError> {
        self.ctx.now = now;
        let q = &self.qp.common;
        let direct = q.ring_mode
            && q.state == QpState::Rts
            && self.qp.req.nothing_to_send()
            && buf.len() >= q.mtu() as usize + MAX_OVERHEAD;
        if !direct {
            return post_one::<M, W, false>(&mut self.ctx, self.qp, self.sched, wr, inline)
                .map(|()| None);
        }
        post_one::<M, W, true>(&mut self.ctx, self.qp, self.sched, wr, inline)?;
        let qp = &mut *self.qp;
        if qp.common.state != QpState::Rts {
            // The post found the QP in error and flushed it (and filed it).
            return Ok(None);
        }
        match qp.req.start_ring_now(&qp.common, &mut self.ctx, buf) {
            Ok(Some((e, tag))) => {
                self.ctx.stats.tx_packets += 1;
                self.ctx.stats.tx_bytes += e.len as u64;
                self.sched.sync_timer(qp);
                Ok(Some((e.len, tag)))
            }
            Ok(None) => {
                self.sched.posted(qp);
                Ok(None)
            }
            Err(f) => {
                qp.fault(&mut self.ctx, f);
                self.sched.touched(qp);
                Ok(None)
            }
        }
    }
}

impl Sched {
    /// The QP at the front of the transmit queue has nothing more to send now: it
    /// leaves the queue, its deficit spent.
    fn retire_front(&mut self, qp: &mut Qp) {
        qp.deficit = 0;
        qp.queued = false;
        self.ready.pop_front();
    }

    /// After an input touched `qp`: its timer entry follows its requester's deadline,
    /// and it joins the transmit queue if it may have a packet to send (a response
    /// queued, or a request packet the requester may send; `poll_transmit` finds out
    /// which). Work requests that are all sent and only wait for their ACK do not
    /// queue it: every packet of a ping-pong touched a QP whose last message was still
    /// unacknowledged, and the turn that followed, before the pass's completions, found
    /// nothing (~500 instructions a one-way; callgrind, `msg_rate … lat`). Whatever
    /// lets it send again is an input that comes back here (an ACK that opens the
    /// window, a NAK, a timer, a post). Inlined at its callers (a received packet's,
    /// a post's flush): out of line it was a call per packet with the QP's timer
    /// bookkeeping behind it (~14 instructions a streamed message, ~20 a ping-pong
    /// round, callgrind, `msg_rate`).
    #[inline]
    fn touched(&mut self, qp: &mut Qp) {
        self.sync_timer(qp);
        if !qp.queued && !qp.nothing_to_send() {
            qp.queued = true;
            self.ready.push_back(qp.slot);
        }
        if !qp.ack_queued && qp.resp.ack_first() {
            qp.ack_queued = true;
            self.acks.push_back(qp.slot);
        }
    }

    /// After a post to `qp`'s send queue (not in error): the QP joins the transmit
    /// queue. A post moves no timer (the requester arms its timer when it transmits)
    /// and gives the responder nothing to send, so the rest of
    /// [`Sched::touched`] would find nothing to do.
    #[inline]
    fn posted(&mut self, qp: &mut Qp) {
        if !qp.queued {
            qp.queued = true;
            self.ready.push_back(qp.slot);
        }
    }

    /// File `qp` under its requester's deadline if that is earlier than its entry (or
    /// it has none). A later deadline, or none, leaves the entry: it fires early and
    /// [`Endpoint::handle_timeout`] re-files the QP then.
    #[inline]
    fn sync_timer(&mut self, qp: &mut Qp) {
        if let Some(d) = qp.next_deadline() {
            if qp.armed.is_none_or(|a| d < a) {
                self.refile(qp, d);
            }
        }
    }

    /// Move `qp`'s entry to `d` (out of line: the per-packet check above is the hot
    /// part, and a set update is rare once a QP's entry stands).
    #[inline(never)]
    fn refile(&mut self, qp: &mut Qp, d: Instant) {
        if let Some(a) = qp.armed {
            self.timers.remove(&(a, qp.common.qpn));
        }
        self.timers.insert((d, qp.common.qpn));
        qp.armed = Some(d);
    }

    /// Queue the delayed ACK `qp`'s responder owes now, ahead of its deadline, and
    /// take its timer entry out; false when it owes none. The entry stood for the ACK
    /// (or earlier): out with it, so that a driver sleeping until the next timer does
    /// not wake for it. [`Sched::touched`] files the QP again under its requester's
    /// deadline, if it has one, and queues the ACK. Both ways an owed ACK leaves
    /// early go through here: [`Endpoint::ack_owed_now`] (every QP's, for a driver
    /// about to sleep) and [`Qp::ack_rides_along`] (one QP's, behind its request).
    fn ack_now(&mut self, qp: &mut Qp) -> bool {
        if qp.resp.ack_due().is_none() {
            return false;
        }
        qp.resp.send_owed_ack();
        if let Some(a) = qp.armed.take() {
            self.timers.remove(&(a, qp.common.qpn));
        }
        self.touched(qp);
        true
    }
}

/// A packet `qp` wrote (`len`, `moves`): charged to its deficit and counted, and
/// given its path.
#[inline]
fn charge(qp: &mut Qp, stats: &mut Stats, e: Emitted) -> Transmit {
    let Emitted { len, moves } = e;
    let ring = qp.req.take_ring_tag();
    qp.deficit -= i64::try_from(moves).unwrap_or(i64::MAX);
    stats.tx_packets += 1;
    stats.tx_bytes += len as u64;
    // Read here, once, into the packet's `Transmit` (`Qp::poll_transmit`): a UD
    // request's destination, else the connected path, which a packet of any other QP
    // needed to be written at all (the requester refuses a WQE without it, the
    // responder writes nothing), so the fallback is never taken.
    debug_assert!(
        qp.common.qp_type == QpType::Ud || qp.common.attrs().path.is_some(),
        "a connected QP wrote a packet without a path"
    );
    let path = match (qp.common.qp_type, &qp.common.attrs().path) {
        (QpType::Ud, _) | (_, None) => *qp.req.ud_sent(),
        (_, Some(p)) => *p,
    };
    Transmit {
        len,
        path,
        qpn: qp.common.qpn,
        slot: qp.slot,
        moves,
        ring,
    }
}

/// The start of a turn of the QP in slot `slot`, at the front of the transmit queue,
/// with a buffer of `buf_len` bytes to write into: the QP, its deficit topped up by a
/// quantum if it was spent. `None` when the turn passes: the QP is gone (off the
/// queue), or the buffer is too small for its MTU, or it is still in debt with
/// another QP queued (either moves it to the back). The turns of
/// [`Endpoint::poll_transmit_burst`] and [`Endpoint::poll_transmit_alone`] both start
/// here, so a lone QP's direct turn is the burst's by construction.
#[inline(always)]
fn start_turn<'q, M>(
    ctx: &mut Ctx<'_, M>,
    qps: &'q mut QpMap,
    sched: &mut Sched,
    slot: u32,
    buf_len: usize,
    quantum: i64,
) -> Option<&'q mut Qp> {
    ctx.stats.qp_visits += 1;
    let Some(qp) = qps.at_mut(slot) else {
        sched.ready.pop_front();
        return None;
    };
    if buf_len < qp.common.mtu() as usize + MAX_OVERHEAD {
        sched.ready.rotate_left(1);
        return None;
    }
    if qp.deficit <= 0 {
        qp.deficit += quantum;
        // Still in debt (a by-reference chunk moves many quanta' worth): another
        // QP's turn, while there is another QP to take it.
        if qp.deficit <= 0 && sched.ready.len() > 1 {
            sched.ready.rotate_left(1);
            return None;
        }
    }
    Some(qp)
}

/// The next packet of `qp`, the QP whose turn it is (at the front of the transmit
/// queue), written into `buf` (its length and moves, for [`charge`]); its timer
/// follows. A QP that writes nothing leaves the queue ([`Sched::retire_front`]).
/// The caller charges the packet: charged here (an `Option<Transmit>` returned),
/// the burst cost ~7 instructions more a streamed message, and with the `None` case
/// tested apart from the return (`if sent.is_none()`), one more (callgrind,
/// `msg_rate`).
#[inline(always)]
fn turn_packet<M: Memory>(
    ctx: &mut Ctx<'_, M>,
    sched: &mut Sched,
    qp: &mut Qp,
    buf: &mut [u8],
) -> Option<Emitted> {
    let sent = qp.poll_transmit(ctx, sched, buf);
    sched.sync_timer(qp);
    let Some(packet) = sent else {
        sched.retire_front(qp);
        return None;
    };
    Some(packet)
}

/// The QP table. QPNs are drawn by this endpoint, never chosen by a peer, so a
/// multiply-shift hash serves ([`crate::fastmap`]); a hash index keeps each lookup
/// by number (several per message) independent of the number of QPs, where a
/// B-tree's grew with it. The QPs sit in slots ([`Slots`]): the transmit and ACK
/// queues name them by slot, and a caller that keeps a QP's slot
/// ([`Endpoint::qp_slot`]) reaches it without the hash probe.
type QpMap = Slots<Qp>;

/// All QPs of one host.
#[derive(Debug)]
pub struct Endpoint<M, S = VecDeque<Completion>> {
    config: Config,
    mem: M,
    qps: QpMap,
    /// The slot of the QP the last received packet went to: where the next packet's
    /// QP is looked for first (a burst mostly comes from one connection), checked by
    /// its number ([`Slots::get_mut_at`]).
    rx_slot: u32,
    sched: Sched,
    /// When a transmit last found another QP waiting to send beside the one it
    /// served: while that is recent, by-reference WRITEs keep to
    /// [`crate::byref::WINDOW`] chunks in flight ([`Ctx::sharing`]).
    shared_at: Option<Instant>,
    srqs: BTreeMap<u32, Srq>,
    next_srq: u32,
    qpn_state: u64,
    /// Where completions go: by default a queue that [`Endpoint::poll_completion`]
    /// empties.
    cq: S,
    stats: Stats,
    /// ICRC deltas for the last segment length seen with a non-zero IPv4
    /// identification (a UDP GSO send taken whole by `UDP_GRO`).
    id_deltas: Option<Ipv4IdDeltas>,
}

/// `splitmix64`: the QPN generator's mixing step.
fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// How long (µs) after a transmit last found another QP waiting beside the one it
/// served the endpoint counts as shared ([`Ctx::sharing`]).
const SHARING_HORIZON_US: u64 = 1_000;

impl<M: Memory> Endpoint<M> {
    /// An endpoint over the caller's memory; completions wait in its queue
    /// ([`Endpoint::poll_completion`]).
    pub fn new(config: Config, mem: M) -> Endpoint<M> {
        Endpoint::with_sink(config, mem, VecDeque::new())
    }

    /// The next completion.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.cq.pop_front()
    }
}

impl<M: Memory, S: CompletionSink> Endpoint<M, S> {
    /// An endpoint over the caller's memory whose completions go to `sink` as they
    /// happen, inside the call that completes them.
    pub fn with_sink(config: Config, mem: M, sink: S) -> Endpoint<M, S> {
        let qpn_state = config.qpn_seed;
        Endpoint {
            config,
            mem,
            qps: QpMap::default(),
            rx_slot: 0,
            sched: Sched::default(),
            shared_at: None,
            srqs: BTreeMap::new(),
            next_srq: 1,
            qpn_state,
            cq: sink,
            stats: Stats::default(),
            id_deltas: None,
        }
    }

    /// The completion sink.
    pub fn sink(&self) -> &S {
        &self.cq
    }

    /// The completion sink, mutably.
    pub fn sink_mut(&mut self) -> &mut S {
        &mut self.cq
    }

    /// The memory.
    pub fn mem(&self) -> &M {
        &self.mem
    }

    /// The memory, mutably (register regions, inspect buffers).
    pub fn mem_mut(&mut self) -> &mut M {
        &mut self.mem
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Create a QP in RESET; returns its (unpredictable) number.
    pub fn create_qp(&mut self, init: QpInit) -> Result<u32, PostError> {
        if let Some(s) = init.srq {
            // An SRQ serves only QPs of its own protection domain.
            match self.srqs.get(&s) {
                Some(srq) if srq.pd == init.pd => {}
                _ => return Err(PostError::UnknownQp(s)),
            }
        }
        let qpn = loop {
            let n = (splitmix(&mut self.qpn_state) as u32) & weft_wire::roce::bth::QPN_MASK;
            // QPN 0 and 1 are the special SMI/GSI QPs.
            if n > 1 && !self.qps.contains_key(n) {
                break n;
            }
        };
        let common = QpCommon::new(
            qpn,
            init.qp_type,
            init.pd,
            QpState::Reset,
            QpAttrs::default(),
            init.srq,
            false,
        );
        let depth = init.max_send_wr;
        let slot = self.qps.vacant();
        let at = self.qps.insert(
            qpn,
            Qp {
                common,
                init,
                req: Requester::with_depth(depth),
                resp: Responder::new(),
                rq: VecDeque::new(),
                deficit: 0,
                armed: None,
                queued: false,
                ack_yielded: false,
                ack_queued: false,
                slot,
            },
        );
        debug_assert_eq!(at, slot, "the QP's slot is where the table put it");
        Ok(qpn)
    }

    /// Let QP `qpn` take shm ring-mode descriptors ([`Endpoint::ring_request`]), or
    /// not: for an RC QP whose two ends agreed to the mode for one shm connection (the
    /// connection manager's part; docs/verbs.md, "The ring mode as built"). Without
    /// it every descriptor for the QP is refused. False, and nothing changed, when
    /// there is no such QP, or when the mode would end while descriptors of the QP's
    /// are in flight: the requester keeps the two kinds apart only in the mode (a
    /// descriptor's release must not acknowledge packets sent after it).
    pub fn set_ring_mode(&mut self, qpn: u32, on: bool) -> bool {
        match self.qps.get_mut(qpn) {
            Some(q) if on || !q.req.ring_in_flight() => {
                q.common.ring_mode = on;
                true
            }
            _ => false,
        }
    }

    /// Whether QP `qpn` is in the shm ring mode ([`Endpoint::set_ring_mode`]).
    pub fn ring_mode(&self, qpn: u32) -> bool {
        self.qps.get(qpn).is_some_and(|q| q.common.ring_mode)
    }

    /// Allow (or stop) sending large WRITEs of QP `qpn` by reference
    /// ([`crate::byref`]): the caller's link must deliver them to a peer that pulls
    /// the payload from this process's memory. Takes effect for messages not yet
    /// started. False when there is no such QP.
    pub fn set_by_reference(&mut self, qpn: u32, on: bool) -> bool {
        match self.qps.get_mut(qpn) {
            Some(q) => {
                q.common.by_reference = on;
                true
            }
            None => false,
        }
    }

    /// Whether QP `qpn` may send large WRITEs by reference.
    pub fn by_reference(&self, qpn: u32) -> bool {
        self.qps.get(qpn).is_some_and(|q| q.common.by_reference)
    }

    /// Destroy a QP without completions (`ibv_destroy_qp`).
    pub fn destroy_qp(&mut self, qpn: u32) -> bool {
        let Some((slot, qp)) = self.qps.remove(qpn) else {
            return false;
        };
        if let Some(t) = qp.armed {
            self.sched.timers.remove(&(t, qpn));
        }
        // The slot goes to the next QP created: nothing may name it for this one.
        if qp.queued {
            self.sched.ready.retain(|&q| q != slot);
        }
        if qp.ack_queued {
            self.sched.acks.retain(|&q| q != slot);
        }
        true
    }

    /// Create a shared receive queue in `pd`.
    pub fn create_srq(&mut self, pd: u32, max_wr: usize) -> u32 {
        let id = self.next_srq;
        self.next_srq += 1;
        self.srqs.insert(
            id,
            Srq {
                pd,
                max_wr,
                queue: VecDeque::new(),
            },
        );
        id
    }

    /// Free slots in a QP's send queue (`None` for an unknown QP): an engine that
    /// queues work requests posts at most this many, so none is refused as full.
    pub fn sq_room(&self, qpn: u32) -> Option<usize> {
        let q = self.qps.get(qpn)?;
        Some(q.init.max_send_wr.saturating_sub(q.req.wqes.len()))
    }

    /// Free slots in a QP's receive queue (0 for a QP on an SRQ).
    pub fn rq_room(&self, qpn: u32) -> Option<usize> {
        let q = self.qps.get(qpn)?;
        if q.common.srq.is_some() {
            return Some(0);
        }
        Some(q.init.max_recv_wr.saturating_sub(q.rq.len()))
    }

    /// Free slots in a shared receive queue.
    pub fn srq_room(&self, srq: u32) -> Option<usize> {
        let s = self.srqs.get(&srq)?;
        Some(s.max_wr.saturating_sub(s.queue.len()))
    }

    /// The QP's state.
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.qps.get(qpn).map(|q| q.common.state)
    }

    /// The QP's attributes.
    pub fn qp_attrs(&self, qpn: u32) -> Option<QpAttrs> {
        self.qps.get(qpn).map(|q| *q.common.attrs())
    }

    /// The QP's congestion window and RTT samples ([`crate::cc`]). With congestion
    /// control off, or on a UC/UD QP, the window stays at `max_inflight`.
    pub fn congestion(&self, qpn: u32) -> Option<CongestionState> {
        self.qps.get(qpn).map(|q| q.req.congestion())
    }

    fn split(&mut self, now: Instant) -> (Ctx<'_, M>, &mut QpMap, &mut Sched) {
        let sharing = self
            .shared_at
            .is_some_and(|t| now.0.saturating_sub(t.0) < SHARING_HORIZON_US);
        (
            Ctx {
                now,
                sharing,
                mem: &mut self.mem,
                cq: &mut self.cq,
                stats: &mut self.stats,
                srqs: &mut self.srqs,
                config: &self.config,
            },
            &mut self.qps,
            &mut self.sched,
        )
    }

    /// Change attributes and state (`ibv_modify_qp`). `attr.state == None` modifies
    /// attributes in the current state (allowed where the table has `X -> X`).
    pub fn modify_qp(&mut self, qpn: u32, attr: &QpAttr) -> Result<(), ModifyError> {
        let (mut ctx, qps, sched) = self.split(Instant::ZERO);
        let qp = qps.get_mut(qpn).ok_or(ModifyError::UnknownQp(qpn))?;
        let from = qp.common.state;
        let to = attr.state.unwrap_or(from);
        check_transition(qp.common.qp_type, from, to, attr)?;
        let mut attrs = *qp.common.attrs();
        apply_attr(&mut attrs, attr)?;
        qp.common.set_attrs(attrs);
        match (from, to) {
            (_, QpState::Reset) => {
                qp.req.take_all();
                qp.resp = Responder::new();
                qp.rq.clear();
                qp.common.state = QpState::Reset;
            }
            (_, QpState::Err) => qp.enter_error(&mut ctx, None),
            (QpState::Init, QpState::Rtr) => {
                qp.resp.start(&qp.common);
                qp.common.state = to;
            }
            (QpState::Rtr, QpState::Rts) => {
                qp.req.start(&qp.common);
                qp.common.state = to;
            }
            _ => qp.common.state = to,
        }
        sched.touched(qp);
        Ok(())
    }

    /// Post a send work request. Errors the hardware reports through the completion
    /// queue (a bad lkey, a message over the limit) arrive there, in order.
    pub fn post_send(&mut self, qpn: u32, wr: SendWr) -> Result<(), PostError> {
        self.post_send_with(qpn, wr, None)
    }

    /// Post an inline send whose payload the caller already gathered (`data`): the
    /// work request's SGE list is ignored. This is how an engine that queues work
    /// requests between threads honours `IBV_SEND_INLINE` — the application's buffer
    /// may be reused as soon as it has handed `data` over.
    pub fn post_send_inline(&mut self, qpn: u32, wr: SendWr, data: &[u8]) -> Result<(), PostError> {
        self.post_send_with(qpn, wr, Some(data))
    }

    fn post_send_with(
        &mut self,
        qpn: u32,
        mut wr: SendWr,
        inline_src: Option<&[u8]>,
    ) -> Result<(), PostError> {
        let (mut ctx, qps, sched) = self.split(Instant::ZERO);
        let qp = qps.get_mut(qpn).ok_or(PostError::UnknownQp(qpn))?;
        post_one::<M, SendWr, false>(&mut ctx, qp, sched, &mut wr, inline_src)
    }

    /// QP `qpn`'s send queue, borrowed for a batch of posts: one QP lookup for the
    /// lot ([`SendQueue`]). `None` for an unknown QP.
    pub fn send_queue(&mut self, qpn: u32) -> Option<SendQueue<'_, M>> {
        let (ctx, qps, sched) = self.split(Instant::ZERO);
        let qp = qps.get_mut(qpn)?;
        Some(SendQueue { ctx, qp, sched })
    }

    /// QP `qpn`'s slot in the endpoint's table, for the `*_at` calls
    /// ([`Endpoint::send_queue_at`], [`Endpoint::post_recvs_at`]), which find the QP
    /// there without a hash probe. A QP keeps its slot until it is destroyed.
    pub fn qp_slot(&self, qpn: u32) -> Option<u32> {
        self.qps.slot_of(qpn)
    }

    /// [`Endpoint::send_queue`] with the QP looked for first in `slot`
    /// ([`Endpoint::qp_slot`]). The slot is only a hint: one that holds another QP,
    /// or none, falls back to the lookup by `qpn`, so the answer is always
    /// `send_queue(qpn)`'s.
    #[inline]
    pub fn send_queue_at(&mut self, slot: u32, qpn: u32) -> Option<SendQueue<'_, M>> {
        let (ctx, qps, sched) = self.split(Instant::ZERO);
        let qp = qps.get_mut_at(slot, qpn)?;
        Some(SendQueue { ctx, qp, sched })
    }

    /// Post a receive work request on a QP without an SRQ.
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), PostError> {
        // A receive gives the QP nothing to send and no timer: no scheduling.
        let (mut ctx, qps, _) = self.split(Instant::ZERO);
        let qp = qps.get_mut(qpn).ok_or(PostError::UnknownQp(qpn))?;
        if qp.common.srq.is_some() {
            return Err(PostError::UsesSrq);
        }
        if qp.common.state == QpState::Reset {
            return Err(PostError::InvalidState(QpState::Reset));
        }
        if wr.sg_list.len() > MAX_SGE {
            return Err(PostError::TooManySge);
        }
        if qp.rq.len() >= qp.init.max_recv_wr {
            return Err(PostError::QueueFull);
        }
        qp.rq.push_back(wr);
        if qp.common.state == QpState::Err {
            qp.flush_recvs(&mut ctx);
        }
        Ok(())
    }

    /// Post receive work requests from `wrs` on a QP without an SRQ while its receive
    /// queue has room, with one QP lookup for the lot (a poster's doorbell path). A
    /// request is taken from `wrs` only when there is room for it, so what is left
    /// there did not fit. `max_sge` caps the SGEs per request below [`MAX_SGE`] (a
    /// QP's own limit). Returns how many were posted. `Err((n, e))`: `n` were posted
    /// and `e` refused the next; for [`PostError::TooManySge`] that request was taken
    /// from `wrs`, while the QP's own refusals ([`PostError::UnknownQp`],
    /// [`PostError::UsesSrq`], [`PostError::InvalidState`]) come with `n` = 0 and take
    /// nothing.
    pub fn post_recvs(
        &mut self,
        qpn: u32,
        max_sge: usize,
        wrs: &mut impl Iterator<Item = RecvWr>,
    ) -> Result<usize, (usize, PostError)> {
        let slot = self.qps.slot_of(qpn).unwrap_or(u32::MAX);
        self.post_recvs_at(slot, qpn, max_sge, wrs)
    }

    /// [`Endpoint::post_recvs`] with the QP looked for first in `slot` (a hint, as
    /// for [`Endpoint::send_queue_at`]: the answer is always `post_recvs`').
    pub fn post_recvs_at(
        &mut self,
        slot: u32,
        qpn: u32,
        max_sge: usize,
        wrs: &mut impl Iterator<Item = RecvWr>,
    ) -> Result<usize, (usize, PostError)> {
        let (mut ctx, qps, _) = self.split(Instant::ZERO);
        let qp = qps
            .get_mut_at(slot, qpn)
            .ok_or((0, PostError::UnknownQp(qpn)))?;
        if qp.common.srq.is_some() {
            return Err((0, PostError::UsesSrq));
        }
        if qp.common.state == QpState::Reset {
            return Err((0, PostError::InvalidState(QpState::Reset)));
        }
        let max_sge = max_sge.min(MAX_SGE);
        let mut n = 0;
        while qp.rq.len() < qp.init.max_recv_wr {
            let Some(wr) = wrs.next() else {
                break;
            };
            if wr.sg_list.len() > max_sge {
                return Err((n, PostError::TooManySge));
            }
            qp.rq.push_back(wr);
            n += 1;
            if qp.common.state == QpState::Err {
                qp.flush_recvs(&mut ctx);
            }
        }
        Ok(n)
    }

    /// Post a receive work request on a shared receive queue.
    pub fn post_srq_recv(&mut self, srq: u32, wr: RecvWr) -> Result<(), PostError> {
        let s = self.srqs.get_mut(&srq).ok_or(PostError::UnknownQp(srq))?;
        if wr.sg_list.len() > MAX_SGE {
            return Err(PostError::TooManySge);
        }
        if s.queue.len() >= s.max_wr {
            return Err(PostError::QueueFull);
        }
        s.queue.push_back(wr);
        Ok(())
    }

    /// A received IB packet (a UDP payload), arriving on `path` (source = the peer).
    /// Hostile bytes are dropped and counted, never a panic.
    pub fn handle_packet(&mut self, now: Instant, path: &IcrcPath, bytes: &[u8]) {
        self.stats.rx_packets += 1;
        let Ok(pkt) = IbPacket::new_checked(bytes) else {
            self.stats.malformed += 1;
            return;
        };
        if self.config.check_icrc {
            let id = if self.config.icrc_any_ipv4_id {
                path.check_any_id(bytes, &mut self.id_deltas)
            } else {
                path.check_id(bytes, self.config.icrc_ids, &mut self.id_deltas)
            };
            match id {
                Some(0) => {}
                Some(_) => self.stats.icrc_segment_id += 1,
                None => {
                    self.stats.icrc_errors += 1;
                    return;
                }
            }
        }
        // The common shape first: an RC SEND Only or WRITE Only in order
        // ([`Endpoint::handle_request_only`]); anything else, or one it declines,
        // takes the general path below.
        let op = pkt.opcode();
        if (op == Opcode::RC_SEND_ONLY || op == Opcode::RC_WRITE_ONLY)
            && self.handle_request_only(now, &pkt)
        {
            return;
        }
        // The checked packet's headers cannot fail to parse (`IbPacket::repr`).
        let repr = pkt.repr();
        let info = pkt.info();
        if info.operation == Operation::Cnp {
            self.stats.cnp_received += 1;
            return;
        }
        let hint = self.rx_slot;
        let (mut ctx, qps, sched) = self.split(now);
        let Some(qp) = qps.get_mut_at(hint, repr.bth.dest_qp) else {
            ctx.stats.unknown_qpn += 1;
            return;
        };
        let slot = qp.slot;
        if info.transport != qp.common.qp_type.transport() {
            ctx.stats.wrong_transport += 1;
            return;
        }
        // IBTA Vol 1 §9.6 (transport header validation): the P_Key must match; the
        // membership bit is not compared.
        if repr.bth.pkey & 0x7fff != qp.common.attrs().pkey & 0x7fff {
            ctx.stats.pkey_mismatch += 1;
            return;
        }
        qp.handle(
            &mut ctx,
            &repr,
            info.operation,
            pkt.payload(),
            path,
            bytes.len(),
        );
        sched.touched(qp);
        self.rx_slot = slot;
    }

    /// A checked RC SEND Only or WRITE Only (no immediate) straight to its QP's
    /// responder ([`Responder::request_only_in_order`], which decides whether it is
    /// the common shape it takes): the BTH read field by field and the RETH (a WRITE's)
    /// alone, no headers' repr, no dispatch on the operation. The QP's checks are
    /// [`Endpoint::handle_packet`]'s and [`Qp::handle`]'s (an RC QP, the P_Key, a
    /// state that accepts requests). True when the packet was taken (counted in
    /// [`Stats::rx_lean`]); false with nothing changed, and the general path decides.
    #[inline]
    fn handle_request_only(&mut self, now: Instant, pkt: &IbPacket<&[u8]>) -> bool {
        let bth = pkt.bth();
        let reth = if pkt.opcode() == Opcode::RC_WRITE_ONLY {
            match pkt.reth() {
                Some(r) => Some(r),
                None => return false,
            }
        } else {
            None
        };
        let hint = self.rx_slot;
        let (mut ctx, qps, sched) = self.split(now);
        let Some(qp) = qps.get_mut_at(hint, bth.dest_qp()) else {
            return false;
        };
        if qp.common.qp_type != QpType::Rc
            || bth.pkey() & 0x7fff != qp.common.attrs().pkey & 0x7fff
            || !matches!(
                qp.common.state,
                QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
            )
            || !qp.resp.request_only_in_order(
                &qp.common,
                &mut qp.rq,
                &mut ctx,
                bth.psn(),
                bth.ack_req(),
                reth,
                pkt.payload(),
            )
        {
            return false;
        }
        ctx.stats.rx_lean += 1;
        let slot = qp.slot;
        sched.touched(qp);
        self.rx_slot = slot;
        true
    }

    /// A descriptor of the shm ring mode for QP `d.dest_qpn`, with its payload
    /// ([`weft_wire::ring`]; the responder's side: [`RingAnswer`] says what the caller
    /// must do, and a fatal refusal has put the QP in ERR). A QP that takes no
    /// descriptor now — not an RC QP in ring mode ([`Endpoint::set_ring_mode`],
    /// counted in `ring_refused`), not in a state that receives (RTR or later), or past
    /// a fatal refusal — refuses it with a Remote Operational Error, so that its
    /// release is never taken for an execution. `None`, counted: no such QP (the
    /// descriptor names no QP to address an ERROR to: a hole, docs/verbs.md).
    pub fn ring_request(
        &mut self,
        now: Instant,
        d: &weft_wire::ring::RingDescriptor,
        payload: &[u8],
    ) -> Option<RingAnswer> {
        let (mut ctx, qps, sched) = self.split(now);
        let Some(qp) = qps.get_mut(d.dest_qpn) else {
            ctx.stats.unknown_qpn += 1;
            return None;
        };
        if qp.common.qp_type != QpType::Rc || !qp.common.ring_mode {
            ctx.stats.ring_refused += 1;
            return Some(crate::responder::refused_dead());
        }
        if !matches!(
            qp.common.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        ) {
            ctx.stats.dropped_state += 1;
            return Some(crate::responder::refused_dead());
        }
        let answer = qp
            .resp
            .ring_request(&qp.common, &mut qp.rq, &mut ctx, d, payload);
        if let RingAnswer::Refused { fatal: true, .. } = answer {
            qp.enter_error(&mut ctx, None);
            sched.touched(qp);
        }
        Some(answer)
    }

    /// The ERROR descriptor that answers a refusal by [`Endpoint::ring_request`] of
    /// the descriptor `d` (for local QP `d.dest_qpn`) with `syndrome`, addressed to the
    /// QP's peer, and the path it goes back on. The driver pushes it on the reverse
    /// ring before it releases `d`'s item ([`crate::ring`]). `None`: no such QP, or
    /// it has no connected peer.
    pub fn ring_refusal(
        &self,
        d: &weft_wire::ring::RingDescriptor,
        syndrome: weft_wire::roce::Syndrome,
    ) -> Option<(weft_wire::ring::RingDescriptor, IcrcPath)> {
        let qp = self.qps.get(d.dest_qpn)?;
        let path = qp.common.attrs().path?;
        let reply = weft_wire::ring::RingDescriptor {
            dest_qpn: qp.common.attrs().dest_qpn,
            seq: d.seq,
            op: weft_wire::ring::RingOp::Error { syndrome },
        };
        Some((reply, path))
    }

    /// The link released the ring descriptor `tag` names ([`Transmit::ring`]): the
    /// peer's transport answered it. Hand in every release read before the ERRORs of
    /// the same step, after them ([`crate::ring`]). A tag that names nothing in flight
    /// (an old epoch, a destroyed QP) is counted and ignored.
    pub fn ring_released(&mut self, now: Instant, tag: RingTag) {
        let (mut ctx, qps, sched) = self.split(now);
        let Some(qp) = qps.get_mut(tag.qpn()) else {
            ctx.stats.ring_stale += 1;
            return;
        };
        qp.req
            .ring_released(&qp.common, &mut ctx, tag.psn(), tag.epoch());
        sched.touched(qp);
    }

    /// The link will never release the ring descriptor `tag` names (its peer died, or
    /// the ring broke): its message fails with `RetryExcErr` and the QP enters ERR, as
    /// an RC QP whose peer stopped answering.
    pub fn ring_lost(&mut self, now: Instant, tag: RingTag) {
        let (mut ctx, qps, sched) = self.split(now);
        let Some(qp) = qps.get_mut(tag.qpn()) else {
            ctx.stats.ring_stale += 1;
            return;
        };
        let q = qp.common.clone();
        if let Err(f) = qp.req.ring_lost(&q, &mut ctx, tag.psn(), tag.epoch()) {
            qp.fault(&mut ctx, f);
        }
        sched.touched(qp);
    }

    /// An ERROR descriptor from the peer ([`weft_wire::ring::RingOp::Error`], for local
    /// QP `d.dest_qpn`): it refused the message `d.seq` names. An RNR is retried after
    /// its timer while `rnr_retry` lasts; a NAK code fails the message and the QP.
    /// Anything else (not an ERROR, no such QP or message) is counted and ignored.
    pub fn ring_refused(&mut self, now: Instant, d: &weft_wire::ring::RingDescriptor) {
        let weft_wire::ring::RingOp::Error { syndrome } = d.op else {
            self.stats.malformed += 1;
            return;
        };
        let (mut ctx, qps, sched) = self.split(now);
        let Some(qp) = qps.get_mut(d.dest_qpn) else {
            ctx.stats.unknown_qpn += 1;
            return;
        };
        let q = qp.common.clone();
        if let Err(f) = qp.req.ring_refused(&q, &mut ctx, d.seq, syndrome) {
            qp.fault(&mut ctx, f);
        }
        sched.touched(qp);
    }

    /// False when [`Endpoint::poll_transmit`] would return `None` without looking at
    /// any QP (the transmit queue is empty): a driver can skip reading its clock.
    pub fn may_transmit(&self) -> bool {
        // A QP that owes an ACK is in the transmit queue too (`Sched::touched` files
        // it in both), so the ACK queue needs no look of its own here.
        !self.sched.ready.is_empty()
    }

    /// Write the next packet to send into `buf` (at least `path_mtu + MAX_OVERHEAD`
    /// bytes). Owed ACKs and NAKs go first (the endpoint keeps them a queue of their own,
    /// ahead of the turns: an ACK carries no payload and the peer's retransmission
    /// timer runs while it waits); then QPs take turns by
    /// deficit round robin over bytes, so a long transfer cannot starve small messages
    /// on other QPs. Only QPs in the transmit queue take a turn: a QP leaves it when
    /// it has nothing to send, and an input that touches it (a post, a packet, a
    /// timer, a state change) puts it back.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let mut one = OneBuffer {
            buf: Some(buf),
            sent: None,
        };
        self.poll_transmit_burst(now, &mut one);
        one.sent
    }

    /// [`Endpoint::poll_transmit`] for a driver that knows which QP just became ready
    /// (a post on QP slot `slot` that followed a wait, [`Endpoint::qp_slot`]): when
    /// that QP is the only one in the transmit queue, its turn is taken directly,
    /// without the round robin's upkeep (the queue's look-ups, the turns' loop, the
    /// burst's buffer hand-over). The packet, and every change to the QP and the
    /// queue, are those of `poll_transmit`'s with the queue as it is: a lone QP's turn
    /// is the same turn. Any other queue (another QP queued, or none, or not this one)
    /// takes `poll_transmit` itself.
    pub fn poll_transmit_alone(
        &mut self,
        now: Instant,
        slot: u32,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        if self.sched.ready.len() != 1 || self.sched.ready.front() != Some(&slot) {
            return self.poll_transmit(now, buf);
        }
        let quantum = i64::from(self.config.drr_quantum.max(1));
        let (mut ctx, qps, sched) = self.split(now);
        let Some(qp) = start_turn(&mut ctx, qps, sched, slot, buf.len(), quantum) else {
            if !sched.ready.is_empty() {
                // Still queued, so moved to the back of a queue of one (the buffer is
                // too small for it): the burst's second turn visits it again, and
                // passes again.
                ctx.stats.qp_visits += 1;
            }
            return None;
        };
        let packet = turn_packet(&mut ctx, sched, qp, buf)?;
        let t = charge(qp, ctx.stats, packet);
        if qp.nothing_to_send() {
            sched.retire_front(qp);
        }
        Some(t)
    }

    /// [`Endpoint::poll_transmit`] again and again, into the buffers `out` hands out,
    /// until `out` says stop or nothing more may go now; returns the packets written.
    /// The packets and their order are those of as many `poll_transmit` calls. What a
    /// burst saves is the turn's upkeep: a QP that keeps the front of the queue (its
    /// deficit not spent, no ACK owed elsewhere) writes its next packet without being
    /// looked up again, and the driver without a call per packet.
    pub fn poll_transmit_burst(&mut self, now: Instant, out: &mut impl TxBuffers) -> usize {
        let mut n = 0;
        'packets: loop {
            // Nothing queued, or no buffer: a single call would not have been made
            // (a driver asks `may_transmit` and has its buffer first), so nothing
            // below may run either, not even a turn's count of visits. The buffer
            // asked for here is the one the packet below is written into.
            if self.sched.ready.is_empty() {
                return n;
            }
            let Some(mut buf) = out.next_buffer() else {
                return n;
            };
            // Only another QP in the transmit queue can hold an owed ACK back: with
            // one QP (a ping-pong) its own turn sends the ACK, and the queue's upkeep
            // would cost each round ~190 instructions (callgrind) for nothing.
            if self.sched.ready.len() > 1 && !self.sched.acks.is_empty() {
                if let Some(t) = self.transmit_ack(now, buf) {
                    n += 1;
                    if !out.written(t) {
                        return n;
                    }
                    continue;
                }
            }
            if self.sched.ready.len() > 1 {
                self.shared_at = Some(now);
            }
            let quantum = i64::from(self.config.drr_quantum.max(1));
            // Each turn that sends nothing takes its QP out of the queue (or, for a
            // buffer too small for its MTU or a QP still in debt, moves it to the
            // back), so this many turns visit every queued QP once, and once more the
            // one that may be left alone by the others' leaving.
            for _ in 0..=self.sched.ready.len() {
                let (mut ctx, qps, sched) = self.split(now);
                let Some(&slot) = sched.ready.front() else {
                    return n;
                };
                let Some(qp) = start_turn(&mut ctx, qps, sched, slot, buf.len(), quantum) else {
                    continue;
                };
                // The QP's run: packets while it keeps the front of the queue.
                let mut first = true;
                loop {
                    let Some(packet) = turn_packet(&mut ctx, sched, qp, buf) else {
                        if first {
                            break;
                        }
                        // A later packet of the run: the single call that would have
                        // asked counted its turns afresh.
                        continue 'packets;
                    };
                    first = false;
                    let t = charge(qp, ctx.stats, packet);
                    n += 1;
                    let more = out.written(t);
                    if qp.nothing_to_send() {
                        // What the next turn would find, known now: the QP leaves the
                        // queue, and a driver that asks `may_transmit` first need not
                        // ask again only to learn that (`Engine::transmit` on the
                        // verbs side; ~600 instructions a ping-pong round, callgrind).
                        sched.retire_front(qp);
                        if sched.ready.is_empty() {
                            return n;
                        }
                    } else if qp.deficit <= 0 {
                        sched.ready.rotate_left(1);
                    } else if more {
                        // Still this QP's turn. No ACK owed elsewhere can go first:
                        // `transmit_ack` emptied their queue before the turns, and
                        // only an input (a packet, a post) fills it.
                        // Or this QP's own ACK, queued behind the packet it just
                        // wrote (`Qp::ack_rides_along`): its next packet anyway.
                        debug_assert!(
                            sched.ready.len() == 1 || sched.acks.iter().all(|&s| s == qp.slot)
                        );
                        let Some(next) = out.next_buffer() else {
                            return n;
                        };
                        if next.len() < qp.common.mtu() as usize + MAX_OVERHEAD {
                            // Too small for this QP: the turns start afresh, where
                            // the first one moves it to the back, as a single call
                            // would.
                            continue 'packets;
                        }
                        ctx.stats.qp_visits += 1;
                        buf = next;
                        continue;
                    }
                    if !more {
                        return n;
                    }
                    continue 'packets;
                }
            }
            return n;
        }
    }

    /// The next owed ACK or NAK, out of the round robin's turn. A QP whose plain ACK
    /// lets one request packet go first ([`Qp::poll_transmit`]) sends that packet
    /// here and stays at the front, so its ACK is the next packet; a QP whose ACK
    /// already went out on its own turn is dropped from the queue.
    #[inline(never)]
    fn transmit_ack(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let (mut ctx, qps, sched) = self.split(now);
        while let Some(&slot) = sched.acks.front() {
            let Some(qp) = qps.at_mut(slot) else {
                sched.acks.pop_front();
                continue;
            };
            let sent = if qp.resp.ack_first() {
                ctx.stats.qp_visits += 1;
                qp.poll_transmit(&mut ctx, sched, buf)
            } else {
                None
            };
            sched.sync_timer(qp);
            // Sent the ACK (or nothing could be sent): off the queue. Sent a request
            // packet ahead of the ACK (`ack_yielded`): the ACK is this QP's next packet.
            if sent.is_none() || !qp.ack_yielded || !qp.resp.ack_first() {
                qp.ack_queued = false;
                sched.acks.pop_front();
            }
            if let Some(packet) = sent {
                return Some(charge(qp, ctx.stats, packet));
            }
        }
        None
    }

    /// When [`Endpoint::handle_timeout`] should next be called: never later than the
    /// earliest timer deadline of any QP, and earlier when a timer was cancelled or
    /// pushed back since it was filed (cancelling is lazy; that call then only re-files
    /// the QP). `None`: no timer is armed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.sched.timers.first().map(|&(t, _)| t)
    }

    /// Run every timer due at `now` (visiting only the QPs whose timer is due).
    /// Returns true when a timer fired (a retransmission, an RNR wait ending, a
    /// fault); false when the due entries were only stale ones, re-filed for their
    /// QPs' later deadlines: then nothing happened that another pass must follow up.
    pub fn handle_timeout(&mut self, now: Instant) -> bool {
        if self.poll_timeout().is_none_or(|t| t > now) {
            return false;
        }
        let mut fired = false;
        let (mut ctx, qps, sched) = self.split(now);
        // The due entries, taken out first: a timer re-armed at `now` or earlier waits
        // for the next call instead of firing again in this one. Popped into a vector
        // the endpoint keeps, not split off into a new set: the split built a tree and
        // freed the old one, a node allocated and freed per call that found a timer
        // due (with the clock under callgrind, ~300 instructions a firing).
        let mut due = std::mem::take(&mut sched.due);
        while let Some(&(t, qpn)) = sched.timers.first() {
            if t > now {
                break;
            }
            sched.timers.pop_first();
            due.push(qpn);
        }
        for qpn in due.drain(..) {
            ctx.stats.qp_visits += 1;
            let Some(qp) = qps.get_mut(qpn) else {
                continue;
            };
            qp.armed = None;
            if qp.resp.ack_due().is_some_and(|t| t <= now) {
                fired = true;
                qp.resp.send_owed_ack();
            }
            if qp.req.next_deadline().is_some_and(|t| t <= now) {
                fired = true;
                let q = qp.common.clone();
                if let Err(f) = qp.req.handle_timeout(&q, &mut ctx) {
                    qp.fault(&mut ctx, f);
                }
            }
            sched.touched(qp);
        }
        sched.due = due;
        fired
    }

    /// Queue now every delayed ACK the responders owe ([`Config::ack_delay_us`]: the
    /// coalesced ACK of messages that did not ask for one), ahead of its time, and
    /// take its timer entry out; returns how many QPs had one. For a driver about to
    /// sleep: waking at the ACK's deadline just to send it costs a wake-up, and the
    /// ACK leaves no later than it would have (a message arriving before the deadline
    /// would only have been covered by the same ACK). A QP owes one only with its
    /// entry in the timer set at or before the ACK's deadline, at most
    /// `ack_delay_us` from `now`: only those entries are looked at.
    pub fn ack_owed_now(&mut self, now: Instant) -> usize {
        let horizon = Instant(now.micros().saturating_add(self.config.ack_delay_us));
        if self.sched.timers.first().is_none_or(|&(t, _)| t > horizon) {
            return 0;
        }
        let (_, qps, sched) = self.split(now);
        let mut owing = std::mem::take(&mut sched.due);
        owing.extend(
            sched
                .timers
                .iter()
                .take_while(|&&(t, _)| t <= horizon)
                .map(|&(_, qpn)| qpn),
        );
        let mut n = 0;
        for qpn in owing.drain(..) {
            if qps.get_mut(qpn).is_some_and(|qp| sched.ack_now(qp)) {
                n += 1;
            }
        }
        sched.due = owing;
        n
    }

    /// True when no QP has anything queued or in flight.
    pub fn is_idle(&self) -> bool {
        self.qps
            .values()
            .all(|q| q.req.is_empty() && !q.resp.has_output())
    }
}

impl Qp {
    /// True when [`Qp::poll_transmit`] would certainly return nothing until an input
    /// changes the QP: no response queued (an ACK held back behind a request packet,
    /// `ack_yielded`, is queued) and nothing the requester may send.
    #[inline]
    fn nothing_to_send(&self) -> bool {
        !self.resp.has_output() && self.req.nothing_to_send()
    }

    /// The QP's next timer: its requester's (retransmission, RNR wait) or the
    /// responder's delayed ACK, whichever is first.
    #[inline]
    fn next_deadline(&self) -> Option<Instant> {
        match (self.req.next_deadline(), self.resp.ack_due()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle<M: Memory>(
        &mut self,
        ctx: &mut Ctx<'_, M>,
        repr: &IbPacketRepr,
        operation: Operation,
        payload: &[u8],
        path: &IcrcPath,
        wire_len: usize,
    ) {
        let accepts = matches!(
            self.common.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        );
        if !accepts {
            ctx.stats.dropped_state += 1;
            return;
        }
        match operation {
            Operation::ReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge => {
                if let Err(f) =
                    self.req
                        .handle_response(&self.common, ctx, repr, operation, payload)
                {
                    self.fault(ctx, f);
                }
            }
            _ => self.resp.handle_request(
                &self.common,
                &mut self.rq,
                ctx,
                repr,
                payload,
                path,
                wire_len,
            ),
        }
    }

    /// The QP's next packet: its responses first, except that a lone positive ACK
    /// lets one request packet go ahead of it.
    ///
    /// Why the exception: in a request-reply exchange the ACK of the peer's request
    /// and this side's reply are ready together, and on a link with segmentation
    /// offload (udp GSO) a run of packets to one peer travels as one datagram send
    /// only if every packet but the last has the first one's length. A 20-byte ACK
    /// first would end the run at once, and on loopback the reply would then wait for
    /// the ACK's whole delivery through the receiving stack; the reply first and the
    /// ACK as the run's short last packet leave (and arrive) as one. The ACK is late
    /// by one packet at most: the QP's next packet is the ACK, whatever the requester
    /// has queued (`ack_yielded`). IB orders a QP's requests among themselves and its
    /// responses among themselves (IBTA Vol 1 §9.5), not one stream against the other.
    // Inlined at both its calls (the round robin and the ACK queue): with two
    // callers the compiler put it out of line, which cost the round robin's path
    // about 135 instructions a ping-pong round (callgrind).
    #[inline(always)]
    fn poll_transmit<M: Memory>(
        &mut self,
        ctx: &mut Ctx<'_, M>,
        sched: &mut Sched,
        buf: &mut [u8],
    ) -> Option<Emitted> {
        if buf.len() < self.common.mtu() as usize + MAX_OVERHEAD {
            return None;
        }
        if !self.ack_yielded && self.common.state != QpState::Reset && self.resp.only_plain_ack() {
            match self.req.poll_transmit(&self.common, ctx, buf) {
                Ok(Some(e)) => {
                    self.ack_yielded = true;
                    if self.resp.ack_rides() {
                        // Into the queued ACK, which goes next.
                        self.ack_rides_along(ctx.stats, sched);
                    }
                    return Some(e);
                }
                Ok(None) => {}
                // The QP leaves RTS (RC: ERR, which drops the ACK with the rest of
                // the responder's state); what is left goes out below as before.
                Err(f) => self.fault(ctx, f),
            }
        }
        self.ack_yielded = false;
        if self.resp.has_output() && self.common.state != QpState::Reset {
            let posted = match self.common.srq {
                Some(_) => None,
                None => Some(self.rq.len()),
            };
            if let Some(e) = self.resp.poll_transmit(&self.common, ctx, buf, posted) {
                if e.fatal {
                    self.enter_error(ctx, None);
                }
                return Some(Emitted {
                    len: e.len,
                    moves: e.len,
                });
            }
        }
        match self.req.poll_transmit(&self.common, ctx, buf) {
            Ok(Some(e)) => {
                if self.resp.ack_rides() {
                    self.ack_rides_along(ctx.stats, sched);
                }
                Some(e)
            }
            Ok(None) => None,
            Err(f) => {
                self.fault(ctx, f);
                None
            }
        }
    }

    /// The requester just wrote a packet (most likely the reply to the peer's
    /// request) while the responder owes a delayed ACK that began after a quiet
    /// stretch ([`Config::ack_rides_reply`]): the ACK is queued now and is the QP's
    /// next packet (`ack_yielded`), so it leaves right behind the packet, in the same
    /// transmit, not at its deadline — one arrival at a sparse peer instead of two.
    /// Only this QP's ACK: another QP's waits for its own request packet, its
    /// deadline, or [`Endpoint::ack_owed_now`]. Out of line: the check before the
    /// call is the per-packet part, a ride is one per sparse request.
    #[inline(never)]
    fn ack_rides_along(&mut self, stats: &mut Stats, sched: &mut Sched) {
        if sched.ack_now(self) {
            self.ack_yielded = true;
            stats.acks_with_reply += 1;
        }
    }

    /// A send WQE failed: RC goes to ERR; UC and UD to SQE (IBTA Vol 1 §10.3.1, QP
    /// state transitions).
    fn fault<M: Memory>(&mut self, ctx: &mut Ctx<'_, M>, f: Fault) {
        match self.common.qp_type {
            QpType::Rc => self.enter_error(ctx, Some(f)),
            QpType::Uc | QpType::Ud => {
                self.complete_sends(ctx, Some(f));
                self.common.state = QpState::Sqe;
            }
        }
    }

    /// Enter ERR: every outstanding work request completes, the failed one with its
    /// status, all others with `WrFlushErr` (IBTA Vol 1 §10.3.1, Error state).
    fn enter_error<M: Memory>(&mut self, ctx: &mut Ctx<'_, M>, f: Option<Fault>) {
        self.common.state = QpState::Err;
        ctx.cq.qp_error(self.common.qpn);
        self.complete_sends(ctx, f);
        if let Some((recv, from_srq)) = self.resp.take_partial() {
            if from_srq {
                let mut c = Completion::new(
                    recv.wr_id,
                    WcStatus::WrFlushErr,
                    WcOpcode::Recv,
                    self.common.qpn,
                );
                c.from_srq = true;
                ctx.cq.complete(c);
            } else {
                self.rq.push_front(recv);
            }
        }
        self.resp = Responder::new();
        self.flush_recvs(ctx);
    }

    fn complete_sends<M: Memory>(&mut self, ctx: &mut Ctx<'_, M>, f: Option<Fault>) {
        for (i, w) in self.req.take_all().into_iter().enumerate() {
            let status = match f {
                Some(f) if f.idx == i => f.status,
                _ => WcStatus::WrFlushErr,
            };
            let mut c = Completion::new(w.wr_id, status, w.op.wc_opcode(), self.common.qpn);
            c.byte_len = 0;
            ctx.cq.complete(c);
        }
    }

    fn flush_sends<M: Memory>(&mut self, ctx: &mut Ctx<'_, M>) {
        self.complete_sends(ctx, None);
    }

    fn flush_recvs<M: Memory>(&mut self, ctx: &mut Ctx<'_, M>) {
        for r in self.rq.drain(..) {
            ctx.cq.complete(Completion::new(
                r.wr_id,
                WcStatus::WrFlushErr,
                WcOpcode::Recv,
                self.common.qpn,
            ));
        }
    }
}
