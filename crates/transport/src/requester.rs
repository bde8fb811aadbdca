//! The requester and completer of one QP: segments send work requests into packets,
//! keeps the PSN scoreboard, reacts to ACKs, NAKs, READ responses and timers, and
//! retires work requests in order.
//!
//! PSNs are kept as 64-bit counters (the 24-bit wire PSN expanded against `una`), so
//! no window arithmetic here ever wraps. The scoreboard holds one flag byte per PSN in
//! `[una, next_psn)`.

use crate::byref::{self, RemoteSpan};
use crate::bytering::ByteRing;
use crate::cc::{CongestionControl, CongestionState, Window};
use crate::ctx::{gather, opcode_for, packet_len, packets_for, position, scatter, Ctx, QpCommon};
use crate::memory::{Key, Memory};
use crate::qp::{QpState, QpType, Recovery};
use crate::ring::RingTag;
use crate::status::{local_status, requester_status};
use crate::time::{local_ack_timeout_micros, Instant};
use crate::wr::{Completion, SendWr, SgList, UdDest, WcStatus, WrOp};
use std::collections::VecDeque;
use weft_wire::ring::{RingDescriptor, RingOp};
use weft_wire::roce::ext::rnr_timer_micros;
use weft_wire::roce::opcode::len as wire_len;
use weft_wire::roce::{
    AtomicEthRepr, DethRepr, IbPacketRepr, IcrcPath, NakCode, Operation, PacketFields,
    PacketTemplate, Psn, RethRepr, Syndrome,
};

/// The PSN was acknowledged or its response arrived.
const DELIVERED: u8 = 1;
/// A READ or atomic PSN: only a response delivers it, an ACK does not.
const NEEDS_RESPONSE: u8 = 2;
/// Selective mode: queued for retransmission in this recovery round.
const RETX_QUEUED: u8 = 4;
/// Selective mode: the responder holds this packet out of order. Not a delivery: the
/// packet is not yet executed (it may still meet RNR), so `una` never passes it on a
/// SACK alone — only the cumulative ACK retires it. It is just not resent.
const SACKED: u8 = 8;

/// A send work request on the send queue: what the requester keeps of a [`SendWr`],
/// in two cache lines. A QP with many requests in flight, among thousands of QPs,
/// finds its WQEs cold in the caches when it transmits and when it retires them
/// (docs/results/verbs.md, "QP scaling"), so the slot is kept small: the UD
/// destination waits in [`Requester`]'s own queue (UD QPs only), and an inline
/// payload in the requester's byte ring, not in a buffer of its own.
///
/// The first line holds what starting the WQE reads (`start_next`), the second what
/// its packets and its completion add.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct SendWqe {
    /// The operation.
    pub op: WrOp,
    /// Message length in bytes.
    pub len: u64,
    /// First PSN (valid once started; `u64::MAX` before).
    pub first_psn: u64,
    /// A local error found at post time, reported when the WQE reaches the head.
    pub pre_fault: Option<WcStatus>,
    /// `IBV_SEND_SIGNALED`.
    pub signaled: bool,
    /// `IBV_SEND_FENCE`.
    pub fence: bool,
    /// Set the solicited-event bit on the last packet.
    pub solicited: bool,
    /// A WRITE sent by reference (one packet naming the source spans; decided when
    /// the message starts, see [`crate::byref`]).
    pub by_ref: bool,
    /// Sent as a shm ring-mode descriptor ([`crate::ring`]; decided when the message
    /// starts): one PSN, acknowledged by the link's release of the item.
    pub ring: bool,
    /// The payload was gathered at post time: `len` bytes at `inline_at` in the
    /// requester's inline ring (`sg_list` is then empty).
    pub inline: bool,
    /// Local buffers (gather for SEND/WRITE, scatter for READ/atomics).
    pub sg_list: SgList,
    /// The caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// PSNs the message occupies.
    pub npsn: u64,
    /// READ response packets received (selective mode uses it to choose between
    /// resending the whole request and single packets).
    pub resp_seen: u32,
    /// Where an inline payload starts in the inline ring: a position in the ring's
    /// byte stream, wrapping ([`Requester::inline_head`] is the ring's front).
    pub inline_at: u32,
}

impl SendWqe {
    fn end_psn(&self) -> u64 {
        self.first_psn.saturating_add(self.npsn)
    }
}

/// A failure that ends a work request with an error status; the QP decides what
/// happens to the others (ERR for RC, SQE for UC/UD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fault {
    /// Index in the send queue.
    pub idx: usize,
    /// Status of that work request.
    pub status: WcStatus,
}

/// One packet written by the requester. Its path is the QP's connected path, or on a UD
/// QP the datagram's destination ([`Requester::ud_sent`]): the driver's datagram reads
/// it from there once, where carrying it here copied its 40 bytes at every hand-over
/// from the requester to the link (~25 instructions a packet, callgrind, `msg_rate`).
pub(crate) struct Emitted {
    pub len: usize,
    /// Bytes the packet moves: `len`, or a by-reference WRITE's message length.
    pub moves: usize,
}

#[derive(Debug)]
pub(crate) struct Requester {
    pub wqes: VecDeque<SendWqe>,
    /// `wqes[..started]` have PSNs.
    started: usize,
    /// First PSN not yet given to a WQE.
    next_psn: u64,
    /// Oldest PSN not delivered.
    una: u64,
    /// Next PSN the cursor sends (first transmission, or again after a go-back).
    send_psn: u64,
    /// One past the highest PSN ever sent.
    send_high: u64,
    /// The responder's expected PSN as last reported (selective mode).
    cum_acked: u64,
    board: VecDeque<u8>,
    holes: VecDeque<u64>,
    rd_atomic: u32,
    timer: Option<Instant>,
    rnr_until: Option<Instant>,
    rnr_psn: u64,
    /// The PSN the last RNR NAK refused, until the requester gets past it.
    rnr_refused: Option<u64>,
    retry_left: u8,
    rnr_left: u8,
    /// Go-back-N: the PSN of the last go-back triggered by a NAK or an out-of-order
    /// response, so a burst of such signals for one loss causes one retransmission.
    recovering_at: Option<u64>,
    /// The encoded BTH of this QP's requests to its connected peer (P_Key and
    /// destination QP), rebuilt when either changes: a packet patches in its opcode,
    /// flags and PSN instead of encoding every BTH field again. Kept with the P_Key
    /// and destination QP it was made for, compared as they are (reading them back
    /// from the BTH's bytes was ~20 instructions a packet, callgrind, `msg_rate`).
    template: Option<(u16, u32, PacketTemplate)>,
    /// The payloads of inline WQEs, in WQE order: a WQE's bytes join the back when it
    /// is posted and leave the front when it retires, so a stream of small inline
    /// SENDs allocates nothing per message and its payloads sit side by side.
    inline: ByteRing,
    /// The position of `inline`'s front in the ring's byte stream (wrapping).
    inline_head: u32,
    /// The destinations of a UD QP's WQEs, one per WQE in the same order (empty on
    /// other QPs).
    ud: VecDeque<UdDest>,
    /// The path of the UD datagram last written (`emit`; a UD WQE may retire in the
    /// same call, taking its `ud` entry with it).
    ud_sent: IcrcPath,
    /// One past the highest PSN sent with AckReq since the last go-back: while it is
    /// at or below `una`, no ACK is on its way ([`crate::cc`] window rule).
    asked: u64,
    /// First transmissions of SEND/WRITE packets that asked for an ACK, with their
    /// send times, oldest first: the RTT samples of the congestion window.
    probes: VecDeque<(u64, Instant)>,
    /// The congestion window ([`crate::cc`]; used when the endpoint enables it).
    cc: Window,
    /// The QP's send queue depth (`max_send_wr`; 0: unknown, and every message asks
    /// for its ACK).
    depth: usize,
    /// Ring mode ([`crate::ring`]): bumped when an RNR refusal sends the requester back,
    /// so the releases of descriptors sent before it (which the peer discarded) are
    /// known for what they are.
    ring_epoch: u8,
    /// The tag of the descriptor [`Requester::emit_ring`] just wrote, for the packet's
    /// [`crate::Transmit`] (taken at once by the endpoint: [`Requester::take_ring_tag`]).
    /// Beside [`Emitted`], not in it: a third field made every packet's `Emitted`
    /// a return through memory (~130 instructions a ping-pong round, callgrind).
    ring_tag: Option<RingTag>,
}

impl Requester {
    pub fn new() -> Requester {
        Requester {
            wqes: VecDeque::new(),
            started: 0,
            next_psn: 0,
            una: 0,
            send_psn: 0,
            send_high: 0,
            cum_acked: 0,
            board: VecDeque::new(),
            holes: VecDeque::new(),
            rd_atomic: 0,
            timer: None,
            rnr_until: None,
            rnr_psn: 0,
            rnr_refused: None,
            retry_left: 0,
            rnr_left: 0,
            recovering_at: None,
            template: None,
            inline: ByteRing::default(),
            inline_head: 0,
            ud: VecDeque::new(),
            ud_sent: IcrcPath::v4(
                std::net::Ipv4Addr::UNSPECIFIED,
                std::net::Ipv4Addr::UNSPECIFIED,
                0,
            ),
            asked: 0,
            probes: VecDeque::new(),
            cc: Window::new(1),
            depth: 0,
            ring_epoch: 0,
            ring_tag: None,
        }
    }

    /// A requester for a send queue of `depth` work requests.
    pub fn with_depth(depth: usize) -> Requester {
        Requester {
            depth,
            ..Requester::new()
        }
    }

    /// Whether the last packet of WQE `w` may leave AckReq clear: nobody waits for
    /// its completion (an unsignaled SEND or WRITE), the send queue is less than half
    /// full (so no post waits for room), the peer's responder is known to acknowledge
    /// unasked packets, and its bound on doing so
    /// ([`QpAttrs::peer_ack_delay_us`](crate::QpAttrs::peer_ack_delay_us), its
    /// [`Config::ack_delay_us`](crate::Config::ack_delay_us)) comes well within the
    /// local ACK timeout ([`crate::ACK_DELAY_MARGIN`]), so it is never taken for a loss
    /// (the last two kept with the QP's attributes: [`QpCommon::unasked_ok`]).
    fn may_leave_unasked(&self, q: &QpCommon, w: &SendWqe) -> bool {
        debug_assert_eq!(q.unasked_ok(), crate::ctx::unasked_ok(q.attrs()));
        q.unasked_ok()
            && !w.signaled
            && matches!(w.op, WrOp::Send { .. } | WrOp::Write { .. })
            && self.wqes.len() * 2 < self.depth
    }

    /// PSNs this requester may have in flight: the QP's `max_inflight`, or less while
    /// the congestion window ([`crate::cc`]) is smaller.
    fn cap(&self, q: &QpCommon, config: &crate::Config) -> u64 {
        let max = u64::from(q.attrs().max_inflight);
        match config.congestion {
            CongestionControl::Delay(_) if q.qp_type == QpType::Rc => max.min(self.cc.packets()),
            _ => max,
        }
    }

    /// The congestion state (window at `max_inflight` and no samples when off).
    pub fn congestion(&self) -> CongestionState {
        self.cc.state()
    }

    /// Queue a send work request, its fields read in place. `sg_list`: the WQE's
    /// gather list (empty with an inline payload). `inline`: the payload, gathered at
    /// post time. `ud`: its destination, on a UD QP.
    // Always inlined: since `post_one` has two instances (ring mode's doorbell), the
    // compiler put it out of line (~150 instructions a ping-pong round, callgrind).
    // Its inline payload goes into a `ByteRing`, whose append inlines wherever it is
    // used: a `VecDeque`'s `extend` did so only with a single caller.
    #[inline(always)]
    pub fn push(
        &mut self,
        wr: &SendWr,
        sg_list: SgList,
        inline: Option<&[u8]>,
        ud: Option<UdDest>,
        len: u64,
        pre_fault: Option<WcStatus>,
    ) {
        debug_assert!(inline.is_none() || sg_list.is_empty());
        let inline_at = self.inline_head.wrapping_add(self.inline.len() as u32);
        // The WQE gets the gather list it is given (an empty one with an inline
        // payload, which needs none); the request's other fields are read in place.
        if let Some(data) = inline {
            self.inline.extend(data);
        }
        let (wr_id, op, signaled, fence, solicited) =
            (wr.wr_id, wr.op, wr.signaled, wr.fence, wr.solicited);
        if let Some(d) = ud {
            self.ud.push_back(d);
        }
        self.wqes.push_back(SendWqe {
            op,
            len,
            first_psn: u64::MAX,
            pre_fault,
            signaled,
            fence,
            solicited,
            by_ref: false,
            ring: false,
            inline: inline.is_some(),
            sg_list,
            wr_id,
            npsn: 0,
            resp_seen: 0,
            inline_at,
        });
    }

    /// Copy bytes `[from, from + out.len())` of WQE `w`'s inline payload into `out`.
    fn copy_inline(&self, w: &SendWqe, from: usize, out: &mut [u8]) {
        let start = w.inline_at.wrapping_sub(self.inline_head) as usize + from;
        let (a, b) = self.inline.as_slices();
        let n = out.len();
        if start + n <= a.len() {
            out.copy_from_slice(&a[start..start + n]);
        } else if start >= a.len() {
            let s = start - a.len();
            out.copy_from_slice(&b[s..s + n]);
        } else {
            let k = a.len() - start;
            out[..k].copy_from_slice(&a[start..]);
            out[k..].copy_from_slice(&b[..n - k]);
        }
    }

    /// The `k` front WQEs retired (completed, in order): they leave the queue with
    /// their `inline` payload bytes and their UD destinations, in one removal each
    /// rather than one per WQE.
    ///
    /// One WQE (an ACK per message: many QPs with one in flight each) is popped, and
    /// a ring left with nothing is cleared: a `drain` costs its set-up and drop
    /// (~84 instructions a message at 256 QPs × 1 in flight as a drain of one).
    #[inline]
    fn retire_front(&mut self, k: usize, inline: usize) {
        if k == 1 {
            self.wqes.pop_front();
        } else {
            self.wqes.drain(..k);
        }
        if inline > 0 {
            let n = inline.min(self.inline.len());
            self.inline.consume(n);
            self.inline_head = self.inline_head.wrapping_add(n as u32);
        }
        if !self.ud.is_empty() {
            let u = k.min(self.ud.len());
            self.ud.drain(..u);
        }
    }

    /// Start the PSN space at `sq_psn` (RTR → RTS). The 64-bit counter starts one
    /// wrap above zero so expansion of slightly older PSNs never saturates.
    pub fn start(&mut self, q: &QpCommon) {
        let base = (1u64 << 24) | u64::from(q.attrs().sq_psn.value());
        self.next_psn = base;
        self.una = base;
        self.send_psn = base;
        self.send_high = base;
        self.cum_acked = base;
        self.asked = base;
        self.retry_left = q.attrs().retry_cnt;
        self.rnr_left = q.attrs().rnr_retry;
        self.cc = Window::new(q.attrs().max_inflight);
    }

    pub fn is_empty(&self) -> bool {
        self.wqes.is_empty()
    }

    /// The destination of the UD datagram last written ([`Emitted`]).
    pub fn ud_sent(&self) -> &IcrcPath {
        &self.ud_sent
    }

    /// True when [`Requester::poll_transmit`] would certainly return nothing until an
    /// input (a post, a packet, a timer) changes the requester: no hole to repeat,
    /// every started PSN sent, and no WQE left to start. False means only "maybe":
    /// the window or the ordering rules may still hold the next packet back.
    #[inline]
    pub fn nothing_to_send(&self) -> bool {
        self.holes.is_empty() && self.send_psn >= self.next_psn && self.started >= self.wqes.len()
    }

    #[inline]
    pub fn next_deadline(&self) -> Option<Instant> {
        match (self.timer, self.rnr_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Index of the started WQE whose PSN range holds `psn`.
    #[inline]
    fn idx_of(&self, psn: u64) -> Option<usize> {
        // The common case first, inline: the newest started WQE (a first transmission;
        // the call was ~35 instructions a packet, callgrind, `msg_rate`).
        let i = self.started.wrapping_sub(1);
        if let Some(w) = self.wqes.get(i).filter(|_| i < self.started) {
            if w.first_psn <= psn && psn < w.end_psn() {
                return Some(i);
            }
        }
        self.idx_of_older(psn)
    }

    /// [`Requester::idx_of`] past the newest started WQE: the oldest (an ACK or
    /// response for `una`), then a search.
    #[inline(never)]
    fn idx_of_older(&self, psn: u64) -> Option<usize> {
        if let Some(w) = self.wqes.front().filter(|_| self.started > 0) {
            if w.first_psn <= psn && psn < w.end_psn() {
                return Some(0);
            }
        }
        let i = self.wqes.partition_point(|w| w.end_psn() <= psn);
        (i < self.started && self.wqes[i].first_psn <= psn).then_some(i)
    }

    fn flags(&self, psn: u64) -> u8 {
        psn.checked_sub(self.una)
            .and_then(|i| self.board.get(i as usize).copied())
            .unwrap_or(DELIVERED)
    }

    fn set_flag(&mut self, psn: u64, f: u8) {
        if let Some(b) = psn
            .checked_sub(self.una)
            .and_then(|i| self.board.get_mut(i as usize))
        {
            *b |= f;
        }
    }

    fn timeout_micros(q: &QpCommon) -> Option<u64> {
        local_ack_timeout_micros(q.attrs().timeout)
    }

    fn arm_timer(&mut self, q: &QpCommon, now: Instant) {
        self.timer =
            if q.qp_type == QpType::Rc && self.una < self.send_high && self.rnr_until.is_none() {
                Self::timeout_micros(q).map(|t| now + t)
            } else {
                None
            };
    }

    // ---------------------------------------------------------------- transmit

    /// Write the next request packet into `buf`, if one may go now.
    pub fn poll_transmit<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        buf: &mut [u8],
    ) -> Result<Option<Emitted>, Fault> {
        if !matches!(q.state, QpState::Rts | QpState::Sqd) || self.rnr_until.is_some() {
            return Ok(None);
        }
        let max_cap = u64::from(q.attrs().max_inflight);
        let mut cap = self.cap(q, ctx.config);
        // The congestion window may have shrunk below PSNs already in flight none of
        // which asked for an ACK: then no ACK would come to open it until the
        // retransmission timer. One packet beyond the window asks (the AckReq rule in
        // `emit` sets it on a packet at or past the window's edge).
        if cap < max_cap && self.asked <= self.una && self.una < self.send_psn {
            cap = cap.max((self.send_psn + 1 - self.una).min(max_cap));
        }
        // Selective repeat: holes first.
        while let Some(p) = self.holes.pop_front() {
            if p < self.una || p >= self.next_psn || self.flags(p) & (DELIVERED | SACKED) != 0 {
                continue;
            }
            if let Some(idx) = self.idx_of(p) {
                return self.emit(q, ctx, buf, idx, p, true).map(Some);
            }
        }
        loop {
            if self.send_psn < self.next_psn {
                let Some(idx) = self.idx_of(self.send_psn) else {
                    // Cannot happen: started WQEs tile [una, next_psn). Resynchronise.
                    self.send_psn = self.next_psn;
                    continue;
                };
                let p = self.send_psn;
                // A descriptor has no PSN window ([`Requester::start_next`]). One test of
                // the mode on the packet path: with the descriptor's tests folded into
                // the window's, they cost a ping-pong round ~50 instructions (callgrind,
                // docs/results/verbs-inline-20261202s35).
                if q.ring_mode && self.wqes[idx].ring {
                    return self.emit_ring(q, ctx, buf, idx, p).map(Some);
                }
                if q.qp_type == QpType::Rc
                    && p >= self.una + by_ref_cap(cap, self.wqes[idx].by_ref && ctx.sharing)
                {
                    return Ok(None);
                }
                return self.emit(q, ctx, buf, idx, p, false).map(Some);
            }
            if !self.start_next(q, ctx, cap)? {
                return Ok(None);
            }
        }
    }

    /// Give the next WQE its PSNs if the rules allow it to start now.
    fn start_next<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        cap: u64,
    ) -> Result<bool, Fault> {
        let idx = self.started;
        let Some(w) = self.wqes.get(idx) else {
            return Ok(false);
        };
        if q.state != QpState::Rts {
            return Ok(false); // SQD: nothing new starts
        }
        if let Some(status) = w.pre_fault {
            // Report in order: only once everything before it has completed.
            return if idx == 0 {
                Err(Fault { idx, status })
            } else {
                Ok(false)
            };
        }
        let op = w.op;
        // IBTA Vol 1 ch. 10 (work request ordering): a fenced WQE waits for all earlier
        // READ/atomics.
        if w.fence && self.rd_atomic > 0 {
            return Ok(false);
        }
        if op.is_read_or_atomic() && self.rd_atomic >= u32::from(q.attrs().max_rd_atomic) {
            return Ok(false);
        }
        let mtu = q.mtu();
        // Ring mode's rules, behind one test of the mode (the packet path's only cost
        // of them). A descriptor has no PSN window: the link's ring bounds what is in
        // flight (a full ring holds the driver's sends back), and the send queue what
        // waits. A QP never has messages of both kinds in flight ([`crate::ring`]): the
        // peer's responder takes a descriptor only between packet-path messages, and
        // a descriptor's release acknowledges nothing sent as packets. (Off the mode
        // no WQE is a descriptor: the mode is set before the QP leaves INIT.)
        let ring = if q.ring_mode {
            let ring = goes_by_ring(q, w, mtu);
            if self.started > 0 && self.wqes[0].ring != ring {
                return Ok(false);
            }
            ring
        } else {
            false
        };
        if q.qp_type == QpType::Rc && !ring && self.next_psn >= self.una + cap {
            return Ok(false);
        }
        if q.qp_type == QpType::Ud && w.len > mtu {
            return Err(Fault {
                idx,
                status: WcStatus::LocLenErr,
            });
        }
        let by_ref = !ring && goes_by_reference(q, ctx, w);
        let npsn = if by_ref {
            byref::chunks(w.len)
        } else if op.is_atomic() {
            1
        } else {
            packets_for(w.len, mtu)
        };
        if by_ref {
            ctx.stats.by_reference_sent += 1;
        }
        let flag = if op.is_read_or_atomic() {
            NEEDS_RESPONSE
        } else {
            0
        };
        let w = &mut self.wqes[idx];
        w.first_psn = self.next_psn;
        w.npsn = npsn;
        w.by_ref = by_ref;
        w.ring = ring;
        self.next_psn += npsn;
        if npsn == 1 {
            // Most messages are one packet: no iterator and reserve for one flag.
            self.board.push_back(flag);
        } else {
            self.board.extend(std::iter::repeat_n(flag, npsn as usize));
        }
        self.started += 1;
        if op.is_read_or_atomic() {
            self.rd_atomic += 1;
        }
        Ok(true)
    }

    /// Build the request packet for PSN `p` of WQE `idx`. `single`: a selective-repeat
    /// hole (one packet; a READ asks for just that packet's bytes).
    fn emit<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        buf: &mut [u8],
        idx: usize,
        p: u64,
        single: bool,
    ) -> Result<Emitted, Fault> {
        let mtu = q.mtu();
        let w = &self.wqes[idx];
        // Read now for the bookkeeping at the end (after `w`'s borrow; and before
        // `advance`, which may retire the WQE): one WQE lookup, not three.
        let (op, by_ref) = (w.op, w.by_ref);
        let i = p - w.first_psn;
        let n = w.npsn;
        let transport = q.qp_type.transport();
        let fault = |status| Fault { idx, status };
        // The fixed part of the headers: the QP's cached template, or on UD one for this
        // datagram's destination and Q_Key.
        let ud_template;
        let (template, path) = match (q.qp_type, self.ud.get(idx)) {
            (QpType::Ud, Some(ud)) => {
                // A Q_Key with its top bit set means "use the QP's own" (IBA
                // 10.2.5; ibv_post_send: "if the MSB is set, the QP's Q_Key is used").
                let qkey = if ud.qkey & 0x8000_0000 != 0 {
                    q.attrs().qkey
                } else {
                    ud.qkey
                };
                let deth = DethRepr {
                    qkey,
                    src_qp: q.qpn,
                };
                ud_template = PacketTemplate::new(q.attrs().pkey, ud.qpn, Some(deth))
                    .map_err(|_| fault(WcStatus::LocQpOpErr))?;
                (&ud_template, &ud.path)
            }
            (QpType::Ud, None) => return Err(fault(WcStatus::LocQpOpErr)),
            (_, _) => match &q.attrs().path {
                Some(path) => {
                    let (pkey, dest) = (q.attrs().pkey, q.attrs().dest_qpn);
                    if !self
                        .template
                        .is_some_and(|(p, d, _)| p == pkey && d == dest)
                    {
                        let t = PacketTemplate::new(pkey, dest, None)
                            .map_err(|_| fault(WcStatus::LocQpOpErr))?;
                        self.template = Some((pkey, dest, t));
                    }
                    let (_, _, t) = self.template.as_ref().ok_or(fault(WcStatus::LocQpOpErr))?;
                    (t, path)
                }
                None => return Err(fault(WcStatus::LocQpOpErr)),
            },
        };
        let mut repr = PacketFields {
            opcode: weft_wire::Opcode(0),
            solicited: false,
            ack_req: false,
            psn: Psn::new(p as u32),
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            imm: None,
            payload_len: 0,
        };
        let mut payload_len = 0u64;
        let mut payload_off = 0u64;
        let mut by_ref_len = 0u64;
        let consumed;
        let last;
        match w.op {
            WrOp::Write { imm, remote } if w.by_ref => {
                // Chunk i of n, each a WRITE Only naming the rest of the message.
                let (off, clen) = byref::chunk(w.len, n, i);
                last = i + 1 >= n;
                let with_imm = imm.is_some() && last;
                let pos = weft_wire::roce::Position::Only;
                repr.opcode = opcode_for(transport, Operation::Write, pos, with_imm)
                    .ok_or(fault(WcStatus::LocQpOpErr))?;
                if with_imm {
                    repr.imm = imm;
                }
                repr.reth = Some(RethRepr {
                    va: remote.addr.wrapping_add(off),
                    rkey: remote.rkey,
                    dma_len: (w.len - off) as u32,
                });
                repr.solicited = w.solicited && last;
                payload_off = off;
                by_ref_len = clen;
                let spans = sge_spans(&w.sg_list, off, clen).count();
                payload_len = (spans * byref::SPAN_LEN) as u64;
                consumed = 1;
            }
            WrOp::Send { imm } | WrOp::Write { imm, .. } => {
                let pos = position(i, n);
                let operation = if matches!(w.op, WrOp::Send { .. }) {
                    Operation::Send
                } else {
                    Operation::Write
                };
                let with_imm = imm.is_some() && pos.ends_message();
                repr.opcode = opcode_for(transport, operation, pos, with_imm)
                    .ok_or(fault(WcStatus::LocQpOpErr))?;
                if with_imm {
                    repr.imm = imm;
                }
                if let WrOp::Write { remote, .. } = w.op {
                    if pos.starts_message() {
                        repr.reth = Some(RethRepr {
                            va: remote.addr,
                            rkey: remote.rkey,
                            dma_len: w.len as u32,
                        });
                    }
                }
                repr.solicited = w.solicited && pos.ends_message();
                payload_off = i * mtu;
                payload_len = packet_len(w.len, mtu, i);
                consumed = 1;
                last = pos.ends_message();
            }
            WrOp::Read { remote } => {
                let resp_all = !single || (p == w.first_psn && w.resp_seen == 0);
                let len = if resp_all {
                    w.len - (i * mtu).min(w.len)
                } else {
                    packet_len(w.len, mtu, i)
                };
                repr.opcode = opcode_for(
                    transport,
                    Operation::ReadRequest,
                    weft_wire::roce::Position::Only,
                    false,
                )
                .ok_or(fault(WcStatus::LocQpOpErr))?;
                repr.reth = Some(RethRepr {
                    va: remote.addr.wrapping_add(i * mtu),
                    rkey: remote.rkey,
                    dma_len: len as u32,
                });
                consumed = if resp_all { n - i } else { 1 };
                last = true;
            }
            WrOp::CompareSwap {
                remote,
                compare,
                swap,
            } => {
                repr.opcode = opcode_for(
                    transport,
                    Operation::CompareSwap,
                    weft_wire::roce::Position::Only,
                    false,
                )
                .ok_or(fault(WcStatus::LocQpOpErr))?;
                repr.atomic_eth = Some(AtomicEthRepr {
                    va: remote.addr,
                    rkey: remote.rkey,
                    swap_add: swap,
                    compare,
                });
                consumed = 1;
                last = true;
            }
            WrOp::FetchAdd { remote, add } => {
                repr.opcode = opcode_for(
                    transport,
                    Operation::FetchAdd,
                    weft_wire::roce::Position::Only,
                    false,
                )
                .ok_or(fault(WcStatus::LocQpOpErr))?;
                repr.atomic_eth = Some(AtomicEthRepr {
                    va: remote.addr,
                    rkey: remote.rkey,
                    swap_add: add,
                    compare: 0,
                });
                consumed = 1;
                last = true;
            }
        }
        // AckReq (IBTA Vol 1 §9.7, reliable service): on the last packet of a message, every
        // `ack_req_interval` PSNs, on the packet that fills the window, and on every
        // selective retransmission, so the responder's ACKs can be coalesced but a
        // sender never waits for an ACK nobody asked for.
        // The last packet of a message nobody waits for may leave it clear: the
        // responder then acknowledges it with the next ACK asked for, or after its
        // delayed-ACK bound (`may_leave_unasked`; only toward a peer that announced
        // that bound: rxe never acknowledges a packet that does not ask). Not when it
        // is resent: Linux rxe
        // acknowledges a first arrival only when it asks, and a duplicate SEND or
        // WRITE also only when it asks in older kernels, so a resend that did not ask
        // could go unacknowledged until the QP exhausted its retries on a message that
        // arrived.
        let interval = u64::from(ctx.config.ack_req_interval.max(1));
        let resent = p < self.send_high;
        repr.ack_req = q.qp_type == QpType::Rc
            && ((last && (resent || !self.may_leave_unasked(q, w)))
                || single
                || p % interval == interval - 1
                || p + consumed
                    >= self.una + by_ref_cap(self.cap(q, ctx.config), w.by_ref && ctx.sharing));

        // One copy: headers first, then the payload gathered straight into the packet.
        let plen = payload_len as usize;
        repr.payload_len = plen;
        // A packet with no RETH, AtomicETH or immediate (a SEND: most small messages)
        // takes the template's BTH-only path, which writes the same bytes.
        let at = if repr.reth.is_none() && repr.atomic_eth.is_none() && repr.imm.is_none() {
            template.emit_bth_only(
                buf,
                repr.opcode,
                repr.solicited,
                repr.ack_req,
                repr.psn,
                plen,
            )
        } else {
            template.emit_headers(buf, &repr)
        }
        .map_err(|_| fault(WcStatus::LocQpOpErr))?;
        if plen > 0 {
            let dst = &mut buf[at.clone()];
            match w.inline {
                _ if w.by_ref => {
                    // Each span as this process's address (checked like a gather).
                    let spans = sge_spans(&w.sg_list, payload_off, by_ref_len);
                    let outs = dst.chunks_exact_mut(byref::SPAN_LEN);
                    for ((s, addr, len), out) in spans.zip(outs) {
                        let addr = ctx
                            .mem
                            .pull_address(Key::Local(s.lkey), q.pd, addr, len)
                            .ok_or(fault(WcStatus::LocProtErr))?;
                        byref::encode(RemoteSpan { addr, len }, out);
                    }
                }
                true => self.copy_inline(w, payload_off as usize, dst),
                false => gather(&*ctx.mem, q.pd, &w.sg_list, payload_off, dst)
                    .map_err(|e| fault(local_status(e)))?,
            }
        }
        let len = at.end + IbPacketRepr::pad_for(plen) + wire_len::ICRC;
        if ctx.config.write_icrc {
            path.fill(&mut buf[..len])
                .map_err(|_| fault(WcStatus::LocLenErr))?;
        }
        if q.qp_type == QpType::Ud {
            self.ud_sent = *path;
        }

        if resent {
            ctx.stats.retransmitted_packets += 1;
            // Karn's rule: the ACK of a resent PSN is no RTT sample.
            if !self.probes.is_empty() {
                self.probes
                    .retain(|&(psn, _)| psn < p || psn >= p + consumed);
            }
        } else if repr.ack_req
            && matches!(op, WrOp::Send { .. } | WrOp::Write { .. })
            && matches!(ctx.config.congestion, CongestionControl::Delay(_))
        {
            self.probes.push_back((p + consumed - 1, ctx.now));
        }
        if repr.ack_req {
            self.asked = self.asked.max(p + consumed);
        }
        if !single {
            self.send_psn = p + consumed;
        }
        self.send_high = self.send_high.max(p + consumed);
        if self.timer.is_none() {
            self.arm_timer(q, ctx.now);
        }
        let moves = if by_ref {
            usize::try_from(by_ref_len).unwrap_or(usize::MAX)
        } else {
            len
        };
        if q.qp_type != QpType::Rc && last {
            // Unreliable: the message is done once its last packet is out.
            for psn in self.wqes[idx].first_psn..self.wqes[idx].end_psn() {
                self.set_flag(psn, DELIVERED);
            }
            self.advance(q, ctx);
        }
        Ok(Emitted { len, moves })
    }

    /// Write WQE `idx`'s ring descriptor (its one PSN, `p`) into `buf`
    /// ([`crate::ring`]): the header, then the payload straight from the inline ring or
    /// the gather list. No AckReq, no RTT probe: the link's release acknowledges it.
    /// Out of line: inlined, it grew `emit` and moved the packet path's inlining
    /// (`opcode_for`, ~100 instructions a ping-pong round, callgrind).
    #[inline(never)]
    fn emit_ring<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        buf: &mut [u8],
        idx: usize,
        p: u64,
    ) -> Result<Emitted, Fault> {
        let fault = |status| Fault { idx, status };
        let w = &self.wqes[idx];
        if q.attrs().path.is_none() {
            return Err(fault(WcStatus::LocQpOpErr));
        }
        let op = match w.op {
            WrOp::Send { imm } => RingOp::Send {
                imm,
                solicited: w.solicited,
            },
            WrOp::Write { imm, remote } => RingOp::Write {
                va: remote.addr,
                rkey: remote.rkey,
                imm,
            },
            _ => return Err(fault(WcStatus::LocQpOpErr)),
        };
        let d = RingDescriptor {
            dest_qpn: q.attrs().dest_qpn,
            seq: p as u32 & 0x00ff_ffff,
            op,
        };
        let plen = usize::try_from(w.len).map_err(|_| fault(WcStatus::LocLenErr))?;
        let at = d.emit(buf, plen).map_err(|_| fault(WcStatus::LocLenErr))?;
        let dst = buf
            .get_mut(at..at + plen)
            .ok_or(fault(WcStatus::LocLenErr))?;
        if w.inline {
            self.copy_inline(w, 0, dst);
        } else {
            gather(&*ctx.mem, q.pd, &w.sg_list, 0, dst).map_err(|e| fault(local_status(e)))?;
        }
        if p < self.send_high {
            ctx.stats.retransmitted_packets += 1;
        }
        ctx.stats.ring_sent += 1;
        self.send_psn = p + 1;
        self.send_high = self.send_high.max(p + 1);
        if self.timer.is_none() {
            self.arm_timer(q, ctx.now);
        }
        let len = at + plen;
        let asks = self.wqes[idx].signaled || self.wqes.len() * 2 >= self.depth;
        self.ring_tag = Some(RingTag::new(q.qpn, p as u32, self.ring_epoch, asks));
        Ok(Emitted { len, moves: len })
    }

    // ---------------------------------------------------------------- receive

    /// An ACK, NAK, READ response or atomic ACK for this QP.
    pub fn handle_response<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        repr: &IbPacketRepr,
        operation: Operation,
        payload: &[u8],
    ) -> Result<(), Fault> {
        if !matches!(q.state, QpState::Rts | QpState::Sqd) || q.qp_type != QpType::Rc {
            ctx.stats.dropped_state += 1;
            return Ok(());
        }
        let p = repr.bth.psn.expand(self.una);
        if p >= self.next_psn {
            // Acknowledges something never sent: a forged or confused packet.
            ctx.stats.ghost_responses += 1;
            return Ok(());
        }
        if p < self.una {
            ctx.stats.duplicate_responses += 1;
            return Ok(());
        }
        let selective = q.attrs().recovery == Recovery::Selective;
        match operation {
            Operation::Acknowledge => {
                let Some(aeth) = repr.aeth else {
                    ctx.stats.malformed += 1;
                    return Ok(());
                };
                match aeth.syndrome {
                    Syndrome::Ack { .. } => {
                        let una = self.una;
                        self.ack_through(q, ctx, p + 1);
                        self.sample_rtt(ctx, p + 1, self.una - una);
                    }
                    Syndrome::Nak(NakCode::PSN_SEQUENCE_ERROR) if selective => {
                        // Selective mode: PSN = the responder's expected PSN (cumulative
                        // ACK), MSN field = the out-of-order PSN it now holds.
                        let sack = Psn::new(aeth.msn).expand(p);
                        self.on_sack(q, ctx, p, sack);
                        self.congestion_loss(ctx);
                    }
                    Syndrome::Nak(NakCode::PSN_SEQUENCE_ERROR) => {
                        ctx.stats.seq_naks_received += 1;
                        self.ack_through(q, ctx, p);
                        self.congestion_loss(ctx);
                        // A sequence NAK for the PSN an RNR NAK refused, with no
                        // progress since, is the responder answering the packets sent
                        // after the refused one (rdma_rxe does; weft's responder drops
                        // them silently). It costs no retry: counted against
                        // retry_cnt, a multi-packet SEND that met RNR NAKs failed with
                        // RetryExcErr though rnr_retry was 7, infinite.
                        // - During the RNR wait it asks for nothing: the wait's end
                        //   resends from p.
                        // - After the wait it may also mean that resend was lost: go
                        //   back to p once per RNR round (at worst one redundant
                        //   resend when the NAK was only late), rather than wait for
                        //   the ACK timeout, which may be infinite (timeout 0).
                        if self.rnr_refused == Some(p) {
                            if self.rnr_until.is_none() {
                                self.rnr_refused = None;
                                self.go_back_once(p.min(self.una));
                            }
                            return Ok(());
                        }
                        // IBTA Vol 1 §9.7: a NAK-sequence error counts against retry_cnt.
                        if self.recovering_at != Some(p.min(self.una)) {
                            self.consume_retry()?;
                        }
                        let from = p.min(self.una);
                        self.go_back_once(from);
                    }
                    Syndrome::RnrNak { timer } => return self.rnr_nak(q, ctx, p, timer),
                    Syndrome::Nak(code) => return Err(self.fatal_nak(q, ctx, p, code)),
                    Syndrome::Reserved(_) => ctx.stats.malformed += 1,
                }
            }
            Operation::ReadResponse | Operation::AtomicAcknowledge => {
                let Some(idx) = self.idx_of(p) else {
                    ctx.stats.ghost_responses += 1;
                    return Ok(());
                };
                let w = &self.wqes[idx];
                let fits = match operation {
                    Operation::ReadResponse => {
                        matches!(w.op, WrOp::Read { .. })
                            && payload.len() as u64 == packet_len(w.len, q.mtu(), p - w.first_psn)
                    }
                    _ => w.op.is_atomic() && repr.atomic_ack_eth.is_some(),
                };
                if !fits {
                    ctx.stats.bad_responses += 1;
                    return Ok(());
                }
                if let Some(Syndrome::Nak(_) | Syndrome::RnrNak { .. } | Syndrome::Reserved(_)) =
                    repr.aeth.map(|a| a.syndrome)
                {
                    ctx.stats.bad_responses += 1;
                    return Ok(());
                }
                // A response implicitly acknowledges every earlier request (§9.7), and
                // shows the responder executed this one: its ePSN is past the range.
                let (first, end) = (w.first_psn, w.end_psn());
                self.ack_through(q, ctx, first);
                self.cum_acked = self.cum_acked.max(end);
                if self.flags(p) & DELIVERED != 0 {
                    ctx.stats.duplicate_responses += 1;
                    return Ok(());
                }
                if !selective && p != self.una {
                    // Go-back-N takes responses in order only.
                    ctx.stats.out_of_order_responses += 1;
                    let una = self.una;
                    self.go_back_once(una);
                    return Ok(());
                }
                // `ack_through` may have retired WQEs in front of this one.
                let idx = self.idx_of(p).unwrap_or(idx);
                let w = &self.wqes[idx];
                let placed = match operation {
                    Operation::ReadResponse => {
                        let off = (p - w.first_psn) * q.mtu();
                        scatter(ctx.mem, q.pd, &w.sg_list, off, payload)
                    }
                    _ => {
                        let orig = repr.atomic_ack_eth.map_or(0, |a| a.orig);
                        scatter(ctx.mem, q.pd, &w.sg_list, 0, &orig.to_le_bytes())
                    }
                };
                if let Err(e) = placed {
                    return Err(Fault {
                        idx,
                        status: local_status(e),
                    });
                }
                self.wqes[idx].resp_seen += 1;
                self.set_flag(p, DELIVERED);
                self.advance(q, ctx);
            }
            _ => ctx.stats.unexpected_opcode += 1,
        }
        Ok(())
    }

    /// The responder refused PSN `p` for want of a receive WQE (an RNR NAK, or a ring
    /// ERROR carrying one): everything before it arrived; `p` and what follows wait
    /// for the RNR timer `timer`, then go again, while `rnr_retry` lasts.
    fn rnr_nak<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        p: u64,
        timer: u8,
    ) -> Result<(), Fault> {
        ctx.stats.rnr_naks_received += 1;
        self.ack_through(q, ctx, p);
        if q.attrs().rnr_retry != 7 {
            if self.rnr_left == 0 {
                let idx = self.idx_of(p).unwrap_or(0);
                return Err(Fault {
                    idx,
                    status: WcStatus::RnrRetryExcErr,
                });
            }
            self.rnr_left -= 1;
        }
        // The refused packet is no longer held by the responder.
        if let Some(f) = self.board.get_mut((p - self.una) as usize) {
            *f &= !SACKED;
        }
        self.rnr_until = Some(ctx.now + u64::from(rnr_timer_micros(timer)));
        self.rnr_psn = p;
        self.rnr_refused = Some(p);
        self.timer = None;
        Ok(())
    }

    /// The responder refused PSN `p` for good with NAK `code` (a NAK packet, or a ring
    /// ERROR carrying one): everything before it arrived; the fault of its WQE.
    fn fatal_nak<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        p: u64,
        code: NakCode,
    ) -> Fault {
        ctx.stats.fatal_naks_received += 1;
        self.ack_through(q, ctx, p);
        let idx = self.idx_of(p).unwrap_or(0);
        let status = requester_status(code).unwrap_or(WcStatus::RemOpErr);
        Fault { idx, status }
    }

    /// Ring mode's direct post ([`crate::SendQueue::post_ring`]): when the newest WQE
    /// is the only thing to send (everything before it sent, no hole), goes as a
    /// descriptor, and the rules let it start now, start it and write its descriptor
    /// into `buf`. `None`: it waits for the usual transmit.
    pub fn start_ring_now<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        buf: &mut [u8],
    ) -> Result<Option<(Emitted, RingTag)>, Fault> {
        let alone = q.state == QpState::Rts
            && self.rnr_until.is_none()
            && self.holes.is_empty()
            && self.send_psn == self.next_psn
            && self.started + 1 == self.wqes.len()
            && self
                .wqes
                .back()
                .is_some_and(|w| goes_by_ring(q, w, q.mtu()));
        let cap = self.cap(q, ctx.config);
        if !alone || !self.start_next(q, ctx, cap)? {
            return Ok(None);
        }
        let (idx, p) = (self.started - 1, self.send_psn);
        let e = self.emit_ring(q, ctx, buf, idx, p)?;
        Ok(self.ring_tag.take().map(|t| (e, t)))
    }

    /// The tag of the descriptor just written, if the last output was one.
    #[inline]
    pub fn take_ring_tag(&mut self) -> Option<RingTag> {
        self.ring_tag.take()
    }

    /// Whether the messages in flight are ring descriptors ([`crate::ring`]; they are
    /// all of one kind).
    pub fn ring_in_flight(&self) -> bool {
        self.started > 0 && self.wqes.front().is_some_and(|w| w.ring)
    }

    /// Ring mode: the ring descriptor `psn` (24 bits) went out in epoch `epoch` and
    /// was sent since (`[una, send_high)`), so it names a message in flight; its PSN
    /// in the 64-bit space. `None`: a stale or forged name, counted.
    fn ring_psn<M: Memory>(
        &self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        psn: u32,
        epoch: Option<u8>,
    ) -> Option<u64> {
        if !matches!(q.state, QpState::Rts | QpState::Sqd) {
            ctx.stats.dropped_state += 1;
            return None;
        }
        let p = Psn::new(psn).expand(self.una);
        if epoch.is_some_and(|e| e != self.ring_epoch)
            || p < self.una
            || p >= self.send_high
            || !self.ring_in_flight()
        {
            ctx.stats.ring_stale += 1;
            return None;
        }
        Some(p)
    }

    /// Ring mode: the link released the descriptor of PSN `psn` sent in epoch `epoch`
    /// — the peer's transport answered it, and had it refused it, its ERROR would have
    /// been handed in first ([`crate::ring`]): the message and every one before it are
    /// acknowledged.
    pub fn ring_released<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        psn: u32,
        epoch: u8,
    ) {
        if let Some(p) = self.ring_psn(q, ctx, psn, Some(epoch)) {
            self.ack_through(q, ctx, p + 1);
        }
    }

    /// Ring mode: the peer refused the descriptor of PSN `psn` with `syndrome` (an
    /// ERROR descriptor). An RNR starts a new epoch, so the releases of what was sent
    /// after the refused message (the peer discarded those) acknowledge nothing.
    pub fn ring_refused<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        psn: u32,
        syndrome: Syndrome,
    ) -> Result<(), Fault> {
        let Some(p) = self.ring_psn(q, ctx, psn, None) else {
            return Ok(());
        };
        match syndrome {
            Syndrome::RnrNak { timer } => {
                self.ring_epoch = self.ring_epoch.wrapping_add(1);
                self.rnr_nak(q, ctx, p, timer)
            }
            Syndrome::Nak(code) => Err(self.fatal_nak(q, ctx, p, code)),
            Syndrome::Ack { .. } | Syndrome::Reserved(_) => {
                ctx.stats.malformed += 1;
                Ok(())
            }
        }
    }

    /// Ring mode: the link will never release the descriptor of PSN `psn` sent in
    /// epoch `epoch` (the peer is gone, or its ring broke): the message fails with
    /// `RetryExcErr`, as an RC message whose peer stopped answering.
    pub fn ring_lost<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        psn: u32,
        epoch: u8,
    ) -> Result<(), Fault> {
        match self.ring_psn(q, ctx, psn, Some(epoch)) {
            Some(p) => Err(Fault {
                idx: self.idx_of(p).unwrap_or(0),
                status: WcStatus::RetryExcErr,
            }),
            None => Ok(()),
        }
    }

    /// An ACK through `upto` arrived and `acked` PSNs became delivered: if it answers
    /// a probe (a first transmission that asked for it), that is an RTT sample for the
    /// congestion window. Probes it passed without answering are dropped: their ACKs
    /// were coalesced into this one, which says nothing about their own delay.
    fn sample_rtt<M: Memory>(&mut self, ctx: &mut Ctx<'_, M>, upto: u64, acked: u64) {
        let CongestionControl::Delay(c) = ctx.config.congestion else {
            return;
        };
        let mut sent = None;
        while let Some(&(psn, at)) = self.probes.front() {
            if psn >= upto {
                break;
            }
            self.probes.pop_front();
            if psn + 1 == upto {
                sent = Some(at);
            }
        }
        if let Some(at) = sent {
            ctx.stats.cc_rtt_samples += 1;
            if self.cc.on_rtt(&c, ctx.now, ctx.now - at, acked) {
                ctx.stats.cc_decreases += 1;
            }
        }
    }

    /// A loss signal for the congestion window.
    fn congestion_loss<M: Memory>(&mut self, ctx: &mut Ctx<'_, M>) {
        if let CongestionControl::Delay(c) = ctx.config.congestion {
            if self.cc.on_loss(&c, ctx.now) {
                ctx.stats.cc_decreases += 1;
            }
        }
    }

    /// Spend one transport retry (§9.7: timeouts and NAK-sequence errors count;
    /// progress refills the counter).
    fn consume_retry(&mut self) -> Result<(), Fault> {
        if self.retry_left == 0 {
            let idx = self.idx_of(self.una).unwrap_or(0);
            return Err(Fault {
                idx,
                status: WcStatus::RetryExcErr,
            });
        }
        self.retry_left -= 1;
        Ok(())
    }

    /// Everything before `upto` was received by the responder. Non-READ PSNs become
    /// delivered; READ/atomic PSNs without their response are holes (the implicit
    /// NAK of §9.7), resent at once.
    fn ack_through<M: Memory>(&mut self, q: &QpCommon, ctx: &mut Ctx<'_, M>, upto: u64) {
        let upto = upto.min(self.next_psn);
        self.cum_acked = self.cum_acked.max(upto);
        let mut missing = None;
        let mut psn = self.una;
        while psn < upto {
            let i = (psn - self.una) as usize;
            let f = self.board[i];
            if f & NEEDS_RESPONSE == 0 {
                self.board[i] |= DELIVERED;
            } else if f & DELIVERED == 0 && missing.is_none() {
                missing = Some(psn);
            }
            psn += 1;
        }
        self.advance(q, ctx);
        if let Some(m) = missing {
            ctx.stats.implicit_naks += 1;
            match q.attrs().recovery {
                Recovery::GoBackN => self.go_back_once(m.max(self.una)),
                Recovery::Selective => self.queue_holes(upto),
            }
        }
    }

    /// Selective mode: the responder expects `cum` and holds `sack`.
    fn on_sack<M: Memory>(&mut self, q: &QpCommon, ctx: &mut Ctx<'_, M>, cum: u64, sack: u64) {
        ctx.stats.sacks_received += 1;
        self.ack_through(q, ctx, cum);
        if sack >= self.una && sack < self.next_psn && self.flags(sack) & NEEDS_RESPONSE == 0 {
            self.set_flag(sack, SACKED);
        }
        self.queue_holes(sack.min(self.next_psn));
    }

    /// Queue every undelivered PSN in `[una, upto)` not yet queued in this round.
    /// For a READ whose request the responder has not executed (PSN at or after
    /// `cum_acked`) only the first PSN is queued: resending the request covers it all.
    fn queue_holes(&mut self, upto: u64) {
        let mut psn = self.una;
        while psn < upto {
            let i = (psn - self.una) as usize;
            let f = self.board[i];
            if f & (DELIVERED | SACKED | RETX_QUEUED) == 0 {
                let wanted = if f & NEEDS_RESPONSE != 0 && psn >= self.cum_acked {
                    self.idx_of(psn)
                        .is_some_and(|idx| self.wqes[idx].first_psn == psn)
                } else {
                    true
                };
                if wanted {
                    self.board[i] |= RETX_QUEUED;
                    self.holes.push_back(psn);
                }
            }
            psn += 1;
        }
    }

    /// Go back to `from` unless a go-back to the same PSN is already under way.
    fn go_back_once(&mut self, from: u64) {
        if self.recovering_at != Some(from) {
            self.recovering_at = Some(from);
            self.go_back(from);
        }
    }

    fn go_back(&mut self, from: u64) {
        if self.send_psn > from {
            self.send_psn = from;
        }
        // What is sent again from `from` asks for its ACKs anew, and no ACK of it can
        // be an RTT sample (Karn's rule).
        self.asked = self.asked.min(from);
        while self.probes.back().is_some_and(|&(psn, _)| psn >= from) {
            self.probes.pop_back();
        }
    }

    /// Retire delivered PSNs and the WQEs they complete, in order.
    fn advance<M: Memory>(&mut self, q: &QpCommon, ctx: &mut Ctx<'_, M>) {
        let old = self.una;
        while self.board.front().is_some_and(|f| f & DELIVERED != 0) {
            self.board.pop_front();
            self.una += 1;
        }
        // The WQEs that retire are read where they lie and leave the queue together
        // (`retire_front`): an ACK of a ping-pong retires ~16 of them, and each moved
        // out of the queue (128 bytes) with its inline bytes and UD entry removed on
        // its own was ~110 instructions a message (callgrind, `msg_rate … lat`).
        let (mut k, mut inline) = (0, 0);
        while k < self.started {
            let Some(w) = self.wqes.get(k).filter(|w| w.end_psn() <= self.una) else {
                break;
            };
            k += 1;
            if w.inline {
                inline += w.len as usize;
            }
            if w.op.is_read_or_atomic() {
                self.rd_atomic -= 1;
            }
            if w.signaled {
                let mut c = Completion::new(w.wr_id, WcStatus::Success, w.op.wc_opcode(), q.qpn);
                c.byte_len = w.len.min(u64::from(u32::MAX)) as u32;
                ctx.cq.complete(c);
            }
            ctx.stats.messages_completed += 1;
            ctx.stats.bytes_completed += w.len;
        }
        if k > 0 {
            self.started -= k;
            self.retire_front(k, inline);
        }
        if self.una > old {
            self.retry_left = q.attrs().retry_cnt;
            self.rnr_left = q.attrs().rnr_retry;
            if self.recovering_at.is_some_and(|r| r < self.una) {
                self.recovering_at = None;
            }
            if self.rnr_refused.is_some_and(|r| r < self.una) {
                self.rnr_refused = None;
            }
            if self.send_psn < self.una {
                self.send_psn = self.una;
            }
            self.arm_timer(q, ctx.now);
        }
    }

    // ---------------------------------------------------------------- timers

    pub fn handle_timeout<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
    ) -> Result<(), Fault> {
        let now = ctx.now;
        let ring = self.ring_in_flight();
        if self.rnr_until.is_some_and(|t| now >= t) {
            self.rnr_until = None;
            self.reset_recovery();
            match q.attrs().recovery {
                // Descriptors are never SACKed: the peer discarded all after the
                // refused one.
                _ if ring => self.go_back(self.rnr_psn.max(self.una)),
                // Resend from the refused PSN.
                Recovery::GoBackN => self.go_back(self.rnr_psn.max(self.una)),
                // The responder kept what arrived after the refused PSN and said so
                // (SACKs keep coming during the RNR wait): resend the rest.
                Recovery::Selective => self.queue_holes(self.send_high),
            }
            self.arm_timer(q, now);
        }
        if self.timer.is_some_and(|t| now >= t) {
            ctx.stats.timeouts += 1;
            self.timer = None;
            if let CongestionControl::Delay(c) = ctx.config.congestion {
                if self.cc.on_timeout(&c, now) {
                    ctx.stats.cc_decreases += 1;
                }
            }
            self.consume_retry()?;
            match q.attrs().recovery {
                // The ring loses nothing: a descriptor not released in time is a peer
                // that stopped taking from its ring, not a loss to repair. The wait
                // goes on, `retry_cnt` timeouts long, as RC's does for a silent peer.
                _ if ring => {}
                Recovery::GoBackN => {
                    self.recovering_at = None;
                    self.go_back(self.una);
                }
                Recovery::Selective => {
                    // The oldest unacknowledged PSN cannot be waiting in the responder's
                    // out-of-order buffer (it would have been executed): if it was
                    // SACKed, it was refused since (RNR) or its ACK was lost. Resend it
                    // whatever its flags say, and every hole after it.
                    self.reset_recovery();
                    if let Some(f) = self.board.front_mut() {
                        *f &= !SACKED;
                    }
                    self.queue_holes(self.send_high);
                    if self.holes.front() != Some(&self.una) && self.una < self.send_high {
                        self.set_flag(self.una, RETX_QUEUED);
                        self.holes.push_front(self.una);
                    }
                }
            }
            self.arm_timer(q, now);
        }
        Ok(())
    }

    fn reset_recovery(&mut self) {
        self.holes.clear();
        for f in self.board.iter_mut() {
            *f &= !RETX_QUEUED;
        }
        self.recovering_at = None;
    }

    /// Remove every WQE (for flushing) and forget what was in flight. The PSN counter
    /// carries on, so a QP that leaves SQE keeps a monotonic PSN stream.
    pub fn take_all(&mut self) -> VecDeque<SendWqe> {
        let w = std::mem::take(&mut self.wqes);
        let (psn, retry, rnr, cc) = (self.next_psn, self.retry_left, self.rnr_left, self.cc);
        let epoch = self.ring_epoch.wrapping_add(1);
        *self = Requester::with_depth(self.depth);
        // Releases of descriptors flushed here name an old epoch.
        self.ring_epoch = epoch;
        self.cc = cc;
        self.asked = psn;
        self.next_psn = psn;
        self.una = psn;
        self.send_psn = psn;
        self.send_high = psn;
        self.cum_acked = psn;
        self.retry_left = retry;
        self.rnr_left = rnr;
        w
    }
}

/// Whether WQE `w` goes as a ring descriptor ([`crate::ring`]): an RC QP in ring
/// mode, a SEND or WRITE of at most one path MTU `mtu` (so a descriptor fits wherever
/// the same message's packet would). READs, atomics and longer messages go as packets.
fn goes_by_ring(q: &QpCommon, w: &SendWqe, mtu: u64) -> bool {
    q.ring_mode
        && q.qp_type == QpType::Rc
        && matches!(w.op, WrOp::Send { .. } | WrOp::Write { .. })
        && w.len <= mtu
}

/// Whether WQE `w` goes by reference ([`crate::byref`]): the QP allows it, it is a
/// WRITE from registered memory (not inline) longer than one MTU and at least
/// [`Config::by_reference_min`](crate::Config::by_reference_min), and the memory can
/// name every source span to the peer and wants to ([`Memory::may_pull`]).
/// The PSNs a QP may have in flight when the next packet is a by-reference chunk sent
/// while other QPs share the endpoint (`by_ref`): `cap`, or at most
/// [`byref::WINDOW`] chunks.
fn by_ref_cap(cap: u64, by_ref: bool) -> u64 {
    if by_ref {
        cap.min(byref::WINDOW)
    } else {
        cap
    }
}

fn goes_by_reference<M: Memory>(q: &QpCommon, ctx: &Ctx<'_, M>, w: &SendWqe) -> bool {
    q.by_reference
        && q.qp_type != QpType::Ud
        && match w.op {
            WrOp::Write { imm, .. } => imm.is_none() || byref::chunks(w.len) == 1,
            _ => false,
        }
        && !w.inline
        && w.len > q.mtu()
        && w.len >= ctx.config.by_reference_min
        && w.sg_list.iter().filter(|s| s.len > 0).all(|s| {
            ctx.mem
                .may_pull(Key::Local(s.lkey), q.pd, s.addr, u64::from(s.len), w.len)
        })
}

/// The pieces of an SGE list covering `[off, off + len)` of the message: each SGE with
/// the address and length of its part (empty SGEs skipped).
fn sge_spans(
    sges: &[crate::wr::Sge],
    mut off: u64,
    mut len: u64,
) -> impl Iterator<Item = (&crate::wr::Sge, u64, u64)> {
    sges.iter().filter_map(move |s| {
        let l = u64::from(s.len);
        if len == 0 || l == 0 {
            return None;
        }
        if off >= l {
            off -= l;
            return None;
        }
        let take = (l - off).min(len);
        let piece = (s, s.addr.wrapping_add(off), take);
        off = 0;
        len -= take;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::{Config, Stats};
    use crate::memory::VecMemory;
    use crate::qp::QpAttrs;
    use crate::wr::Completion;
    use std::collections::BTreeMap;

    /// One ACK retires several WQEs at once (`advance`, `retire_front`): each signaled
    /// one completes, in order; exactly the retired WQEs' inline bytes leave the
    /// ring's front (a WQE from registered memory in between has none), so the
    /// inline payload of the WQE still queued behind them is read back unchanged;
    /// and once every WQE has retired the ring is empty. Fails if the bytes taken
    /// off are not the retired WQEs' sum (the ring then keeps stale bytes, or loses
    /// the queued WQE's).
    #[test]
    fn an_ack_retires_its_wqes_with_exactly_their_inline_bytes() {
        let q = QpCommon::new(
            7,
            QpType::Rc,
            1,
            QpState::Rts,
            QpAttrs::default(),
            None,
            false,
        );
        let mut r = Requester::new();
        r.start(&q);
        let base = r.una;
        // Inline 10 bytes, registered memory (8 bytes, not inline), inline 20, inline 30.
        let wqes: [(u64, Option<Vec<u8>>, u64); 4] = [
            (1, Some(vec![0x11; 10]), 10),
            (2, None, 8),
            (3, Some(vec![0x22; 20]), 20),
            (4, Some(vec![0x33; 30]), 30),
        ];
        for (id, data, len) in &wqes {
            let wr = SendWr::new(*id, WrOp::Send { imm: None }, SgList::new());
            r.push(&wr, SgList::new(), data.as_deref(), None, *len, None);
        }
        // Started, one PSN each; the first three acknowledged.
        for (i, w) in r.wqes.iter_mut().enumerate() {
            w.first_psn = base + i as u64;
            w.npsn = 1;
        }
        r.started = 4;
        r.next_psn = base + 4;
        r.send_psn = base + 4;
        r.send_high = base + 4;
        r.board = VecDeque::from([DELIVERED, DELIVERED, DELIVERED, 0]);
        let (mut mem, mut cq, mut stats, mut srqs, config) = (
            VecMemory::new(0, 64, 0, 1),
            VecDeque::<Completion>::new(),
            Stats::default(),
            BTreeMap::new(),
            Config::default(),
        );
        // One ACK's advance, each time with a context over the same state.
        macro_rules! advance {
            () => {
                r.advance(
                    &q,
                    &mut Ctx {
                        now: Instant(0),
                        sharing: false,
                        mem: &mut mem,
                        cq: &mut cq,
                        stats: &mut stats,
                        srqs: &mut srqs,
                        config: &config,
                    },
                )
            };
        }
        advance!();
        assert_eq!(r.una, base + 3);
        assert_eq!((r.wqes.len(), r.started), (1, 1));
        assert_eq!(r.inline.len(), 30, "the retired WQEs' 30 inline bytes left");
        let mut out = [0u8; 30];
        r.copy_inline(&r.wqes[0], 0, &mut out);
        assert_eq!(out, [0x33; 30]);
        assert_eq!(
            cq.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
            vec![1, 2, 3]
        );
        assert_eq!(stats.messages_completed, 3);
        assert_eq!(stats.bytes_completed, 38);
        // The last one too: nothing is left in the ring.
        r.board[0] = DELIVERED;
        advance!();
        assert!(r.wqes.is_empty() && r.inline.len() == 0);
        assert_eq!(cq.len(), 4);
    }
}
