//! The shm segment's mapping with the atomic words of its rings checked once, when it
//! is mapped, instead of on every access.
//!
//! The rings touch their control words (`tail`, `head`, `sleeping`; the ringer's CPU
//! and stamp around a blocking wait) and a slot's length word several times per burst;
//! a bounds check and an `Option` per touch were about 150 instructions of a ping-pong
//! round and 17 of a streamed SEND (callgrind, docs/results/verbs.md, "Passes per round
//! and the shm ring's words").
//! Here [`Segment::new`] checks once that both rings' control blocks and slot arrays,
//! and the segment header, lie inside the mapping, 4-aligned. The accessors then
//! compute offsets that stay inside what was checked by construction: a control word
//! is one of five fixed offsets into its block, a slot index is masked to the ring's
//! slot count, a header word index is masked to the header's first 32 bytes. Nothing a
//! peer writes into the segment feeds an offset here.

use crate::sys::Mmap;
use std::sync::atomic::AtomicU32;

/// A control word of a ring: its byte offset in the ring's control block. `Tail`, `Head`
/// and `Sleeping` each sit on a 128-byte line of their own (see `ring.rs`); the ring
/// words share `Sleeping`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ctrl {
    /// The producer's publish index.
    Tail = 0,
    /// The consumer's release index.
    Head = 128,
    /// The consumer is about to block.
    Sleeping = 256,
    /// The CPU the producer ran on when it last rang a sleeping consumer, plus one
    /// (0: not rung since the consumer last looked). Beside `sleeping`: both are
    /// touched only around a blocking wait.
    RingCpu = 260,
}

/// Bytes of a ring's control block that [`Ctrl`] reaches into.
const CTRL_SPAN: usize = Ctrl::RingCpu as usize + 4;
/// Bytes of the segment header that [`Segment::header_word`] reaches into.
const HEADER_SPAN: usize = 32;

/// Where one ring lies in the segment (byte offsets from the mapping's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RingGeometry {
    /// The ring's control block.
    pub ctrl: usize,
    /// Its first slot.
    pub slots: usize,
    /// Slots (a power of two).
    pub count: u32,
    /// Bytes from one slot to the next (a multiple of 4, at least 4: a slot starts
    /// with its length word).
    pub stride: usize,
}

/// A shared mapping whose ring words were checked once (see the module doc).
#[derive(Debug)]
pub(crate) struct Segment {
    map: Mmap,
    rings: [RingGeometry; 2],
}

impl Segment {
    /// The mapping, if both rings' control blocks and slot arrays and the header lie
    /// inside it and every word is 4-aligned; `None` otherwise (a bug in the caller's
    /// layout arithmetic, never peer input).
    pub fn new(map: Mmap, rings: [RingGeometry; 2]) -> Option<Segment> {
        let len = map.len();
        let fits = |off: usize, span: usize| off.checked_add(span).is_some_and(|e| e <= len);
        let ok = map.addr() % 4 == 0
            && len >= HEADER_SPAN
            && rings.iter().all(|g| {
                g.ctrl % 4 == 0
                    && fits(g.ctrl, CTRL_SPAN)
                    && g.slots % 4 == 0
                    && g.count.is_power_of_two()
                    && g.stride >= 4
                    && g.stride % 4 == 0
                    && (g.count as usize)
                        .checked_mul(g.stride)
                        .is_some_and(|n| fits(g.slots, n))
            });
        ok.then_some(Segment { map, rings })
    }

    /// The mapping (for the checked raw copies of slot bytes).
    pub fn map(&self) -> &Mmap {
        &self.map
    }

    /// The word at `off` of the mapping.
    ///
    /// # Safety
    /// `off` is a multiple of 4 and `off + 4` is at most the mapping's length.
    unsafe fn word(&self, off: usize) -> &AtomicU32 {
        // SAFETY: in bounds and 4-aligned (the caller's promise; the mapping's start
        // is 4-aligned, checked in `new`), valid while `self` lives (it owns the
        // mapping); `AtomicU32` has `u32`'s layout, and every access to the word, by
        // us and by the peer, is atomic.
        unsafe { &*self.map.as_ptr().add(off).cast::<AtomicU32>() }
    }

    /// Control word `w` of ring `ring` (0 or 1; other values are taken modulo 2).
    #[inline]
    pub fn ctrl(&self, ring: usize, w: Ctrl) -> &AtomicU32 {
        let off = self.rings[ring & 1].ctrl + w as usize;
        // SAFETY: `new` checked that the block's first `CTRL_SPAN` bytes lie in the
        // mapping and that the block is 4-aligned; `w` is at most `CTRL_SPAN - 4` and
        // a multiple of 4.
        unsafe { self.word(off) }
    }

    /// The length word of the slot of ring `ring` that index `index` falls on (the
    /// index is free-running: masked to the ring's slot count here).
    #[inline]
    pub fn slot_len(&self, ring: usize, index: u32) -> &AtomicU32 {
        let g = &self.rings[ring & 1];
        let off = g.slots + (index & (g.count - 1)) as usize * g.stride;
        // SAFETY: the masked index is below `count`, and `new` checked that `count`
        // slots of `stride` bytes from `slots` lie in the mapping, with `slots` and
        // `stride` multiples of 4 and `stride` at least 4: the word is inside.
        unsafe { self.word(off) }
    }

    /// Word `i` (taken modulo 8) of the segment header: its first 32 bytes.
    #[inline]
    pub fn header_word(&self, i: usize) -> &AtomicU32 {
        // SAFETY: `(i & 7) * 4 + 4 <= HEADER_SPAN`, which `new` checked against the
        // mapping's length; 4-aligned.
        unsafe { self.word((i & 7) * 4) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry(ctrl: usize, slots: usize, count: u32, stride: usize) -> RingGeometry {
        RingGeometry {
            ctrl,
            slots,
            count,
            stride,
        }
    }

    #[test]
    fn a_ring_outside_the_mapping_or_misaligned_is_refused() {
        let map = || Mmap::anonymous(4096, "test").unwrap();
        let good = geometry(128, 512, 4, 64);
        assert!(Segment::new(map(), [good, geometry(1024, 1408, 8, 64)]).is_some());
        // The second ring's slots end one stride past the mapping.
        assert!(Segment::new(map(), [good, geometry(1024, 1408, 64, 64)]).is_none());
        // A control block that ends past the mapping.
        assert!(Segment::new(map(), [good, geometry(4096 - 128, 512, 4, 64)]).is_none());
        // Misaligned offsets or strides, a count that is no power of two.
        assert!(Segment::new(map(), [good, geometry(130, 512, 4, 64)]).is_none());
        assert!(Segment::new(map(), [good, geometry(128, 514, 4, 64)]).is_none());
        assert!(Segment::new(map(), [good, geometry(128, 512, 4, 66)]).is_none());
        assert!(Segment::new(map(), [good, geometry(128, 512, 3, 64)]).is_none());
        // A slot count whose span overflows.
        assert!(Segment::new(map(), [good, geometry(128, 512, 1 << 31, usize::MAX / 4)]).is_none());
    }

    #[test]
    fn words_land_where_the_layout_puts_them() {
        let s = Segment::new(
            Mmap::anonymous(4096, "test").unwrap(),
            [geometry(128, 512, 4, 64), geometry(1024, 1408, 8, 64)],
        )
        .unwrap();
        let at = |w: &AtomicU32| w as *const AtomicU32 as usize - s.map().addr();
        assert_eq!(at(s.ctrl(1, Ctrl::Head)), 1024 + 128);
        assert_eq!(at(s.ctrl(0, Ctrl::Sleeping)), 128 + 256);
        assert_eq!(at(s.ctrl(1, Ctrl::RingCpu)), 1024 + 260);
        // Free-running indices wrap onto the ring's slots.
        assert_eq!(at(s.slot_len(1, 8 + 3)), 1408 + 3 * 64);
        assert_eq!(at(s.slot_len(0, u32::MAX)), 512 + 3 * 64);
        assert_eq!(at(s.header_word(6)), 24);
        assert_eq!(at(s.header_word(9)), 4);
    }
}
