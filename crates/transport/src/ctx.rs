//! What every part of a QP needs while it handles one input: the clock reading, the
//! caller's memory, the completion queue, counters, shared receive queues. Plus the
//! small helpers shared by requester and responder (opcode lookup, gather/scatter).

use crate::endpoint::{Config, Stats};
use crate::memory::{Access, AccessError, Key, Memory};
use crate::qp::{QpAttrs, QpState, QpType};
use crate::time::Instant;
use crate::wr::{CompletionSink, RecvWr, Sge};
use std::collections::{BTreeMap, VecDeque};
use weft_wire::roce::{Opcode, Operation, Position, Transport};

/// A shared receive queue.
#[derive(Debug)]
pub(crate) struct Srq {
    pub pd: u32,
    pub max_wr: usize,
    pub queue: VecDeque<RecvWr>,
}

/// The per-call context handed down from the endpoint.
pub(crate) struct Ctx<'a, M> {
    pub now: Instant,
    /// Another QP of the endpoint had packets to send within the last millisecond:
    /// a by-reference WRITE then keeps to [`crate::byref::WINDOW`] chunks in flight,
    /// since each chunk is a copy queued at the receiver ahead of the other QPs'
    /// packets; alone, it may use its QP's whole window.
    pub sharing: bool,
    pub mem: &'a mut M,
    pub cq: &'a mut dyn CompletionSink,
    pub stats: &'a mut Stats,
    pub srqs: &'a mut BTreeMap<u32, Srq>,
    pub config: &'a Config,
}

/// The identity and attributes of a QP, read by requester and responder.
#[derive(Debug, Clone)]
pub(crate) struct QpCommon {
    pub qpn: u32,
    pub qp_type: QpType,
    pub pd: u32,
    pub state: QpState,
    /// Read through [`QpCommon::attrs`], changed only through [`QpCommon::set_attrs`],
    /// which keeps `unasked_ok` with it (private, so that no write can leave that stale).
    attrs: QpAttrs,
    pub srq: Option<u32>,
    /// Large WRITEs may go by reference ([`crate::byref`]).
    pub by_reference: bool,
    /// The QP takes shm ring-mode descriptors ([`crate::Endpoint::set_ring_mode`]):
    /// both ends agreed to it for one shm connection.
    pub ring_mode: bool,
    /// The attributes let the last packet of a message nobody waits for leave AckReq
    /// clear ([`unasked_ok`]; the requester's `may_leave_unasked` adds the WQE's and
    /// the queue's part). Kept with `attrs`: worked out on every request packet it was
    /// a call and a WQE lookup each time (~46 instructions of a latency-bound post,
    /// callgrind, `msg_rate … lat`). Read through [`QpCommon::unasked_ok`].
    unasked_ok: bool,
}

/// Whether QP attributes `a` let a message nobody waits for leave AckReq clear on its
/// last packet: the peer's responder is known to acknowledge unasked packets, and its
/// bound on doing so ([`QpAttrs::peer_ack_delay_us`], its
/// [`Config::ack_delay_us`](crate::Config::ack_delay_us)) comes well within the local
/// ACK timeout ([`crate::ACK_DELAY_MARGIN`]), so it is never taken for a loss.
pub(crate) fn unasked_ok(a: &QpAttrs) -> bool {
    let delay = u64::from(a.peer_ack_delay_us);
    delay > 0
        && crate::time::local_ack_timeout_micros(a.timeout)
            .is_none_or(|t| t >= delay.saturating_mul(crate::ACK_DELAY_MARGIN))
}

impl QpCommon {
    /// A QP's identity with attributes `attrs` (and what is kept of them).
    pub fn new(
        qpn: u32,
        qp_type: QpType,
        pd: u32,
        state: QpState,
        attrs: QpAttrs,
        srq: Option<u32>,
        by_reference: bool,
    ) -> QpCommon {
        QpCommon {
            qpn,
            qp_type,
            pd,
            state,
            attrs,
            srq,
            by_reference,
            ring_mode: false,
            unasked_ok: unasked_ok(&attrs),
        }
    }

    /// The attributes (`ibv_query_qp`).
    #[inline]
    pub fn attrs(&self) -> &QpAttrs {
        &self.attrs
    }

    /// Whether the attributes let a message nobody waits for leave AckReq clear.
    #[inline]
    pub fn unasked_ok(&self) -> bool {
        self.unasked_ok
    }

    /// Replace the attributes (`ibv_modify_qp`), and what is kept of them.
    pub fn set_attrs(&mut self, attrs: QpAttrs) {
        self.attrs = attrs;
        self.unasked_ok = unasked_ok(&attrs);
    }

    pub fn mtu(&self) -> u64 {
        u64::from(self.attrs.path_mtu.bytes())
    }
}

/// Packets a message of `len` bytes takes at `mtu` (a zero-length message takes one).
pub(crate) fn packets_for(len: u64, mtu: u64) -> u64 {
    len.div_ceil(mtu).max(1)
}

/// Payload bytes of packet `index` of a `len`-byte message.
pub(crate) fn packet_len(len: u64, mtu: u64, index: u64) -> u64 {
    len.saturating_sub(index * mtu).min(mtu)
}

/// Where packet `index` of `count` stands in its message.
pub(crate) fn position(index: u64, count: u64) -> Position {
    match (index == 0, index + 1 >= count) {
        (true, true) => Position::Only,
        (true, false) => Position::First,
        (false, true) => Position::Last,
        (false, false) => Position::Middle,
    }
}

/// The opcode for (transport, operation, position, immediate) — weft-wire's inverse
/// of its one opcode table (`Opcode::lookup`), never spelled out here. `None` if the
/// table has no such opcode (UC READ, say).
pub(crate) fn opcode_for(
    transport: Transport,
    operation: Operation,
    pos: Position,
    imm: bool,
) -> Option<Opcode> {
    Opcode::lookup(transport, operation, pos, imm, false)
}

/// Copy `out.len()` bytes starting `offset` bytes into the SGE list.
pub(crate) fn gather<M: Memory>(
    mem: &M,
    pd: u32,
    sges: &[Sge],
    mut offset: u64,
    out: &mut [u8],
) -> Result<(), AccessError> {
    let mut done = 0usize;
    for s in sges {
        if done == out.len() {
            break;
        }
        let l = u64::from(s.len);
        if offset >= l {
            offset -= l;
            continue;
        }
        let take = ((l - offset) as usize).min(out.len() - done);
        let addr = s.addr.checked_add(offset).ok_or(AccessError::OutOfBounds)?;
        mem.read(
            Key::Local(s.lkey),
            pd,
            addr,
            &mut out[done..done + take],
            Access::NONE,
        )?;
        done += take;
        offset = 0;
    }
    if done < out.len() {
        return Err(AccessError::OutOfBounds);
    }
    Ok(())
}

/// Copy `data` into the SGE list starting `offset` bytes in (needs LOCAL_WRITE).
pub(crate) fn scatter<M: Memory>(
    mem: &mut M,
    pd: u32,
    sges: &[Sge],
    mut offset: u64,
    data: &[u8],
) -> Result<(), AccessError> {
    // The usual case, a payload that fits one entry (every small SEND's receive), is
    // one write: the loop below does the same for it, and its set-up and the state it
    // keeps across the copy's call were ~30 instructions of every packet placed
    // (callgrind, `msg_rate`).
    if let [s] = sges {
        if !data.is_empty()
            && offset < u64::from(s.len)
            && data.len() as u64 <= u64::from(s.len) - offset
        {
            let addr = s.addr.checked_add(offset).ok_or(AccessError::OutOfBounds)?;
            return mem.write(Key::Local(s.lkey), pd, addr, data, Access::LOCAL_WRITE);
        }
    }
    let mut done = 0usize;
    for s in sges {
        if done == data.len() {
            break;
        }
        let l = u64::from(s.len);
        if offset >= l {
            offset -= l;
            continue;
        }
        let take = ((l - offset) as usize).min(data.len() - done);
        let addr = s.addr.checked_add(offset).ok_or(AccessError::OutOfBounds)?;
        mem.write(
            Key::Local(s.lkey),
            pd,
            addr,
            &data[done..done + take],
            Access::LOCAL_WRITE,
        )?;
        done += take;
        offset = 0;
    }
    if done < data.len() {
        return Err(AccessError::OutOfBounds);
    }
    Ok(())
}

/// Check every SGE of a list (key, pd, bounds, `need`).
pub(crate) fn check_sges<M: Memory>(
    mem: &M,
    pd: u32,
    sges: &[Sge],
    need: Access,
) -> Result<(), AccessError> {
    sges.iter()
        .filter(|s| s.len > 0)
        .try_for_each(|s| mem.check(Key::Local(s.lkey), pd, s.addr, u64::from(s.len), need))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_lookup_uses_the_wire_table() {
        assert_eq!(
            opcode_for(Transport::Rc, Operation::Write, Position::Only, true),
            Some(Opcode::RC_WRITE_ONLY_IMM)
        );
        assert_eq!(
            opcode_for(Transport::Uc, Operation::Send, Position::Last, false),
            Some(Opcode::UC_SEND_LAST)
        );
        assert_eq!(
            opcode_for(
                Transport::Rc,
                Operation::ReadResponse,
                Position::Middle,
                false
            ),
            Some(Opcode::RC_READ_RESPONSE_MIDDLE)
        );
        assert_eq!(
            opcode_for(Transport::Uc, Operation::ReadRequest, Position::Only, false),
            None
        );
    }

    #[test]
    fn segmentation_arithmetic() {
        assert_eq!(packets_for(0, 256), 1);
        assert_eq!(packets_for(256, 256), 1);
        assert_eq!(packets_for(257, 256), 2);
        assert_eq!(packet_len(257, 256, 1), 1);
        assert_eq!(packet_len(0, 256, 0), 0);
        assert_eq!(position(0, 1), Position::Only);
        assert_eq!(position(2, 3), Position::Last);
    }
}
