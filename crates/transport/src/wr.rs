//! Work requests the caller posts and the completions the transport returns
//! (`ibv_send_wr`, `ibv_recv_wr`, `ibv_wc`).

use weft_wire::roce::IcrcPath;

/// Most scatter-gather entries in one work request.
pub const MAX_SGE: usize = 32;

/// One scatter-gather entry: `len` bytes at `addr` in the region with local key `lkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sge {
    /// Virtual address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Local key of the region.
    pub lkey: u32,
}

impl Sge {
    /// An empty entry (zero length, key 0).
    pub const EMPTY: Sge = Sge {
        addr: 0,
        len: 0,
        lkey: 0,
    };
}

/// How many entries a [`SgList`] holds without a heap allocation.
pub const INLINE_SGES: usize = 2;

/// A work request's scatter-gather list. Up to [`INLINE_SGES`] entries live inside the
/// work request itself (as they do in an ibverbs WQE), so posting the usual one or
/// two buffers allocates nothing; longer lists spill to the heap. It dereferences to
/// `[Sge]`, and converts from an `Sge`, an array, a slice or a `Vec`.
#[derive(Clone)]
pub struct SgList(SgRepr);

#[derive(Clone)]
enum SgRepr {
    Inline { len: u8, sges: [Sge; INLINE_SGES] },
    Heap(Vec<Sge>),
}

impl SgList {
    /// An empty list.
    pub const fn new() -> SgList {
        SgList(SgRepr::Inline {
            len: 0,
            sges: [Sge::EMPTY; INLINE_SGES],
        })
    }

    /// Append an entry, moving to the heap past [`INLINE_SGES`].
    pub fn push(&mut self, sge: Sge) {
        match &mut self.0 {
            SgRepr::Inline { len, sges } if usize::from(*len) < INLINE_SGES => {
                sges[usize::from(*len)] = sge;
                *len += 1;
            }
            SgRepr::Inline { len, sges } => {
                let mut v = Vec::with_capacity(usize::from(*len) * 2);
                v.extend_from_slice(&sges[..usize::from(*len)]);
                v.push(sge);
                self.0 = SgRepr::Heap(v);
            }
            SgRepr::Heap(v) => v.push(sge),
        }
    }

    /// The entries, as `Deref` gives them, but marked inline: the receive path reads
    /// a request's list where it lies in the queue, and the out-of-line `deref` was a
    /// call there (~9 instructions each). `Deref` itself stays as the compiler judges:
    /// marking it inlined everywhere moved other inlining decisions on the send path
    /// for the worse (callgrind, `msg_rate`).
    #[inline]
    pub fn as_slice(&self) -> &[Sge] {
        match &self.0 {
            SgRepr::Inline { len, sges } => &sges[..usize::from(*len)],
            SgRepr::Heap(v) => v,
        }
    }

    /// Remove every entry.
    pub fn clear(&mut self) {
        match &mut self.0 {
            SgRepr::Inline { len, .. } => *len = 0,
            SgRepr::Heap(v) => v.clear(),
        }
    }
}

impl Default for SgList {
    fn default() -> SgList {
        SgList::new()
    }
}

impl std::ops::Deref for SgList {
    type Target = [Sge];
    fn deref(&self) -> &[Sge] {
        match &self.0 {
            SgRepr::Inline { len, sges } => &sges[..usize::from(*len)],
            SgRepr::Heap(v) => v,
        }
    }
}

impl std::ops::DerefMut for SgList {
    fn deref_mut(&mut self) -> &mut [Sge] {
        match &mut self.0 {
            SgRepr::Inline { len, sges } => &mut sges[..usize::from(*len)],
            SgRepr::Heap(v) => v,
        }
    }
}

impl PartialEq for SgList {
    fn eq(&self, other: &SgList) -> bool {
        **self == **other
    }
}

impl Eq for SgList {}

impl std::fmt::Debug for SgList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl From<Sge> for SgList {
    fn from(sge: Sge) -> SgList {
        SgList::from(std::slice::from_ref(&sge))
    }
}

impl From<&[Sge]> for SgList {
    /// A short list is built in place (one copy), not entry by entry: this runs for
    /// every work request an application builds.
    #[inline]
    fn from(sges: &[Sge]) -> SgList {
        if sges.len() <= INLINE_SGES {
            let mut a = [Sge::EMPTY; INLINE_SGES];
            a[..sges.len()].copy_from_slice(sges);
            SgList(SgRepr::Inline {
                len: sges.len() as u8,
                sges: a,
            })
        } else {
            SgList(SgRepr::Heap(sges.to_vec()))
        }
    }
}

impl<const N: usize> From<[Sge; N]> for SgList {
    #[inline]
    fn from(sges: [Sge; N]) -> SgList {
        SgList::from(&sges[..])
    }
}

/// Takes the vector as it is (no copy), so it keeps its allocation.
impl From<Vec<Sge>> for SgList {
    fn from(v: Vec<Sge>) -> SgList {
        SgList(SgRepr::Heap(v))
    }
}

impl FromIterator<Sge> for SgList {
    fn from_iter<I: IntoIterator<Item = Sge>>(iter: I) -> SgList {
        let mut l = SgList::new();
        iter.into_iter().for_each(|s| l.push(s));
        l
    }
}

impl<'a> IntoIterator for &'a SgList {
    type Item = &'a Sge;
    type IntoIter = std::slice::Iter<'a, Sge>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The target of an RDMA operation on the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteAddr {
    /// Remote virtual address.
    pub addr: u64,
    /// Remote key.
    pub rkey: u32,
}

/// What a send work request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WrOp {
    /// SEND, optionally with immediate data.
    Send {
        /// Immediate data.
        imm: Option<u32>,
    },
    /// RDMA WRITE, optionally with immediate data (which consumes a receive WQE).
    Write {
        /// Target.
        remote: RemoteAddr,
        /// Immediate data.
        imm: Option<u32>,
    },
    /// RDMA READ into the SGEs.
    Read {
        /// Source.
        remote: RemoteAddr,
    },
    /// ATOMIC compare-and-swap; the old value lands in the (8-byte) SGE.
    CompareSwap {
        /// Target, 8-byte aligned.
        remote: RemoteAddr,
        /// Expected value.
        compare: u64,
        /// New value.
        swap: u64,
    },
    /// ATOMIC fetch-and-add; the old value lands in the (8-byte) SGE.
    FetchAdd {
        /// Target, 8-byte aligned.
        remote: RemoteAddr,
        /// Addend.
        add: u64,
    },
}

impl WrOp {
    /// True for READ and the atomics: operations that need responder resources
    /// (`max_rd_atomic`) and complete on a response, not an ACK.
    pub const fn is_read_or_atomic(&self) -> bool {
        matches!(
            self,
            WrOp::Read { .. } | WrOp::CompareSwap { .. } | WrOp::FetchAdd { .. }
        )
    }

    /// True for the atomics.
    pub const fn is_atomic(&self) -> bool {
        matches!(self, WrOp::CompareSwap { .. } | WrOp::FetchAdd { .. })
    }

    /// The completion opcode.
    pub const fn wc_opcode(&self) -> WcOpcode {
        match self {
            WrOp::Send { .. } => WcOpcode::Send,
            WrOp::Write { .. } => WcOpcode::RdmaWrite,
            WrOp::Read { .. } => WcOpcode::RdmaRead,
            WrOp::CompareSwap { .. } => WcOpcode::CompSwap,
            WrOp::FetchAdd { .. } => WcOpcode::FetchAdd,
        }
    }
}

/// Where a UD send goes: the address handle plus the destination QP and its Q_Key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdDest {
    /// IP/UDP path (source is us).
    pub path: IcrcPath,
    /// Destination QP number.
    pub qpn: u32,
    /// Q_Key the destination QP expects.
    pub qkey: u32,
}

/// A send work request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendWr {
    /// Caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: WrOp,
    /// Local buffers (gather for SEND/WRITE, scatter for READ/atomics); at most [`MAX_SGE`].
    pub sg_list: SgList,
    /// Copy the gathered bytes at post time (`IBV_SEND_INLINE`): the SGE keys are not
    /// checked and the buffers may be reused as soon as `post_send` returns.
    pub inline: bool,
    /// Generate a completion on success (`IBV_SEND_SIGNALED`); errors always complete.
    pub signaled: bool,
    /// Wait for all earlier READ and atomic operations to complete (`IBV_SEND_FENCE`).
    pub fence: bool,
    /// Set the BTH solicited-event bit on the last packet.
    pub solicited: bool,
    /// UD destination; required on UD QPs, ignored elsewhere.
    pub ud: Option<UdDest>,
}

impl SendWr {
    /// A signaled work request with no flags. `sg_list` is an [`Sge`], an array or
    /// slice of them, or a `Vec`.
    pub fn new(wr_id: u64, op: WrOp, sg_list: impl Into<SgList>) -> SendWr {
        SendWr {
            wr_id,
            op,
            sg_list: sg_list.into(),
            inline: false,
            signaled: true,
            fence: false,
            solicited: false,
            ud: None,
        }
    }

    /// Total bytes of the scatter-gather list. A list of one (most requests) is
    /// read directly: the summing loop's set-up (unrolled by four) was ~16
    /// instructions of every inline post's checks (callgrind, `msg_rate`).
    #[inline]
    pub fn sg_len(&self) -> u64 {
        match &self.sg_list[..] {
            [one] => u64::from(one.len),
            list => list.iter().map(|s| u64::from(s.len)).sum(),
        }
    }
}

/// A send work request as a poster hands it over: owned ([`SendWr`]), whose gather
/// list moves into the WQE, or borrowed (`&SendWr`), whose list is copied (a request
/// posted with an inline payload gives the WQE no list: nothing is taken or copied).
/// Borrowed requests are what `ibv_post_send` takes (a pointer to the application's
/// request): a loop that keeps one request and changes its `wr_id` posts it with no
/// move of its ~150 bytes. Moves of a request the application had just written field
/// by field were store-forwarding stalls on the posting thread (`perf`,
/// docs/results/verbs.md). A borrowed list of more than [`INLINE_SGES`] entries is
/// copied to the heap on each post; an owned one moves.
///
/// Sealed: the poster checks the request it reads through [`PostWr::wr`] and pushes
/// the list [`PostWr::take_sg_list`] returns, so only these two implementations, whose
/// list is the request's own, may exist.
pub trait PostWr: sealed::Sealed {
    /// The request, read in place.
    fn wr(&self) -> &SendWr;
    /// Its gather list for the WQE: taken from an owned request (left empty), copied
    /// from a borrowed one.
    fn take_sg_list(&mut self) -> SgList;
    /// The request as an owned value (a borrowed one is cloned).
    fn into_owned(self) -> SendWr;
}

mod sealed {
    /// [`super::PostWr`]'s seal.
    pub trait Sealed {}
    impl Sealed for super::SendWr {}
    impl Sealed for &super::SendWr {}
}

impl PostWr for SendWr {
    #[inline]
    fn wr(&self) -> &SendWr {
        self
    }
    #[inline]
    fn take_sg_list(&mut self) -> SgList {
        std::mem::take(&mut self.sg_list)
    }
    #[inline]
    fn into_owned(self) -> SendWr {
        self
    }
}

impl PostWr for &SendWr {
    #[inline]
    fn wr(&self) -> &SendWr {
        self
    }
    #[inline]
    fn take_sg_list(&mut self) -> SgList {
        self.sg_list.clone()
    }
    #[inline]
    fn into_owned(self) -> SendWr {
        self.clone()
    }
}

/// A receive work request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWr {
    /// Caller's identifier.
    pub wr_id: u64,
    /// Buffers to scatter the incoming message into; at most [`MAX_SGE`].
    pub sg_list: SgList,
}

impl RecvWr {
    /// A receive work request; `sg_list` as for [`SendWr::new`].
    pub fn new(wr_id: u64, sg_list: impl Into<SgList>) -> RecvWr {
        RecvWr {
            wr_id,
            sg_list: sg_list.into(),
        }
    }

    /// Total capacity in bytes. A one-entry list (the usual receive) is read directly,
    /// inline; longer lists are summed out of line. The responder asks once per
    /// received SEND, and the call with the summing loop's set-up (unrolled by four)
    /// was ~30 instructions of every one (callgrind, `msg_rate`), as
    /// `SendWr::sg_len`'s was; with the loop in it, the compiler kept the call.
    #[inline]
    pub fn capacity(&self) -> u64 {
        match self.sg_list.as_slice() {
            [one] => u64::from(one.len),
            list => sum_lens(list),
        }
    }
}

/// The bytes a list of entries spans (a receive's capacity past one entry).
#[inline(never)]
fn sum_lens(list: &[Sge]) -> u64 {
    list.iter().map(|s| u64::from(s.len)).sum()
}

/// Completion status, named as `ibv_wc_status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// The operation completed.
    Success,
    /// Local length error: a message did not fit the receive buffer, or a UD message
    /// exceeded the MTU.
    LocLenErr,
    /// Local QP operation error (internal inconsistency).
    LocQpOpErr,
    /// Local protection error: an SGE's lkey, bounds or rights were refused.
    LocProtErr,
    /// The work request was flushed because the QP entered ERR (or the SQ SQE).
    WrFlushErr,
    /// Memory-window bind error (weft has no memory windows; never produced).
    MwBindErr,
    /// Bad response from the responder (unexpected opcode or length).
    BadRespErr,
    /// Local access error (e.g. a READ response target refused mid-message).
    LocAccessErr,
    /// The responder answered NAK Invalid Request.
    RemInvReqErr,
    /// The responder answered NAK Remote Access Error.
    RemAccessErr,
    /// The responder answered NAK Remote Operational Error.
    RemOpErr,
    /// The transport retry counter (`retry_cnt`) was exhausted.
    RetryExcErr,
    /// The RNR retry counter (`rnr_retry`) was exhausted.
    RnrRetryExcErr,
    /// The responder answered NAK Invalid RD Request.
    RemInvRdReqErr,
    /// The responder aborted the operation.
    RemAbortErr,
    /// Any other error.
    GeneralErr,
}

/// What a completion completes (`ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// SEND (with or without immediate).
    Send,
    /// RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// RDMA READ.
    RdmaRead,
    /// Compare-and-swap.
    CompSwap,
    /// Fetch-and-add.
    FetchAdd,
    /// A receive consumed by a SEND.
    Recv,
    /// A receive consumed by an RDMA WRITE with immediate.
    RecvRdmaWithImm,
}

impl WcOpcode {
    /// True for completions of receive work requests.
    pub const fn is_recv(self) -> bool {
        matches!(self, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm)
    }
}

/// A work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The work request's identifier.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// Which kind of work request.
    pub opcode: WcOpcode,
    /// The QP the work request was posted on (for SRQ receives: the QP that consumed it).
    pub qpn: u32,
    /// Bytes received (receives), read (READ), 8 (atomics), or sent.
    pub byte_len: u32,
    /// Immediate data of a SEND or WRITE with immediate.
    pub imm: Option<u32>,
    /// UD: the sender's QP number.
    pub src_qp: Option<u32>,
    /// UD: the path the datagram arrived on (source = the sender).
    pub src_path: Option<IcrcPath>,
    /// The receive came from a shared receive queue.
    pub from_srq: bool,
}

impl Completion {
    /// A completion with no length, immediate or source.
    pub fn new(wr_id: u64, status: WcStatus, opcode: WcOpcode, qpn: u32) -> Completion {
        Completion {
            wr_id,
            status,
            opcode,
            qpn,
            byte_len: 0,
            imm: None,
            src_qp: None,
            src_path: None,
            from_srq: false,
        }
    }
}

/// Where an endpoint's completions go, as they happen. The default is the endpoint's
/// own queue ([`crate::Endpoint::poll_completion`]); a device that keeps its completion
/// queues elsewhere passes a sink that puts each completion straight where it belongs
/// ([`crate::Endpoint::with_sink`]), with no queue in between. The transport stays
/// sans-IO: a sink is a plain callback, called inside the endpoint's own calls.
pub trait CompletionSink {
    /// Take one completion. Completions of one QP come in the order they complete.
    fn complete(&mut self, c: Completion);

    /// QP `qpn` entered the error state: by itself (a send that failed on an RC QP:
    /// retries exceeded, a NAK; a fatal responder error) or by a modify to ERR.
    /// Called before the completions it flushes. Receives posted to it from now on
    /// (to a QP with a receive queue of its own, not an SRQ) complete at once,
    /// flushed, once they reach the transport: a device that hands
    /// receives over through queues of its own learns here that they are due (with
    /// nothing else to tell it, since an error may complete nothing). The default
    /// ignores it.
    fn qp_error(&mut self, qpn: u32) {
        let _ = qpn;
    }
}

impl CompletionSink for std::collections::VecDeque<Completion> {
    fn complete(&mut self, c: Completion) {
        self.push_back(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sge(i: u64) -> Sge {
        Sge {
            addr: i * 100,
            len: i as u32,
            lkey: 7,
        }
    }

    #[test]
    fn sg_list_spills_to_the_heap_and_keeps_every_entry_in_order() {
        let mut l = SgList::new();
        for i in 0..(INLINE_SGES as u64 + 3) {
            l.push(sge(i));
            assert_eq!(l.len(), i as usize + 1);
            assert!(l.iter().enumerate().all(|(k, s)| *s == sge(k as u64)));
        }
        l.clear();
        assert!(l.is_empty());
    }

    #[test]
    fn sg_list_equality_and_conversions_ignore_the_representation() {
        let v: Vec<Sge> = (0..2).map(sge).collect();
        let from_vec = SgList::from(v.clone());
        let from_array = SgList::from([sge(0), sge(1)]);
        let from_iter: SgList = v.iter().copied().collect();
        assert_eq!(from_vec, from_array);
        assert_eq!(from_iter, from_array);
        assert_eq!(&*from_array, &v[..]);
        assert_eq!(SgList::from(sge(3)).len(), 1);
        let long: SgList = (0..5).map(sge).collect();
        assert_eq!(SgList::from(&long[..]), long);
        assert_ne!(long, from_array);
        assert_eq!(format!("{from_array:?}"), format!("{v:?}"));
        let wr = SendWr::new(1, WrOp::Send { imm: None }, [sge(2), sge(3)]);
        assert_eq!(wr.sg_len(), 5);
        assert_eq!(RecvWr::new(2, sge(4)).capacity(), 4);
    }
}
