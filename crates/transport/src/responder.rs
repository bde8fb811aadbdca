//! The responder of one QP: checks each request packet (PSN, opcode sequence, length,
//! rkey, rights), places its data, consumes receive WQEs, executes READ and atomics,
//! and queues the responses (ACK, NAK, READ response, atomic ACK) in PSN order.

use crate::byref::{self, is_by_reference, RemoteSpan};
use crate::ctx::{opcode_for, packet_len, packets_for, position, scatter, Ctx, QpCommon, Srq};
use crate::memory::{Access, AccessError, AtomicOp, Key, Memory};
use crate::qp::{QpType, Recovery};
use crate::status::RespError;
use crate::time::Instant;
use crate::wr::{Completion, RecvWr, WcOpcode, WcStatus, MAX_SGE};
use crate::Config;
use std::collections::{BTreeMap, VecDeque};
use weft_wire::ring::{RingDescriptor, RingOp};
use weft_wire::roce::ext::{code_from_credits, CREDITS_INVALID};
use weft_wire::roce::opcode::len as wire_len;
use weft_wire::roce::{
    AethRepr, AtomicAckEthRepr, IbPacketRepr, IcrcPath, IpPair, NakCode, Operation, PacketFields,
    PacketTemplate, Position, Psn, RethRepr, Syndrome, Transport,
};

/// Bytes of the GRH a UD receive buffer starts with (IBTA Vol 1 ch. 11, post receive; the layout rdma_rxe uses).
pub const GRH_LEN: usize = 40;

/// The message being received.
#[derive(Debug)]
enum InMsg {
    Send {
        recv: RecvWr,
        from_srq: bool,
        offset: u64,
    },
    Write {
        /// PSN of the First/Only packet.
        first_psn: u64,
        va: u64,
        rkey: u32,
        total: u64,
        offset: u64,
    },
    /// UC: the rest of a message that was abandoned.
    Discard,
}

#[derive(Debug, Clone, Copy)]
struct ReadJob {
    /// PSN of the job's first response.
    first_psn: u64,
    /// Responses already sent.
    sent: u64,
    va: u64,
    rkey: u32,
    len: u64,
    /// A re-execution for a duplicate request: not counted against
    /// `max_dest_rd_atomic`, which limits new requests.
    dup: bool,
}

impl ReadJob {
    /// True when the job has yet to send the response with PSN `psn`.
    fn will_send(&self, psn: u64, mtu: u64) -> bool {
        let n = packets_for(self.len, mtu);
        psn >= self.first_psn + self.sent && psn < self.first_psn + n
    }
}

#[derive(Debug, Clone, Copy)]
enum Response {
    Ack {
        psn: u64,
        syndrome: Syndrome,
        /// Selective mode: the out-of-order PSN reported in the MSN field.
        sack: Option<u64>,
        /// The QP enters ERR once this NAK is sent.
        fatal: bool,
    },
    Read(ReadJob),
    Atomic {
        psn: u64,
        orig: u64,
    },
}

/// An out-of-order packet the responder keeps (selective mode).
#[derive(Debug)]
struct Kept {
    repr: IbPacketRepr,
    /// The payload, or empty when it was already placed in memory on arrival.
    payload: Vec<u8>,
    /// `Some(len)` when a WRITE payload of `len` bytes was placed on arrival.
    placed: Option<u64>,
    /// The path it arrived on (a by-reference payload is pulled from its source).
    from: IcrcPath,
}

/// Why a request was not accepted.
enum Refusal {
    /// No receive WQE: RNR NAK (RC) or drop (UC).
    Rnr,
    Error(RespError),
}

impl From<RespError> for Refusal {
    fn from(e: RespError) -> Refusal {
        Refusal::Error(e)
    }
}

/// What became of a ring-mode descriptor ([`Endpoint::ring_request`](crate::Endpoint::ring_request)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingAnswer {
    /// Executed: its data placed, its receive (if any) completed.
    Executed,
    /// Refused: the caller sends an ERROR descriptor with this syndrome and the
    /// descriptor's sequence number back before it releases the item (a release
    /// without one would tell the requester that the message was executed). An RNR
    /// the requester retries; a NAK code fails its message and its QP.
    Refused {
        /// The AETH syndrome (an RNR NAK with the QP's timer, or a NAK code).
        syndrome: Syndrome,
        /// This descriptor put the local QP in ERR.
        fatal: bool,
    },
    /// Dropped without an answer: a later descriptor while an RNR is outstanding
    /// (the requester sends it again after the refused one, and its release names an
    /// old epoch).
    Discarded,
}

/// A ring descriptor for a QP that takes none now (not in ring mode, not in a state
/// that receives, or past a fatal refusal): refused, so that the requester, which
/// would take the item's bare release for an execution, fails the message instead
/// (a Remote Operational Error). The local QP is not changed.
pub(crate) fn refused_dead() -> RingAnswer {
    RingAnswer::Refused {
        syndrome: Syndrome::Nak(NakCode::REMOTE_OPERATIONAL_ERROR),
        fatal: false,
    }
}

/// Outcome of one `poll_transmit` of the responder.
pub(crate) struct RespEmitted {
    pub len: usize,
    pub fatal: bool,
}

#[derive(Debug)]
pub(crate) struct Responder {
    /// The encoded BTH of this QP's responses (see [`PacketTemplate`]).
    template: Option<PacketTemplate>,
    epsn: u64,
    msn: u32,
    cur: Option<InMsg>,
    queue: VecDeque<Response>,
    /// New READ jobs queued (duplicates excluded).
    pending_reads: usize,
    /// Duplicate READ jobs queued.
    pending_dups: usize,
    /// Go-back-N: a NAK (sequence or RNR) is outstanding; stay quiet until the
    /// expected PSN arrives (IBTA Vol 1 §9.7).
    nak_outstanding: bool,
    /// A fatal NAK is queued; refuse everything after it.
    fatal: bool,
    atomic_replay: VecDeque<(u64, u64)>,
    /// Selective mode: packets that arrived ahead of ePSN, processed when the gap closes.
    ooo: BTreeMap<u64, Kept>,
    /// The ACK owed for request packets that did not ask for one (`None`: none).
    owed: Option<Owed>,
    /// When the last request packet was accepted ([`NO_REQUEST`]: none yet): whether
    /// an owed ACK began after a quiet stretch ([`Owed::rides`]) is measured from it.
    /// A plain `Instant`, not an `Option`: it is stored for every accepted packet, and
    /// the `Option`'s tag was two of the four instructions that cost a streamed
    /// message (callgrind, `msg_rate`).
    last_request: Instant,
}

/// [`Responder::last_request`] before the first request (no clock reads it: time
/// starts at zero and would take 584 000 years to get there).
const NO_REQUEST: Instant = Instant(u64::MAX);

/// A delayed ACK the responder owes.
#[derive(Debug, Clone, Copy)]
struct Owed {
    /// It acknowledges request packets through this PSN.
    psn: u64,
    /// When it is due ([`Config::ack_delay_us`] after the
    /// first packet it covers).
    due: Instant,
    /// It may leave with the QP's next request packet
    /// ([`Config::ack_rides_reply`] is on, and the
    /// packet that began owing it came at least the ACK delay after the QP's previous
    /// accepted request, or was its first).
    rides: bool,
}

/// Longest response queue; beyond it duplicates and NAKs are dropped (a hostile
/// peer cannot make the queue grow without bound).
const MAX_QUEUE: usize = 4096;

impl Responder {
    pub fn new() -> Responder {
        Responder {
            template: None,
            epsn: 0,
            msn: 0,
            cur: None,
            queue: VecDeque::new(),
            pending_reads: 0,
            pending_dups: 0,
            nak_outstanding: false,
            fatal: false,
            atomic_replay: VecDeque::new(),
            ooo: BTreeMap::new(),
            owed: None,
            last_request: NO_REQUEST,
        }
    }

    /// When the delayed ACK of packets that did not ask for one is due (`None`: none
    /// is owed).
    pub fn ack_due(&self) -> Option<Instant> {
        self.owed.map(|o| o.due)
    }

    /// True when the delayed ACK owed may leave with the QP's next request packet
    /// ([`Config::ack_rides_reply`]): one is owed,
    /// and the packet that began owing it came after a quiet stretch.
    #[inline]
    pub fn ack_rides(&self) -> bool {
        matches!(self.owed, Some(Owed { rides: true, .. }))
    }

    /// The delayed ACK's time came: queue it (coalescing with a queued ACK).
    pub fn send_owed_ack(&mut self) {
        if let Some(o) = self.owed.take() {
            self.push_ack(o.psn);
        }
    }

    /// Request packets through `psn` were accepted without asking for an ACK: owe one,
    /// due [`Config::ack_delay_us`] after the first of
    /// them (0: queue it now). The first of them, arriving at `now`, says whether it
    /// may ride with the next request packet ([`Owed::rides`]); call before
    /// [`Responder::accepted`] notes `now` as the last request's arrival.
    fn owe_ack(&mut self, psn: u64, now: Instant, config: &Config) {
        let delay_us = config.ack_delay_us;
        if delay_us == 0 {
            self.push_ack(psn);
            return;
        }
        match &mut self.owed {
            Some(o) => o.psn = o.psn.max(psn),
            None => {
                let last = self.last_request;
                let rides = config.ack_rides_reply
                    && (last == NO_REQUEST
                        || now.micros().saturating_sub(last.micros()) >= delay_us);
                self.owed = Some(Owed {
                    psn,
                    due: Instant(now.micros().saturating_add(delay_us)),
                    rides,
                });
            }
        }
    }

    /// A request packet was accepted (in order) at `now`: the quiet stretch before
    /// the next one that begins owing an ACK is measured from here.
    #[inline(always)]
    fn accepted(&mut self, now: Instant) {
        self.last_request = now;
    }

    /// Start expecting `rq_psn` (INIT → RTR).
    pub fn start(&mut self, q: &QpCommon) {
        *self = Responder::new();
        self.epsn = (1u64 << 24) | u64::from(q.attrs().rq_psn.value());
    }

    pub fn has_output(&self) -> bool {
        !self.queue.is_empty()
    }

    /// True when the responder's next packet is an ACK or NAK (no payload): what the
    /// endpoint sends ahead of the round robin's turns.
    pub fn ack_first(&self) -> bool {
        matches!(self.queue.front(), Some(Response::Ack { .. }))
    }

    /// True when all the responder has to send is one positive ACK (no NAK, no SACK,
    /// no READ or atomic response): the response that may wait behind one request
    /// packet of its QP (see `Qp::poll_transmit` in the endpoint).
    pub fn only_plain_ack(&self) -> bool {
        self.queue.len() == 1
            && matches!(
                self.queue.front(),
                Some(Response::Ack {
                    syndrome: Syndrome::Ack { .. },
                    sack: None,
                    fatal: false,
                    ..
                })
            )
    }

    /// Return the receive WQE of an abandoned SEND to its queue, and clear state.
    pub fn take_partial(&mut self) -> Option<(RecvWr, bool)> {
        match self.cur.take() {
            Some(InMsg::Send { recv, from_srq, .. }) => Some((recv, from_srq)),
            _ => None,
        }
    }

    fn push(&mut self, r: Response) {
        if self.queue.len() >= MAX_QUEUE {
            return;
        }
        if let Response::Read(j) = r {
            if j.dup {
                self.pending_dups += 1;
            } else {
                self.pending_reads += 1;
            }
        }
        self.queue.push_back(r);
    }

    /// Queue an ACK of everything through `psn`, coalescing with an ACK already at the
    /// tail of the queue (IBTA Vol 1 §9.7: one ACK may acknowledge many packets).
    fn push_ack(&mut self, psn: u64) {
        // This ACK covers what was owed up to `psn`.
        if self.owed.is_some_and(|o| o.psn <= psn) {
            self.owed = None;
        }
        if let Some(Response::Ack {
            psn: last,
            syndrome: Syndrome::Ack { .. },
            sack: None,
            ..
        }) = self.queue.back_mut()
        {
            *last = (*last).max(psn);
            return;
        }
        self.push(Response::Ack {
            psn,
            syndrome: Syndrome::Ack { credit_code: 0 },
            sack: None,
            fatal: false,
        });
    }

    fn push_nak(&mut self, psn: u64, syndrome: Syndrome, fatal: bool) {
        self.push(Response::Ack {
            psn,
            syndrome,
            sack: None,
            fatal,
        });
    }

    // ------------------------------------------------------------------ receive

    /// A request packet (SEND, WRITE, READ request, atomic) for this QP.
    #[allow(clippy::too_many_arguments)]
    pub fn handle_request<M: Memory>(
        &mut self,
        q: &QpCommon,
        rq: &mut VecDeque<RecvWr>,
        ctx: &mut Ctx<'_, M>,
        repr: &IbPacketRepr,
        payload: &[u8],
        src_path: &IcrcPath,
        wire_len: usize,
    ) {
        match q.qp_type {
            QpType::Rc => self.rc_request(q, rq, ctx, repr, payload, src_path),
            QpType::Uc => self.uc_request(q, rq, ctx, repr, payload, src_path),
            QpType::Ud => self.ud_request(q, rq, ctx, repr, payload, src_path, wire_len),
        }
    }

    fn rc_request<M: Memory>(
        &mut self,
        q: &QpCommon,
        rq: &mut VecDeque<RecvWr>,
        ctx: &mut Ctx<'_, M>,
        repr: &IbPacketRepr,
        payload: &[u8],
        from: &IcrcPath,
    ) {
        if self.fatal {
            ctx.stats.dropped_state += 1;
            return;
        }
        let p = repr.bth.psn.expand(self.epsn);
        let selective = q.attrs().recovery == Recovery::Selective;
        if p == self.epsn {
            self.rc_in_order(q, rq, ctx, repr, payload, None, from);
            // Selective repeat: the gap may have closed; drain what was kept.
            while selective && !self.fatal {
                let Some(entry) = self.ooo.first_entry() else {
                    break;
                };
                if *entry.key() > self.epsn {
                    break;
                }
                let (psn, kept) = entry.remove_entry();
                if psn == self.epsn {
                    let (r, pl, placed, from) =
                        (&kept.repr, &kept.payload, kept.placed, &kept.from);
                    self.rc_in_order(q, rq, ctx, r, pl, placed, from);
                }
            }
        } else if p > self.epsn {
            ctx.stats.out_of_sequence += 1;
            let window = u64::from(q.attrs().max_inflight);
            if selective && p - self.epsn < window && !self.nak_outstanding {
                if !self.ooo.contains_key(&p) {
                    // IRN: WRITE data goes to its address at once; only the headers wait.
                    let placed = self.place_early(q, ctx, repr, payload, p);
                    if placed.is_some() {
                        ctx.stats.placed_out_of_order += 1;
                    }
                    let payload = if placed.is_some() {
                        Vec::new()
                    } else {
                        payload.to_vec()
                    };
                    self.ooo.insert(
                        p,
                        Kept {
                            repr: *repr,
                            payload,
                            placed,
                            from: *from,
                        },
                    );
                }
                self.push(Response::Ack {
                    psn: self.epsn,
                    syndrome: Syndrome::Nak(NakCode::PSN_SEQUENCE_ERROR),
                    sack: Some(p),
                    fatal: false,
                });
            } else if !self.nak_outstanding {
                // §9.7: one NAK-sequence-error per gap, then silence until ePSN arrives.
                ctx.stats.seq_naks_sent += 1;
                self.nak_outstanding = true;
                // In selective mode every sequence NAK is read as a SACK: name a PSN
                // already delivered (ePSN - 1), so this one acknowledges nothing new.
                let sack = selective.then(|| self.epsn - 1);
                self.push(Response::Ack {
                    psn: self.epsn,
                    syndrome: Syndrome::Nak(NakCode::PSN_SEQUENCE_ERROR),
                    sack,
                    fatal: false,
                });
            }
        } else {
            self.rc_duplicate(q, ctx, repr, p);
        }
    }

    /// The common shape of a request, taken without the general path
    /// ([`Responder::handle_request`]): an RC SEND Only (`reth` `None`; BTH only, no
    /// immediate) or RC WRITE Only (`reth` its RETH, no immediate) carrying the
    /// expected PSN, with no message in progress, nothing kept ahead of ePSN, no
    /// fatal NAK queued, and, for a SEND, a receive posted that holds the payload.
    /// What `rc_request` → `rc_in_order` → `execute` do for such a packet, in their
    /// order: the payload placed, the receive completed, ePSN and MSN advanced, the
    /// ACK asked for queued (or the coalesced one owed). No headers' repr (some 130
    /// bytes of stores), no dispatch on the QP type, the opcode's position and its
    /// operation.
    ///
    /// False, with nothing changed, for every other packet and state: the general
    /// path then decides it — a PSN ahead (sequence NAK, or kept), behind (a
    /// duplicate), no receive (RNR NAK), a receive too small, a payload or an address
    /// the memory refuses, a message length too long (NAKs). Those checks are the
    /// general path's own: the ones made here only choose the path. A WRITE is checked
    /// before its one all-or-nothing write; only a SEND whose scatter list the memory
    /// refuses at a later entry may have had its first entries written here before the
    /// general path fails it and writes them again (the memory a failed message writes
    /// is undefined in IB either way).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn request_only_in_order<M: Memory>(
        &mut self,
        q: &QpCommon,
        rq: &mut VecDeque<RecvWr>,
        ctx: &mut Ctx<'_, M>,
        psn: Psn,
        ack_req: bool,
        reth: Option<RethRepr>,
        payload: &[u8],
    ) -> bool {
        if self.fatal
            || self.cur.is_some()
            || psn != Psn::new(self.epsn as u32)
            || !self.ooo.is_empty()
        {
            return false;
        }
        // The general path checks `max_msg_len` for a WRITE's RETH, not for a SEND
        // (a receive's capacity bounds that): the same here.
        let plen = payload.len() as u64;
        if plen > q.mtu() || (reth.is_some() && plen > ctx.config.max_msg_len) {
            return false;
        }
        match reth {
            None => {
                let Some((queue, from_srq)) = recv_queue(q.srq, rq, ctx.srqs) else {
                    return false;
                };
                let Some(recv) = queue.front() else {
                    return false;
                };
                if plen > recv.capacity()
                    || scatter(ctx.mem, q.pd, recv.sg_list.as_slice(), 0, payload).is_err()
                {
                    return false;
                }
                let wr_id = recv.wr_id;
                queue.pop_front();
                complete_send(ctx, q, wr_id, from_srq, plen, None);
            }
            Some(reth) => {
                // One packet, the whole message: its length is the RETH's (a longer
                // RETH is a by-reference chunk or a length error, the general path's).
                if u64::from(reth.dma_len) != plen {
                    return false;
                }
                if plen > 0
                    && (self
                        .check_remote(q, ctx, reth.rkey, reth.va, plen, Access::REMOTE_WRITE)
                        .is_err()
                        || ctx
                            .mem
                            .write(
                                Key::Remote(reth.rkey),
                                q.pd,
                                reth.va,
                                payload,
                                Access::REMOTE_WRITE,
                            )
                            .is_err())
                {
                    return false;
                }
            }
        }
        let p = self.epsn;
        self.nak_outstanding = false;
        self.msn = self.msn.wrapping_add(1);
        self.epsn += 1;
        if ack_req {
            self.push_ack(p);
        } else {
            self.owe_ack(p, ctx.now, ctx.config);
        }
        self.accepted(ctx.now);
        true
    }

    /// A descriptor of the shm ring mode (docs/verbs.md, "What 1 500 instructions a
    /// message would take"; the format is [`weft_wire::ring`]) for this RC QP, with
    /// its payload. The ring delivers in order and uncorrupted, so there is no PSN
    /// window and no ACK: the requester learns that a message was executed from the
    /// ring's release index, and of a refusal from the ERROR descriptor the caller
    /// sends back for a [`RingAnswer::Refused`] (before it releases this item). What
    /// stays is every check the packet path makes for the same message — receive
    /// WQE, its capacity and protection domain, the rkey, bounds and rights of a
    /// WRITE, the message length limit — and RC's answers to them: RNR for a missing
    /// receive (then every later descriptor of the QP is discarded until the refused
    /// one comes again, go-back-N, which is what the sequence number is for), a fatal
    /// NAK code for the rest (the QP then enters ERR, as the caller does on `fatal`).
    /// The sequence number is the message's PSN (24 bits): a descriptor takes the
    /// expected PSN as a one-packet message would. Another one outside that retry is
    /// a broken peer: fatal, Invalid Request.
    pub fn ring_request<M: Memory>(
        &mut self,
        q: &QpCommon,
        rq: &mut VecDeque<RecvWr>,
        ctx: &mut Ctx<'_, M>,
        d: &RingDescriptor,
        payload: &[u8],
    ) -> RingAnswer {
        // After a fatal refusal (not reached through the endpoint, whose QP is in ERR
        // by then and refuses the descriptor itself).
        if self.fatal {
            ctx.stats.dropped_state += 1;
            return refused_dead();
        }
        // A descriptor takes one PSN, the next: the sequence number is its 24-bit
        // PSN, so descriptors and packets of one QP share one ordered stream.
        if d.seq != self.epsn as u32 & 0x00ff_ffff {
            if self.nak_outstanding {
                ctx.stats.ring_discarded += 1;
                return RingAnswer::Discarded;
            }
            return self.ring_fatal(ctx, RespError::InvalidRequest("ring sequence"));
        }
        // A QP that took packets must not take descriptors in the middle of their
        // message or with packets kept ahead of it: a QP never mixes modes.
        if self.cur.is_some() || !self.ooo.is_empty() {
            return self.ring_fatal(ctx, RespError::InvalidRequest("ring mode mid-message"));
        }
        let plen = payload.len() as u64;
        // The packet path's order: a receive first (an RNR leaves no trace and
        // answers before anything else is looked at), then a WRITE's length limit and
        // target (only with bytes to write: a zero-length WRITE names no memory).
        let needs_recv = match d.op {
            RingOp::Send { .. } => true,
            RingOp::Write { imm, .. } => imm.is_some(),
            RingOp::Error { .. } => {
                return self.ring_fatal(ctx, RespError::InvalidRequest("error descriptor"))
            }
        };
        if needs_recv && !has_recv(q, rq, ctx) {
            self.nak_outstanding = true;
            ctx.stats.rnr_naks_sent += 1;
            return RingAnswer::Refused {
                syndrome: Syndrome::RnrNak {
                    timer: q.attrs().min_rnr_timer,
                },
                fatal: false,
            };
        }
        if let RingOp::Write { va, rkey, .. } = d.op {
            if plen > ctx.config.max_msg_len {
                return self.ring_fatal(ctx, RespError::InvalidRequest("message length"));
            }
            if plen > 0 {
                if let Err(e) = self.check_remote(q, ctx, rkey, va, plen, Access::REMOTE_WRITE) {
                    return self.ring_fatal(ctx, e);
                }
            }
        }
        self.nak_outstanding = false;
        match d.op {
            RingOp::Send { imm, .. } => {
                let Some((recv, from_srq)) = take_recv(q, rq, ctx) else {
                    return self.ring_fatal(ctx, RespError::InvalidRequest("receive queue"));
                };
                let placed = if plen > recv.capacity() {
                    Err(RespError::RecvTooSmall)
                } else {
                    scatter(ctx.mem, q.pd, recv.sg_list.as_slice(), 0, payload)
                        .map_err(RespError::RecvProtection)
                };
                if let Err(e) = placed {
                    fail_recv(ctx, q, recv.wr_id, from_srq, e);
                    return self.ring_fatal(ctx, e);
                }
                complete_send(ctx, q, recv.wr_id, from_srq, plen, imm);
            }
            RingOp::Write { va, rkey, imm } => {
                if plen > 0 {
                    if let Err(e) =
                        ctx.mem
                            .write(Key::Remote(rkey), q.pd, va, payload, Access::REMOTE_WRITE)
                    {
                        return self.ring_fatal(ctx, RespError::RemoteAccess(e));
                    }
                }
                // Only a WRITE with immediate consumes a receive (a plain one must not
                // take one: the tuple form of this test would have, for every WRITE).
                if let Some(imm) = imm {
                    if let Some((recv, from_srq)) = take_recv(q, rq, ctx) {
                        complete_write_imm(ctx, q, recv.wr_id, from_srq, plen, imm);
                    }
                }
            }
            // Refused above; answered the same way here, not with a panic.
            RingOp::Error { .. } => {
                return self.ring_fatal(ctx, RespError::InvalidRequest("error descriptor"))
            }
        }
        self.epsn += 1;
        self.msn = self.msn.wrapping_add(1);
        RingAnswer::Executed
    }

    /// A ring descriptor refused for good: the QP stops taking requests.
    fn ring_fatal<M: Memory>(&mut self, ctx: &mut Ctx<'_, M>, e: RespError) -> RingAnswer {
        self.fatal = true;
        ctx.stats.fatal_naks_sent += 1;
        RingAnswer::Refused {
            syndrome: Syndrome::Nak(e.nak_code()),
            fatal: true,
        }
    }

    /// IBTA Vol 1 §9.7, duplicate requests: SEND/WRITE are ACKed again; READ is
    /// executed again (reads have no side effect); an atomic is answered from the
    /// replay ring, never executed twice.
    fn rc_duplicate<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        repr: &IbPacketRepr,
        p: u64,
    ) {
        ctx.stats.duplicate_requests += 1;
        let Some(info) = repr.bth.opcode.info() else {
            return;
        };
        match info.operation {
            Operation::ReadRequest => {
                let Some(reth) = repr.reth else { return };
                let len = u64::from(reth.dma_len);
                let mtu = q.mtu();
                let queued = self
                    .queue
                    .iter()
                    .any(|r| matches!(r, Response::Read(j) if j.will_send(p, mtu)));
                if queued
                    || self.check_read(q, ctx, reth.va, reth.rkey, len).is_err()
                    || self.pending_dups >= usize::from(q.attrs().max_dest_rd_atomic)
                {
                    return;
                }
                self.push(Response::Read(ReadJob {
                    first_psn: p,
                    sent: 0,
                    va: reth.va,
                    rkey: reth.rkey,
                    len,
                    dup: true,
                }));
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                if let Some(&(_, orig)) = self.atomic_replay.iter().find(|(psn, _)| *psn == p) {
                    self.push(Response::Atomic { psn: p, orig });
                }
            }
            _ => self.push_ack(self.epsn - 1),
        }
    }

    // Inlined into its one caller (`rc_request`, itself inlined into `Qp::handle`):
    // out of line, the call passing nine arguments on and its frame were ~30 of its
    // 53 instructions a received request packet (callgrind, `msg_rate`). A plain
    // `#[inline]` left the call.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn rc_in_order<M: Memory>(
        &mut self,
        q: &QpCommon,
        rq: &mut VecDeque<RecvWr>,
        ctx: &mut Ctx<'_, M>,
        repr: &IbPacketRepr,
        payload: &[u8],
        placed: Option<u64>,
        from: &IcrcPath,
    ) {
        let p = self.epsn;
        self.nak_outstanding = false;
        match self.execute(q, rq, ctx, repr, payload, placed, p, from) {
            Ok(consumed) => {
                self.epsn += consumed;
                let info = repr.bth.opcode.info();
                let op = info.map(|i| i.operation);
                if matches!(op, Some(Operation::Send | Operation::Write)) {
                    if repr.bth.ack_req {
                        self.push_ack(p);
                    } else if matches!(
                        info.map(|i| i.position),
                        Some(Position::Last | Position::Only)
                    ) {
                        // A message's end that did not ask (nobody waits for its
                        // completion): acknowledged with the next ACK asked for, or
                        // after the delay, never left to the requester's timer.
                        self.owe_ack(p, ctx.now, ctx.config);
                    }
                }
                self.accepted(ctx.now);
            }
            Err(Refusal::Rnr) => {
                ctx.stats.rnr_naks_sent += 1;
                // Go-back-N: silence until the refused PSN comes again. Selective: keep
                // what was kept, and keep taking packets ahead of ePSN; every SACK the
                // requester has stays true, because kept packets are never dropped.
                self.nak_outstanding = q.attrs().recovery == Recovery::GoBackN;
                self.push_nak(
                    p,
                    Syndrome::RnrNak {
                        timer: q.attrs().min_rnr_timer,
                    },
                    false,
                );
            }
            Err(Refusal::Error(e)) => {
                ctx.stats.fatal_naks_sent += 1;
                self.fail_current(q, ctx, e);
                self.fatal = true;
                self.ooo.clear();
                self.push_nak(p, Syndrome::Nak(e.nak_code()), true);
            }
        }
    }

    /// Complete the receive WQE of a message that failed, with the status the error names.
    fn fail_current<M: Memory>(&mut self, q: &QpCommon, ctx: &mut Ctx<'_, M>, e: RespError) {
        if let Some(InMsg::Send { recv, from_srq, .. }) = self.cur.take() {
            fail_recv(ctx, q, recv.wr_id, from_srq, e);
        }
    }

    fn uc_request<M: Memory>(
        &mut self,
        q: &QpCommon,
        rq: &mut VecDeque<RecvWr>,
        ctx: &mut Ctx<'_, M>,
        repr: &IbPacketRepr,
        payload: &[u8],
        from: &IcrcPath,
    ) {
        let p = repr.bth.psn.expand(self.epsn);
        let Some(info) = repr.bth.opcode.info() else {
            return;
        };
        if p != self.epsn {
            // IBTA Vol 1 §9.8 (unreliable service, UC): a PSN gap abandons the message in progress; the
            // receive WQE stays for the next message.
            ctx.stats.out_of_sequence += 1;
            self.abandon(q, rq, ctx);
            if !info.position.starts_message() {
                self.cur = Some(InMsg::Discard);
            }
        }
        self.epsn = p + 1;
        if matches!(self.cur, Some(InMsg::Discard)) {
            if info.position.starts_message() {
                self.cur = None;
            } else {
                if info.position.ends_message() {
                    self.cur = None;
                }
                ctx.stats.uc_discarded += 1;
                return;
            }
        }
        match self.execute(q, rq, ctx, repr, payload, None, p, from) {
            Ok(_) => {}
            Err(refusal) => {
                ctx.stats.uc_discarded += 1;
                if let Refusal::Error(
                    e @ (RespError::RecvTooSmall | RespError::RecvProtection(_)),
                ) = refusal
                {
                    self.fail_current(q, ctx, e);
                } else {
                    self.abandon(q, rq, ctx);
                }
                if !info.position.ends_message() {
                    self.cur = Some(InMsg::Discard);
                }
            }
        }
    }

    /// UC: give back the receive WQE of an unfinished SEND.
    fn abandon<M: Memory>(
        &mut self,
        q: &QpCommon,
        rq: &mut VecDeque<RecvWr>,
        ctx: &mut Ctx<'_, M>,
    ) {
        if let Some((recv, from_srq)) = self.take_partial() {
            match (from_srq, q.srq.and_then(|s| ctx.srqs.get_mut(&s))) {
                (true, Some(srq)) => srq.queue.push_front(recv),
                _ => rq.push_front(recv),
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn ud_request<M: Memory>(
        &mut self,
        q: &QpCommon,
        rq: &mut VecDeque<RecvWr>,
        ctx: &mut Ctx<'_, M>,
        repr: &IbPacketRepr,
        payload: &[u8],
        src_path: &IcrcPath,
        wire_len: usize,
    ) {
        let Some(deth) = repr.deth else { return };
        // IBTA Vol 1 §9.8 (UD): a datagram whose Q_Key does not match is silently dropped.
        if deth.qkey != q.attrs().qkey {
            ctx.stats.qkey_mismatch += 1;
            return;
        }
        if payload.len() as u64 > q.mtu() {
            ctx.stats.malformed += 1;
            return;
        }
        let Some((recv, from_srq)) = take_recv(q, rq, ctx) else {
            ctx.stats.ud_no_recv += 1;
            return;
        };
        let mut c = Completion::new(recv.wr_id, WcStatus::Success, WcOpcode::Recv, q.qpn);
        c.from_srq = from_srq;
        c.imm = repr.imm;
        c.src_qp = Some(deth.src_qp);
        c.src_path = Some(*src_path);
        let total = (GRH_LEN + payload.len()) as u64;
        if total > recv.capacity() {
            c.status = WcStatus::LocLenErr;
        } else {
            let grh = grh_for(src_path, wire_len);
            let placed = scatter(ctx.mem, q.pd, &recv.sg_list, 0, &grh)
                .and_then(|()| scatter(ctx.mem, q.pd, &recv.sg_list, GRH_LEN as u64, payload));
            match placed {
                Ok(()) => c.byte_len = total as u32,
                Err(_) => c.status = WcStatus::LocProtErr,
            }
        }
        ctx.cq.complete(c);
    }

    /// Selective mode, a WRITE packet ahead of ePSN: if its message's First packet is
    /// known (this one, the message in progress, or a kept one) and the whole message
    /// passes the rkey checks, write its payload at `va + (psn - first) × MTU` now.
    /// Returns the bytes placed. Anything doubtful is left to in-order processing.
    fn place_early<M: Memory>(
        &self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        repr: &IbPacketRepr,
        payload: &[u8],
        p: u64,
    ) -> Option<u64> {
        let info = repr.bth.opcode.info()?;
        if info.operation != Operation::Write || payload.is_empty() {
            return None;
        }
        let mtu = q.mtu();
        // A by-reference payload is a span list, not data: it is pulled in order.
        if is_by_reference(repr, mtu) {
            return None;
        }
        let base = if info.position.starts_message() {
            repr.reth.map(|r| (p, r.va, r.rkey, u64::from(r.dma_len)))
        } else {
            let from_cur = match self.cur {
                Some(InMsg::Write {
                    first_psn,
                    va,
                    rkey,
                    total,
                    ..
                }) => Some((first_psn, va, rkey, total)),
                _ => None,
            };
            from_cur
                .into_iter()
                .chain(self.ooo.range(..p).rev().filter_map(|(&f, k)| {
                    let first = k.repr.bth.opcode.info()?;
                    (first.operation == Operation::Write
                        && first.position.starts_message()
                        && !is_by_reference(&k.repr, mtu))
                    .then_some(())?;
                    k.repr.reth.map(|r| (f, r.va, r.rkey, u64::from(r.dma_len)))
                }))
                .find(|&(f, _, _, total)| p < f + packets_for(total, mtu))
        };
        let (first, va, rkey, total) = base?;
        let off = (p - first) * mtu;
        let len = payload.len() as u64;
        if total > ctx.config.max_msg_len || off + len > total {
            return None;
        }
        self.check_remote(q, ctx, rkey, va, total, Access::REMOTE_WRITE)
            .ok()?;
        ctx.mem
            .write(
                Key::Remote(rkey),
                q.pd,
                va.checked_add(off)?,
                payload,
                Access::REMOTE_WRITE,
            )
            .ok()?;
        Some(len)
    }

    /// Check, place and account one in-order request packet of RC or UC. Returns the
    /// PSNs it consumed (a READ request consumes one per response packet). `placed`:
    /// the payload (of that many bytes) is already in memory.
    #[allow(clippy::too_many_arguments)]
    fn execute<M: Memory>(
        &mut self,
        q: &QpCommon,
        rq: &mut VecDeque<RecvWr>,
        ctx: &mut Ctx<'_, M>,
        repr: &IbPacketRepr,
        payload: &[u8],
        placed: Option<u64>,
        p: u64,
        from: &IcrcPath,
    ) -> Result<u64, Refusal> {
        let info = repr
            .bth
            .opcode
            .info()
            .ok_or(RespError::InvalidRequest("opcode"))?;
        let pos = info.position;
        let mtu = q.mtu();
        // A by-reference WRITE chunk (crate::byref): one Only packet whose payload names
        // the requester's spans and whose RETH covers the rest of the message.
        let by_ref = is_by_reference(repr, mtu);
        let plen = placed.unwrap_or(payload.len() as u64);
        // §9.7: opcode sequence — a message starts only when none is in progress, and
        // continues with the same operation.
        let in_progress = match &self.cur {
            None => None,
            Some(InMsg::Send { .. }) => Some(Operation::Send),
            Some(InMsg::Write { .. }) => Some(Operation::Write),
            Some(InMsg::Discard) => None,
        };
        match (in_progress, pos.starts_message()) {
            (None, true) => {}
            (Some(op), false) if op == info.operation => {}
            _ => return Err(RespError::InvalidRequest("opcode sequence").into()),
        }
        // Payload length per position (§9.7): First and Middle carry exactly one MTU and
        // no pad.
        let len_ok = match pos {
            Position::First | Position::Middle => plen == mtu && repr.bth.pad_count == 0,
            Position::Last => (1..=mtu).contains(&plen),
            Position::Only => by_ref || plen <= mtu,
        };
        if matches!(info.operation, Operation::Send | Operation::Write) && !len_ok {
            return Err(RespError::InvalidRequest("payload length").into());
        }
        match info.operation {
            Operation::Send if pos == Position::Only => {
                // A whole message in one packet (most small SENDs): the receive goes
                // from the queue to its completion without a stop in `cur`. A failing
                // receive waits there as on the long path, for `fail_current`. The
                // payload is placed through the queue's front entry where it lies and
                // the entry leaves the queue after (its `wr_id` kept): taking the
                // 48-byte request out first (`take_recv`, a call, and the moves of its
                // result) cost 14 more instructions a small SEND received (callgrind,
                // `msg_rate`).
                let (queue, from_srq) = recv_queue(q.srq, rq, ctx.srqs).ok_or(Refusal::Rnr)?;
                let recv = queue.front().ok_or(Refusal::Rnr)?;
                let placed = if plen > recv.capacity() {
                    Err(RespError::RecvTooSmall)
                } else {
                    scatter(ctx.mem, q.pd, recv.sg_list.as_slice(), 0, payload)
                        .map_err(RespError::RecvProtection)
                };
                let wr_id = recv.wr_id;
                if let Err(e) = placed {
                    if let Some(recv) = queue.pop_front() {
                        self.cur = Some(InMsg::Send {
                            recv,
                            from_srq,
                            offset: 0,
                        });
                    }
                    return Err(e.into());
                }
                queue.pop_front();
                complete_send(ctx, q, wr_id, from_srq, plen, repr.imm);
                self.msn = self.msn.wrapping_add(1);
                Ok(1)
            }
            Operation::Send => {
                if pos.starts_message() {
                    let (recv, from_srq) = take_recv(q, rq, ctx).ok_or(Refusal::Rnr)?;
                    self.cur = Some(InMsg::Send {
                        recv,
                        from_srq,
                        offset: 0,
                    });
                }
                let Some(InMsg::Send { recv, offset, .. }) = &mut self.cur else {
                    return Err(RespError::InvalidRequest("opcode sequence").into());
                };
                if *offset + plen > recv.capacity() {
                    return Err(RespError::RecvTooSmall.into());
                }
                scatter(ctx.mem, q.pd, &recv.sg_list, *offset, payload)
                    .map_err(RespError::RecvProtection)?;
                *offset += plen;
                if pos.ends_message() {
                    if let Some(InMsg::Send {
                        recv,
                        from_srq,
                        offset,
                    }) = self.cur.take()
                    {
                        complete_send(ctx, q, recv.wr_id, from_srq, offset, repr.imm);
                    }
                    self.msn = self.msn.wrapping_add(1);
                }
                Ok(1)
            }
            Operation::Write => {
                // WRITE with immediate consumes a receive WQE: refuse (RNR) before any
                // state changes or byte of this packet moves, so the resent packet
                // finds the message exactly as it was.
                if repr.imm.is_some() && !has_recv(q, rq, ctx) {
                    return Err(Refusal::Rnr);
                }
                if pos.starts_message() {
                    let reth = repr.reth.ok_or(RespError::InvalidRequest("reth"))?;
                    let total = u64::from(reth.dma_len);
                    if total > ctx.config.max_msg_len {
                        return Err(RespError::InvalidRequest("message length").into());
                    }
                    if total > 0 {
                        self.check_remote(q, ctx, reth.rkey, reth.va, total, Access::REMOTE_WRITE)?;
                    }
                    self.cur = Some(InMsg::Write {
                        first_psn: p,
                        va: reth.va,
                        rkey: reth.rkey,
                        total,
                        offset: 0,
                    });
                }
                let Some(InMsg::Write {
                    va,
                    rkey,
                    total,
                    offset,
                    ..
                }) = self.cur
                else {
                    return Err(RespError::InvalidRequest("opcode sequence").into());
                };
                let end = offset + plen;
                let fits = if by_ref {
                    true // its spans are checked against `total` below
                } else if pos.ends_message() {
                    end == total
                } else {
                    end < total
                };
                if !fits {
                    return Err(RespError::InvalidRequest("write length").into());
                }
                let mut total = total;
                if by_ref {
                    let mut spans = [RemoteSpan::default(); MAX_SGE];
                    let (nspans, chunk) = byref::decode(payload, total, &mut spans)
                        .ok_or(RespError::InvalidRequest("by-reference spans"))?;
                    let pulled = ctx.mem.pull(
                        Key::Remote(rkey),
                        q.pd,
                        va + offset,
                        from,
                        &spans[..nspans],
                        Access::REMOTE_WRITE,
                    );
                    match pulled {
                        Ok(()) => {
                            ctx.stats.by_reference_received += 1;
                            ctx.stats.by_reference_bytes += chunk;
                            // The chunk is the message the completion reports.
                            total = chunk;
                        }
                        Err(e) => {
                            ctx.stats.by_reference_failed += 1;
                            return Err(RespError::RemoteAccess(e).into());
                        }
                    }
                } else if plen > 0 && placed.is_none() {
                    ctx.mem
                        .write(
                            Key::Remote(rkey),
                            q.pd,
                            va + offset,
                            payload,
                            Access::REMOTE_WRITE,
                        )
                        .map_err(RespError::RemoteAccess)?;
                }
                if pos.ends_message() {
                    self.cur = None;
                    self.msn = self.msn.wrapping_add(1);
                    if let Some(imm) = repr.imm {
                        if let Some((recv, from_srq)) = take_recv(q, rq, ctx) {
                            complete_write_imm(ctx, q, recv.wr_id, from_srq, total, imm);
                        }
                    }
                } else if let Some(InMsg::Write { offset, .. }) = &mut self.cur {
                    *offset = end;
                }
                Ok(1)
            }
            Operation::ReadRequest if q.qp_type == QpType::Rc => {
                let reth = repr.reth.ok_or(RespError::InvalidRequest("reth"))?;
                let len = u64::from(reth.dma_len);
                if len > ctx.config.max_msg_len {
                    return Err(RespError::InvalidRequest("message length").into());
                }
                self.check_read(q, ctx, reth.va, reth.rkey, len)?;
                // §9.7: more outstanding READ/atomics than max_dest_rd_atomic is an invalid request.
                if self.pending_reads >= usize::from(q.attrs().max_dest_rd_atomic) {
                    return Err(RespError::InvalidRequest("too many outstanding reads").into());
                }
                self.push(Response::Read(ReadJob {
                    first_psn: p,
                    sent: 0,
                    va: reth.va,
                    rkey: reth.rkey,
                    len,
                    dup: false,
                }));
                self.msn = self.msn.wrapping_add(1);
                Ok(packets_for(len, mtu))
            }
            Operation::CompareSwap | Operation::FetchAdd if q.qp_type == QpType::Rc => {
                let a = repr
                    .atomic_eth
                    .ok_or(RespError::InvalidRequest("atomic eth"))?;
                // §9.4 (operations: atomics): the target must be 8-byte aligned.
                if a.va % 8 != 0 {
                    return Err(RespError::InvalidRequest("misaligned atomic").into());
                }
                if !q.attrs().access.contains(Access::REMOTE_ATOMIC) {
                    return Err(RespError::RemoteAccess(AccessError::AccessDenied).into());
                }
                let op = if info.operation == Operation::CompareSwap {
                    AtomicOp::CompareSwap {
                        compare: a.compare,
                        swap: a.swap_add,
                    }
                } else {
                    AtomicOp::FetchAdd { add: a.swap_add }
                };
                let orig = ctx
                    .mem
                    .atomic(Key::Remote(a.rkey), q.pd, a.va, op)
                    .map_err(|e| match e {
                        AccessError::Misaligned => RespError::InvalidRequest("misaligned atomic"),
                        e => RespError::RemoteAccess(e),
                    })?;
                self.atomic_replay.push_back((p, orig));
                while self.atomic_replay.len() > usize::from(q.attrs().max_dest_rd_atomic).max(1) {
                    self.atomic_replay.pop_front();
                }
                self.push(Response::Atomic { psn: p, orig });
                self.msn = self.msn.wrapping_add(1);
                Ok(1)
            }
            _ => Err(RespError::InvalidRequest("opcode not valid on this QP").into()),
        }
    }

    fn check_remote<M: Memory>(
        &self,
        q: &QpCommon,
        ctx: &Ctx<'_, M>,
        rkey: u32,
        va: u64,
        len: u64,
        need: Access,
    ) -> Result<(), RespError> {
        if !q.attrs().access.contains(need) {
            return Err(RespError::RemoteAccess(AccessError::AccessDenied));
        }
        ctx.mem
            .check(Key::Remote(rkey), q.pd, va, len, need)
            .map_err(RespError::RemoteAccess)
    }

    fn check_read<M: Memory>(
        &self,
        q: &QpCommon,
        ctx: &Ctx<'_, M>,
        va: u64,
        rkey: u32,
        len: u64,
    ) -> Result<(), RespError> {
        if len == 0 {
            return Ok(());
        }
        self.check_remote(q, ctx, rkey, va, len, Access::REMOTE_READ)
    }

    // ----------------------------------------------------------------- transmit

    fn job_done(&mut self, job: &ReadJob) {
        if job.dup {
            self.pending_dups -= 1;
        } else {
            self.pending_reads -= 1;
        }
    }

    /// Write the next response packet into `buf`. `posted`: receive WQEs on the QP's
    /// own receive queue, advertised as end-to-end credits (`None` with an SRQ, which
    /// IBTA Vol 1 §9.7, end-to-end flow control, says to advertise as "invalid").
    pub fn poll_transmit<M: Memory>(
        &mut self,
        q: &QpCommon,
        ctx: &mut Ctx<'_, M>,
        buf: &mut [u8],
        posted: Option<usize>,
    ) -> Option<RespEmitted> {
        let path = q.attrs().path.as_ref()?;
        let front = *self.queue.front()?;
        let mtu = q.mtu();
        let credits = match posted {
            Some(n) => code_from_credits(u32::try_from(n).unwrap_or(u32::MAX)),
            None => CREDITS_INVALID,
        };
        let ack = |syndrome| AethRepr {
            syndrome,
            msn: self.msn & Psn::MASK,
        };
        // The QP's encoded BTH (P_Key, destination QP), rebuilt when either changes.
        let (pkey, dest) = (q.attrs().pkey, q.attrs().dest_qpn);
        if !self.template.is_some_and(|t| t.is_for(pkey, dest)) {
            self.template = Some(PacketTemplate::new(pkey, dest, None).ok()?);
        }
        let template = self.template?;
        let mut repr = PacketFields {
            opcode: weft_wire::Opcode(0),
            solicited: false,
            ack_req: false,
            psn: Psn::new(0),
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            imm: None,
            payload_len: 0,
        };
        let mut payload_len = 0usize;
        let mut emitted = None;
        let mut fatal = false;
        match front {
            Response::Ack {
                psn,
                syndrome,
                sack,
                fatal: f,
            } => {
                self.queue.pop_front();
                repr.opcode =
                    opcode_for(Transport::Rc, Operation::Acknowledge, Position::Only, false)?;
                repr.psn = Psn::new(psn as u32);
                let syndrome = match syndrome {
                    Syndrome::Ack { .. } => Syndrome::Ack {
                        credit_code: credits,
                    },
                    s => s,
                };
                let mut a = ack(syndrome);
                if let Some(s) = sack {
                    a.msn = s as u32 & Psn::MASK;
                }
                repr.aeth = Some(a);
                fatal = f;
                if fatal || !matches!(syndrome, Syndrome::Ack { .. }) {
                    ctx.stats.naks_sent += 1;
                } else {
                    ctx.stats.acks_sent += 1;
                }
            }
            Response::Atomic { psn, orig } => {
                self.queue.pop_front();
                repr.opcode = opcode_for(
                    Transport::Rc,
                    Operation::AtomicAcknowledge,
                    Position::Only,
                    false,
                )?;
                repr.psn = Psn::new(psn as u32);
                repr.aeth = Some(ack(Syndrome::Ack {
                    credit_code: credits,
                }));
                repr.atomic_ack_eth = Some(AtomicAckEthRepr { orig });
            }
            Response::Read(job) => {
                let n = packets_for(job.len, mtu);
                let i = job.sent;
                let pos = position(i, n);
                repr.opcode = opcode_for(Transport::Rc, Operation::ReadResponse, pos, false)?;
                repr.psn = Psn::new((job.first_psn + i) as u32);
                if pos != Position::Middle {
                    repr.aeth = Some(ack(Syndrome::Ack {
                        credit_code: credits,
                    }));
                }
                payload_len = packet_len(job.len, mtu, i) as usize;
                // One copy: headers first, then memory read straight into the packet.
                repr.payload_len = payload_len;
                let at = template.emit_headers(buf, &repr).ok()?;
                if payload_len > 0 {
                    let read = ctx.mem.read(
                        Key::Remote(job.rkey),
                        q.pd,
                        job.va.wrapping_add(i * mtu),
                        &mut buf[at.clone()],
                        Access::REMOTE_READ,
                    );
                    if read.is_err() {
                        // The region went away mid-READ: NAK remote access at this PSN.
                        self.queue.pop_front();
                        self.job_done(&job);
                        self.fatal = true;
                        self.queue.push_front(Response::Ack {
                            psn: job.first_psn + i,
                            syndrome: Syndrome::Nak(NakCode::REMOTE_ACCESS_ERROR),
                            sack: None,
                            fatal: true,
                        });
                        return self.poll_transmit(q, ctx, buf, posted);
                    }
                }
                emitted = Some(at);
                if i + 1 >= n {
                    self.queue.pop_front();
                    self.job_done(&job);
                } else if let Some(Response::Read(j)) = self.queue.front_mut() {
                    j.sent += 1;
                }
                ctx.stats.read_responses_sent += 1;
            }
        }
        let len = match emitted {
            Some(at) => at.end + IbPacketRepr::pad_for(payload_len) + wire_len::ICRC,
            None => {
                let at = template.emit_headers(buf, &repr).ok()?;
                at.end + wire_len::ICRC
            }
        };
        if ctx.config.write_icrc {
            path.fill(&mut buf[..len]).ok()?;
        }
        Some(RespEmitted { len, fatal })
    }
}

fn has_recv<M: Memory>(q: &QpCommon, rq: &VecDeque<RecvWr>, ctx: &Ctx<'_, M>) -> bool {
    match q.srq {
        Some(s) => ctx.srqs.get(&s).is_some_and(|s| !s.queue.is_empty()),
        None => !rq.is_empty(),
    }
}

/// A SEND's message arrived whole: its receive completes with the bytes placed and the
/// message's immediate (the one-packet path and the last packet of a longer one).
#[inline]
fn complete_send<M: Memory>(
    ctx: &mut Ctx<'_, M>,
    q: &QpCommon,
    wr_id: u64,
    from_srq: bool,
    len: u64,
    imm: Option<u32>,
) {
    let mut c = Completion::new(wr_id, WcStatus::Success, WcOpcode::Recv, q.qpn);
    c.byte_len = len as u32;
    c.imm = imm;
    c.from_srq = from_srq;
    ctx.cq.complete(c);
}

/// A SEND's receive failed with `e` (too small, a protection error): it completes
/// with the status `e` gives it (the packet path's `fail_current` and the ring mode).
fn fail_recv<M: Memory>(
    ctx: &mut Ctx<'_, M>,
    q: &QpCommon,
    wr_id: u64,
    from_srq: bool,
    e: RespError,
) {
    let mut c = Completion::new(wr_id, e.recv_status(), WcOpcode::Recv, q.qpn);
    c.from_srq = from_srq;
    ctx.cq.complete(c);
}

/// A WRITE with immediate arrived whole: the receive it consumed completes with the
/// message's length and immediate (the packet path and the ring mode).
fn complete_write_imm<M: Memory>(
    ctx: &mut Ctx<'_, M>,
    q: &QpCommon,
    wr_id: u64,
    from_srq: bool,
    len: u64,
    imm: u32,
) {
    let mut c = Completion::new(wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm, q.qpn);
    c.byte_len = len as u32;
    c.imm = Some(imm);
    c.from_srq = from_srq;
    ctx.cq.complete(c);
}

/// The queue a QP's SENDs take their receives from, and whether it is a shared one
/// (the completion says so): the SRQ's when the QP has one, its own otherwise. `None`
/// when the QP names an SRQ that is gone: no receive can be posted for it, an RNR.
/// Borrows only `srqs` from the context, so the caller keeps `ctx.mem` and `ctx.cq`.
#[inline(always)]
fn recv_queue<'a>(
    srq: Option<u32>,
    rq: &'a mut VecDeque<RecvWr>,
    srqs: &'a mut BTreeMap<u32, Srq>,
) -> Option<(&'a mut VecDeque<RecvWr>, bool)> {
    match srq {
        Some(s) => srqs.get_mut(&s).map(|srq| (&mut srq.queue, true)),
        None => Some((rq, false)),
    }
}

fn take_recv<M: Memory>(
    q: &QpCommon,
    rq: &mut VecDeque<RecvWr>,
    ctx: &mut Ctx<'_, M>,
) -> Option<(RecvWr, bool)> {
    let (queue, from_srq) = recv_queue(q.srq, rq, ctx.srqs)?;
    queue.pop_front().map(|r| (r, from_srq))
}

/// The 40 bytes rdma_rxe writes at the head of a UD receive buffer: for RoCEv2 over
/// IPv4, 20 zero bytes then the IPv4 header; over IPv6, the IPv6 header (which has the
/// GRH's layout). Fields weft's links do not carry in the path take their values.
pub fn grh_for(path: &IcrcPath, ib_len: usize) -> [u8; GRH_LEN] {
    let mut g = [0u8; GRH_LEN];
    let udp_len = 8 + ib_len;
    match path.ips {
        IpPair::V4 { src, dst } => {
            let h = &mut g[20..];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&((20 + udp_len) as u16).to_be_bytes());
            h[6] = 0x40; // DF, identification 0
            h[8] = 64; // TTL
            h[9] = 17; // UDP
            h[12..16].copy_from_slice(&src.octets());
            h[16..20].copy_from_slice(&dst.octets());
            let sum = weft_wire::checksum::checksum(h);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        IpPair::V6 { src, dst } => {
            g[0] = 0x60;
            g[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            g[6] = 17;
            g[7] = 64;
            g[8..24].copy_from_slice(&src.octets());
            g[24..40].copy_from_slice(&dst.octets());
        }
    }
    g
}
