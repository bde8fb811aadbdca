//! The completion queue's ring: what the engine writes and `poll_cq` reads.
//!
//! A [`Completion`] is 80 bytes, half of it the UD source path that only UD receives
//! carry. The ring holds a 32-byte [`CqEntry`] instead, two to a cache line, and the
//! paths travel in a second ring that only UD receives fill. The ring also keeps at
//! most [`RING_SLOTS_MAX`] slots however deep the queue: the engine's overflow list
//! holds what does not fit (as it always did for a full ring), so a queue sized for
//! thousands of QPs cycles through a few warm cache lines instead of megabytes of
//! cold ones. callgrind at 4096 QPs × 16 in flight counted 2.5 cache misses per
//! message in the 80-byte, 131 072-slot ring (docs/results/verbs.md, "QP scaling").

use weft_link::spsc::{self, Consumer, Producer};
use weft_transport::{Completion, WcOpcode, WcStatus};
use weft_wire::roce::IcrcPath;

/// The most slots a completion queue's ring takes (32 KiB of entries). Completions
/// beyond it wait in the engine's overflow list until `poll_cq` makes room; a queue's
/// depth bounds nothing else in weft.
pub(crate) const RING_SLOTS_MAX: usize = 1024;

const HAS_IMM: u8 = 1;
const HAS_SRC_QP: u8 = 2;
const FROM_SRQ: u8 = 4;
const HAS_PATH: u8 = 8;

/// A completion as the ring holds it: every field of [`Completion`] but the path,
/// with the options as flags.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CqEntry {
    wr_id: u64,
    qpn: u32,
    byte_len: u32,
    imm: u32,
    src_qp: u32,
    status: WcStatus,
    opcode: WcOpcode,
    flags: u8,
}

impl CqEntry {
    fn pack(c: &Completion) -> CqEntry {
        let mut flags = 0;
        if c.imm.is_some() {
            flags |= HAS_IMM;
        }
        if c.src_qp.is_some() {
            flags |= HAS_SRC_QP;
        }
        if c.from_srq {
            flags |= FROM_SRQ;
        }
        if c.src_path.is_some() {
            flags |= HAS_PATH;
        }
        CqEntry {
            wr_id: c.wr_id,
            qpn: c.qpn,
            byte_len: c.byte_len,
            imm: c.imm.unwrap_or(0),
            src_qp: c.src_qp.unwrap_or(0),
            status: c.status,
            opcode: c.opcode,
            flags,
        }
    }

    fn unpack(self, src_path: Option<IcrcPath>) -> Completion {
        Completion {
            wr_id: self.wr_id,
            status: self.status,
            opcode: self.opcode,
            qpn: self.qpn,
            byte_len: self.byte_len,
            imm: (self.flags & HAS_IMM != 0).then_some(self.imm),
            src_qp: (self.flags & HAS_SRC_QP != 0).then_some(self.src_qp),
            src_path,
            from_srq: self.flags & FROM_SRQ != 0,
        }
    }
}

/// A completion queue's ring for `depth` completions: at most [`RING_SLOTS_MAX`] slots.
pub(crate) fn ring(depth: usize) -> (CqProducer, CqConsumer) {
    let slots = depth.clamp(2, RING_SLOTS_MAX);
    let (entries_tx, entries_rx) = spsc::ring(slots);
    // Never touched (so never resident) unless UD receives complete here.
    let (paths_tx, paths_rx) = spsc::ring(slots);
    (
        CqProducer {
            entries: entries_tx,
            paths: paths_tx,
        },
        CqConsumer {
            entries: entries_rx,
            paths: paths_rx,
        },
    )
}

/// The engine's end.
#[derive(Debug)]
pub(crate) struct CqProducer {
    entries: Producer<CqEntry>,
    paths: Producer<IcrcPath>,
}

impl CqProducer {
    /// Write `c`, unpublished until [`CqProducer::doorbell`]; gives it back when the
    /// ring is full.
    pub(crate) fn push(&mut self, c: Completion) -> Result<(), Completion> {
        let e = CqEntry::pack(&c);
        if let Some(path) = c.src_path {
            // The path goes first, and only when its entry will fit too: the
            // consumer takes a path for each entry that says it has one, in order.
            if self.entries.free_slots() == 0 || self.paths.push(path).is_err() {
                return Err(c);
            }
        }
        self.entries.push(e).map_err(|_| c)
    }

    /// True when the consumer has taken every entry written so far (published or not).
    #[inline]
    pub(crate) fn is_drained(&mut self) -> bool {
        self.entries.is_drained()
    }

    /// Publish what was written (paths first, so an entry never arrives before its
    /// path).
    pub(crate) fn doorbell(&mut self) {
        self.paths.doorbell();
        self.entries.doorbell();
    }
}

/// `poll_cq`'s end.
#[derive(Debug)]
pub(crate) struct CqConsumer {
    entries: Consumer<CqEntry>,
    paths: Consumer<IcrcPath>,
}

impl CqConsumer {
    /// Append up to `max` completions to `out`, in order; returns how many. An empty
    /// ring is answered inline (the producer's tail read where the caller is): most
    /// polls of a ping-pong find it empty (their completions come through the pass,
    /// straight into `out`), and the call with its burst set-up was ~30 instructions
    /// each, four a round (callgrind, `msg_rate … lat`).
    #[inline]
    pub(crate) fn pop_burst(&mut self, out: &mut Vec<Completion>, max: usize) -> usize {
        if self.entries.is_empty() {
            return 0;
        }
        self.pop_some(out, max)
    }

    /// [`CqConsumer::pop_burst`] past its look at an empty ring.
    #[inline(never)]
    fn pop_some(&mut self, out: &mut Vec<Completion>, max: usize) -> usize {
        let paths = &mut self.paths;
        self.entries.pop_burst_with(max, |e| {
            // Published before its entry (see `CqProducer::doorbell`), so present.
            let path = if e.flags & HAS_PATH != 0 {
                paths.pop()
            } else {
                None
            };
            out.push(e.unpack(path));
        })
    }

    /// True when no published completion waits (reads the producer's tail).
    #[inline]
    pub(crate) fn is_empty(&mut self) -> bool {
        self.entries.is_empty()
    }

    /// One completion, if any.
    #[cfg(test)]
    pub(crate) fn pop(&mut self) -> Option<Completion> {
        let mut v = Vec::new();
        self.pop_burst(&mut v, 1);
        v.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn all_fields(i: u32) -> Completion {
        Completion {
            wr_id: u64::from(i) << 33 | 5,
            status: if i % 3 == 0 {
                WcStatus::Success
            } else {
                WcStatus::RemAccessErr
            },
            opcode: if i % 2 == 0 {
                WcOpcode::Recv
            } else {
                WcOpcode::Send
            },
            qpn: 0xff_fff0 + i,
            byte_len: i * 7,
            imm: (i % 2 == 0).then_some(u32::MAX - i),
            src_qp: (i % 4 == 0).then_some(0),
            src_path: (i % 4 == 0).then(|| {
                IcrcPath::v4(
                    Ipv4Addr::new(198, 18, 0, 1),
                    Ipv4Addr::new(198, 18, 0, 2),
                    1000 + i as u16,
                )
            }),
            from_srq: i % 5 == 0,
        }
    }

    #[test]
    fn an_entry_is_32_bytes() {
        assert_eq!(size_of::<CqEntry>(), 32);
    }

    #[test]
    fn every_field_survives_the_ring_in_order_with_and_without_paths() {
        let (mut tx, mut rx) = ring(8);
        let mut want = Vec::new();
        let mut got = Vec::new();
        for i in 0..100 {
            let c = all_fields(i);
            tx.push(c).unwrap();
            want.push(c);
            tx.doorbell();
            if i % 3 == 2 {
                rx.pop_burst(&mut got, 8);
            }
        }
        while rx.pop_burst(&mut got, 3) > 0 {}
        assert_eq!(got, want);
    }

    #[test]
    fn a_full_ring_gives_the_completion_back_whole_and_loses_no_path() {
        let (mut tx, mut rx) = ring(4);
        for i in 0..4 {
            tx.push(all_fields(i * 4)).unwrap();
        }
        let c = all_fields(16);
        assert_eq!(tx.push(c), Err(c));
        tx.doorbell();
        let mut got = Vec::new();
        rx.pop_burst(&mut got, 1);
        tx.push(c).unwrap();
        tx.doorbell();
        rx.pop_burst(&mut got, 8);
        let want: Vec<_> = [0, 4, 8, 12, 16].iter().map(|&i| all_fields(i)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_deep_queue_keeps_a_small_ring() {
        let (tx, _rx) = ring(1 << 20);
        assert_eq!(tx.entries.capacity(), RING_SLOTS_MAX);
    }
}
