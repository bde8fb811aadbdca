//! The shm ring mode's requester-side vocabulary (docs/verbs.md, the ring mode's build
//! plan; the descriptor format is [`weft_wire::ring`], the responder's side
//! [`crate::Endpoint::ring_request`]).
//!
//! A QP in ring mode ([`crate::Endpoint::set_ring_mode`]) sends each SEND or WRITE of at
//! most one path MTU as one descriptor instead of RoCEv2 packets. The message keeps
//! every verbs rule the packet path has, because it *is* the packet path's message:
//! it takes one PSN, so ordering, the send queue's window, RNR and its retry budget,
//! the local ACK timer and the error flush are the requester's own code. What the
//! ring replaces is the ACK: the driver's link delivers in order and uncorrupted, and
//! tells the driver when the peer's consumer released the item — after the peer's
//! transport answered it. The driver hands that release back
//! ([`crate::Endpoint::ring_released`]), and it acknowledges the message.
//!
//! A [`Transmit`](crate::Transmit) whose `ring` is set is such a descriptor: the
//! driver must send it alone, as one item the link tracks, with the tag. READs,
//! atomics and longer messages of the same QP still travel as packets; a QP never
//! has messages of both kinds in flight at once (a message of the other kind waits
//! until everything before it completed), so the peer's responder sees one stream
//! in PSN order.
//!
//! Refusals come back as ERROR descriptors ([`crate::Endpoint::ring_refused`]): an
//! RNR is retried as RC retries it, a NAK code fails the message and the QP. The
//! driver must hand over the releases it read *before* the ERRORs it took from the
//! reverse ring in the same step, and apply them after (the peer pushes its ERROR
//! before it releases the refused item): then a refused message is never completed
//! as a success. The tag's epoch makes the releases of descriptors the peer
//! discarded after an RNR (sent before the requester learned of it) harmless.

/// What a driver keeps with a ring descriptor until the link reports it released
/// (or lost): the QP, the message's PSN and the requester's epoch when it was sent.
/// Opaque to the driver apart from [`RingTag::qpn`]; it travels as a `u64`
/// ([`RingTag::raw`], [`RingTag::from_raw`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RingTag(u64);

/// [`RingTag::asks`]'s bit.
const ASKS: u64 = 1 << 63;

impl RingTag {
    pub(crate) fn new(qpn: u32, psn: u32, epoch: u8, asks: bool) -> RingTag {
        RingTag(
            u64::from(qpn & 0x00ff_ffff)
                | (u64::from(epoch) << 24)
                | (u64::from(psn & 0x00ff_ffff) << 32)
                | if asks { ASKS } else { 0 },
        )
    }

    /// Whether the requester waits for this release: the message is signaled, or its
    /// send queue is at least half full (the packet path's AckReq rule). A driver may
    /// read the releases of the others lazily — every so many passes — and hand them
    /// in together, as the packet path's responder coalesces their ACKs.
    pub fn asks(self) -> bool {
        self.0 & ASKS != 0
    }

    /// The sending QP.
    pub fn qpn(self) -> u32 {
        (self.0 & 0x00ff_ffff) as u32
    }

    /// The message's 24-bit PSN.
    pub(crate) fn psn(self) -> u32 {
        ((self.0 >> 32) & 0x00ff_ffff) as u32
    }

    /// The requester's epoch when the descriptor was written.
    pub(crate) fn epoch(self) -> u8 {
        (self.0 >> 24) as u8
    }

    /// The tag as a number (what a link that tracks items keeps).
    pub fn raw(self) -> u64 {
        self.0
    }

    /// A tag back from [`RingTag::raw`]. Any number is accepted: a tag that names no
    /// descriptor in flight is ignored where it is handed in.
    pub fn from_raw(raw: u64) -> RingTag {
        RingTag(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::RingTag;

    #[test]
    fn a_tag_keeps_its_qpn_psn_epoch_and_ask_through_raw() {
        let t = RingTag::new(0xab_cdef, 0xff_fff0, 201, true);
        let u = RingTag::from_raw(t.raw());
        assert_eq!(
            (u.qpn(), u.psn(), u.epoch(), u.asks()),
            (0xab_cdef, 0xff_fff0, 201, true)
        );
        // Out-of-range inputs keep their low 24 bits only.
        let v = RingTag::new(0x1ab_cdef, 0x1ff_ffff, 0, false);
        assert_eq!((v.qpn(), v.psn(), v.asks()), (0xab_cdef, 0xff_ffff, false));
    }
}
