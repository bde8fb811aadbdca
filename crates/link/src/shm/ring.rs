//! The shared segment of one shm connection and the two SPSC rings inside it.
//!
//! Layout (all offsets computed locally from [`Layout`], never read from the segment):
//!
//! ```text
//! 0                 segment header: magic, slots, slot_data (written by the creator);
//!   +16, +20          "pulls" flags of ring 0 and ring 1: set by that ring's consumer
//!                     once it proved it can read the producer's memory by
//!                     cross-memory attach (see `endpoint.rs`, "One copy")
//!   +24, +28          control counters of ring 0 and ring 1: bumped by that ring's
//!                     producer after it sent an offer or revocation of a shared
//!                     region (see `endpoint.rs`, "Shared regions")
//! HEADER            ring 0 (connector -> acceptor)
//!   +0                tail      producer's publish index   (own 128-byte line)
//!   +128              head      consumer's release index   (own 128-byte line)
//!   +256              sleeping  consumer is about to block (own 128-byte line,
//!                     shared with the word below: both only around a blocking wait)
//!   +260              ring_cpu  the CPU the producer last rang a sleeping consumer
//!                     from, plus one (0: not since the consumer looked)
//!   +RING_CTRL        slots: [len u32][reserved u32][data: slot_data bytes], stride
//!                     rounded up to 64 bytes
//! HEADER+ring_len   ring 1 (acceptor -> connector), same shape
//! ```
//!
//! `tail` and `head` are free-running `u32` indices (slot = index & (slots-1)). Each
//! side keeps its own index privately and only *writes* it to the segment; what it
//! *reads* is the other side's index, validated before use, because the other side
//! may be hostile or dead half-way through a write. Slot bytes are only ever touched
//! through raw pointer copies (never a Rust reference into the segment), after their
//! length was read once and checked against the slot size.
//!
//! The indices are `AtomicU32`s placed in the mapping. They are lock-free and
//! address-free (plain loads, stores and fences on every target Rust supports), which
//! is what makes the same atomics work between two processes mapping the same page.
//!
//! The three indices sit on separate 128-byte lines (two 64-byte lines, so the
//! adjacent-line prefetcher does not pull the other side's index in with ours): the
//! producer writes `tail` once per burst, the consumer writes `head` once per burst,
//! and `sleeping` is written only around a blocking wait, so while both sides are busy
//! the producer's per-burst read of it hits a line that stays shared in its cache.

use super::words::{Ctrl, RingGeometry, Segment};
use crate::sys::{self, Mmap};
use crate::PacketBuf;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicU32, Ordering};

/// "weftshm" and a layout version.
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"weftshm\x01");
const HEADER: usize = 128;
/// The "consumer pulls" flag of ring 0 and of ring 1, in the segment header.
const PULLS: [usize; 2] = [16, 20];
/// The control counter of ring 0 and of ring 1, in the segment header.
const REVOKES: [usize; 2] = [24, 28];
#[cfg(test)]
const TAIL: usize = Ctrl::Tail as usize;
#[cfg(test)]
const HEAD: usize = Ctrl::Head as usize;
const RING_CTRL: usize = 384;
/// Length and a reserved word in front of every slot's bytes.
const SLOT_HDR: usize = 8;
/// Most slots per ring and most bytes per slot a peer may propose.
pub(crate) const MAX_SLOTS: u32 = 1 << 16;
pub(crate) const MAX_SLOT_DATA: u32 = 1 << 20;
/// Largest segment a peer may make us map.
const MAX_SEGMENT: usize = 1 << 30;

/// The geometry of a segment, from the two numbers the handshake carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Slots per ring (a power of two).
    pub slots: u32,
    /// Bytes of data one slot holds.
    pub slot_data: u32,
}

impl Layout {
    /// A layout if the numbers are sane (power-of-two slot count, bounded sizes).
    pub fn new(slots: u32, slot_data: u32) -> Option<Layout> {
        let l = Layout { slots, slot_data };
        let ok = slots.is_power_of_two()
            && (2..=MAX_SLOTS).contains(&slots)
            && (64..=MAX_SLOT_DATA).contains(&slot_data)
            && l.total() <= MAX_SEGMENT;
        ok.then_some(l)
    }

    fn stride(&self) -> usize {
        (SLOT_HDR + self.slot_data as usize).div_ceil(64) * 64
    }

    fn ring_len(&self) -> usize {
        RING_CTRL + self.slots as usize * self.stride()
    }

    /// Where ring `r` (0 or 1) starts.
    pub fn ring_off(&self, r: usize) -> usize {
        HEADER + r * self.ring_len()
    }

    /// Bytes of the whole segment, rounded up to a page.
    pub fn total(&self) -> usize {
        (HEADER + 2 * self.ring_len()).div_ceil(4096) * 4096
    }

    fn slot_off(&self, ring: usize, index: u32) -> usize {
        ring + RING_CTRL + (index & (self.slots - 1)) as usize * self.stride()
    }

    /// Where ring `r` (0 or 1) and its slots lie, for [`Segment`]'s one check.
    fn geometry(&self, r: usize) -> RingGeometry {
        RingGeometry {
            ctrl: self.ring_off(r),
            slots: self.ring_off(r) + RING_CTRL,
            count: self.slots,
            stride: self.stride(),
        }
    }
}

/// A shared mapping of a sealed memfd, unmapped on drop. Its ring words were checked
/// against the mapping once, when it was mapped ([`Segment`]).
#[derive(Debug)]
pub(crate) struct Region {
    seg: Segment,
}

impl Region {
    /// A fresh sealed memfd of `layout.total()` bytes, mapped, with the header written.
    /// The seals (no shrink, no grow, no more seals) let the peer map it without fear
    /// of `SIGBUS` from a truncation.
    pub fn create(layout: Layout) -> io::Result<(Region, OwnedFd)> {
        let len = layout.total();
        let fd = sys::sealed_memfd(c"weft-shm", len)
            .map_err(|e| io::Error::new(e.kind(), format!("shm: {e}")))?;
        let region = Region::map_fd(&fd, layout)?;
        region.u32_at(8).store(layout.slots, Ordering::Relaxed);
        region.u32_at(12).store(layout.slot_data, Ordering::Relaxed);
        region.u32_at(0).store(MAGIC as u32, Ordering::Relaxed);
        region
            .u32_at(4)
            .store((MAGIC >> 32) as u32, Ordering::Relaxed);
        Ok((region, fd))
    }

    /// Map a segment a peer sent: it must be a memfd sealed against shrinking and at
    /// least `layout.total()` bytes, so no access within the layout can fault.
    pub fn open(fd: &OwnedFd, layout: Layout) -> io::Result<Region> {
        let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidData, format!("shm: {m}"));
        let Ok((seals, size)) = sys::seals_and_size(fd) else {
            return Err(bad("segment is not a memfd sealed against shrinking"));
        };
        if seals & libc::F_SEAL_SHRINK == 0 {
            return Err(bad("segment is not a memfd sealed against shrinking"));
        }
        if size < layout.total() as u64 {
            return Err(bad("segment smaller than its layout"));
        }
        let r = Region::map_fd(fd, layout)?;
        let magic = u64::from(r.u32_at(0).load(Ordering::Relaxed))
            | u64::from(r.u32_at(4).load(Ordering::Relaxed)) << 32;
        if magic != MAGIC {
            return Err(bad("segment magic"));
        }
        Ok(r)
    }

    fn map_fd(fd: &OwnedFd, layout: Layout) -> io::Result<Region> {
        let map = Mmap::shared(
            fd.as_raw_fd(),
            layout.total(),
            0,
            libc::MAP_POPULATE,
            "shm: mmap",
        )?;
        let seg = Segment::new(map, [layout.geometry(0), layout.geometry(1)])
            .ok_or_else(|| io::Error::other("shm: layout outside its mapping"))?;
        Ok(Region { seg })
    }

    /// Where the segment is mapped in this process (what a peer that reads our memory
    /// by cross-memory attach compares against its own mapping).
    pub fn addr(&self) -> u64 {
        self.seg.map().addr() as u64
    }

    /// The first 16 bytes of the segment (magic and geometry): what a cross-memory
    /// probe of the peer's mapping must find.
    pub fn header(&self) -> [u8; 16] {
        let mut h = [0u8; 16];
        self.read(0, &mut h);
        h
    }

    /// Say (as the consumer of ring `ring`) that we can pull the producer's memory.
    pub fn set_pulls(&self, ring: usize) {
        self.u32_at(PULLS[ring & 1]).store(1, Ordering::Release);
    }

    /// Whether the consumer of ring `ring` said it can pull our memory. Any nonzero
    /// value counts: a peer that lies only makes us send by reference, which it then
    /// fails to read (its own loss; see `endpoint.rs`).
    pub fn pulls(&self, ring: usize) -> bool {
        self.u32_at(PULLS[ring & 1]).load(Ordering::Acquire) != 0
    }

    /// Say (as the producer of ring `ring`) that a region offer or revocation was sent
    /// on the control socket: items published after this are to be read after it.
    pub fn bump_revokes(&self, ring: usize) {
        self.u32_at(REVOKES[ring & 1])
            .fetch_add(1, Ordering::Release);
    }

    /// The control counter of ring `ring` (read by its consumer after the ring's
    /// tail, so it covers every item that tail published). A hostile producer can
    /// only make us read our control socket more often.
    pub fn revokes(&self, ring: usize) -> u32 {
        self.u32_at(REVOKES[ring & 1]).load(Ordering::Acquire)
    }

    /// The header word at byte `off` (below 32, a multiple of 4: the constants above).
    fn u32_at(&self, off: usize) -> &AtomicU32 {
        debug_assert!(off < 32 && off % 4 == 0, "shm header offset {off}");
        self.seg.header_word(off / 4)
    }

    /// Control word `w` of ring `ring`.
    #[inline]
    fn ctrl(&self, ring: usize, w: Ctrl) -> &AtomicU32 {
        self.seg.ctrl(ring, w)
    }

    /// The length word of the slot that index `index` of ring `ring` falls on.
    #[inline]
    fn slot_len(&self, ring: usize, index: u32) -> &AtomicU32 {
        self.seg.slot_len(ring, index)
    }

    /// Copy `src` into the segment at `off` (a raw copy: the peer may read it
    /// concurrently). Panics out of range, which only a bug here can produce.
    fn write(&self, off: usize, src: &[u8]) {
        assert!(self.seg.map().copy_in(off, src), "shm write out of range");
    }

    /// Copy from the segment at `off` into `dst` (a raw copy: a hostile peer writing
    /// concurrently can only change which bytes we copy, never where).
    fn read(&self, off: usize, dst: &mut [u8]) {
        assert!(self.seg.map().copy_out(off, dst), "shm read out of range");
    }

    /// Raw write access for tests that play a hostile peer.
    #[cfg(test)]
    pub fn poke_u32(&self, off: usize, v: u32) {
        self.seg
            .map()
            .atomic_u32(off)
            .expect("test offset")
            .store(v, Ordering::Release);
    }
}

/// Why a ring cannot be used any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Corrupt;

/// The producing end of one ring, private state on our side.
#[derive(Debug)]
pub(crate) struct TxRing {
    layout: Layout,
    /// Which of the segment's two rings (0 or 1).
    ring: usize,
    base: usize,
    /// Next index to write (ours alone).
    next: u32,
    /// Last index published to `tail`.
    published: u32,
    /// The consumer's `head` as last read (validated).
    head_cache: u32,
}

/// What became of a push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Push {
    Written,
    Full,
    TooBig,
}

impl TxRing {
    pub fn new(layout: Layout, ring: usize) -> TxRing {
        TxRing {
            layout,
            ring,
            base: layout.ring_off(ring),
            next: 0,
            published: 0,
            head_cache: 0,
        }
    }

    /// Largest item a slot holds.
    pub fn slot_data(&self) -> usize {
        self.layout.slot_data as usize
    }

    /// Write `bytes` into the next slot (unpublished until [`TxRing::publish`]).
    /// Inlined into the send loop: a call per packet was ~17 instructions of a
    /// streamed message and ~50 of a ping-pong round (callgrind, `msg_rate`).
    #[inline]
    pub fn push(&mut self, r: &Region, bytes: &[u8]) -> Result<Push, Corrupt> {
        if bytes.len() > self.slot_data() {
            return Ok(Push::TooBig);
        }
        if self.next.wrapping_sub(self.head_cache) >= self.layout.slots {
            // Acquire: the consumer's reads of the slots it released happened before.
            let head = self.consumer_head(r)?;
            if self.next.wrapping_sub(head) >= self.layout.slots {
                return Ok(Push::Full);
            }
        }
        let slot = self.layout.slot_off(self.base, self.next);
        r.slot_len(self.ring, self.next)
            .store(bytes.len() as u32, Ordering::Relaxed);
        r.write(slot + SLOT_HDR, bytes);
        self.next = self.next.wrapping_add(1);
        Ok(Push::Written)
    }

    /// Publish every written slot with one Release store. Returns true when the
    /// consumer said it may be blocked and must be woken through its eventfd.
    pub fn publish(&mut self, r: &Region) -> bool {
        if self.next == self.published {
            return false;
        }
        r.ctrl(self.ring, Ctrl::Tail)
            .store(self.next, Ordering::Release);
        self.published = self.next;
        // Store-load ordering between our `tail` store and our `sleeping` load (the
        // mirror of the consumer's `sleeping` store, fence, `tail` load in
        // `RxRing::prepare_sleep`). With a SeqCst fence on both sides at least one of
        // the two loads sees the other side's store: either we see `sleeping` and
        // notify, or the consumer sees the new `tail` and does not block. Without the
        // fences both loads could read stale values (the store-buffer litmus test) and
        // the consumer would sleep on a non-empty ring.
        fence(Ordering::SeqCst);
        r.ctrl(self.ring, Ctrl::Sleeping).load(Ordering::Relaxed) != 0
    }

    /// Before waking the consumer that [`TxRing::publish`] found asleep: say which
    /// CPU rings, so the consumer can tell whether it was woken on the CPU of the
    /// thread that woke it ([`RxRing::take_ring`]).
    pub fn note_ring(&self, r: &Region, cpu: u32) {
        r.ctrl(self.ring, Ctrl::RingCpu)
            .store(cpu.wrapping_add(1), Ordering::Release);
    }

    /// The index after the last item written: a tracked send's mark, released when
    /// [`TxRing::consumer_head`] reaches it.
    #[inline]
    pub fn next_index(&self) -> u32 {
        self.next
    }

    /// The consumer's release index, read once (Acquire: the consumer's reads of the
    /// slots it released, and everything its process published before the store,
    /// happened before), and checked. The consumer only ever moves it forward, up to
    /// what we wrote: a value behind the last one seen here, or ahead of `next`, is a
    /// lie, and the peer is broken. `head_cache` only ever holds such checked values
    /// and `push` writes no further than a ring past it, so a value that passes lies
    /// within a ring of `next` too.
    #[inline]
    pub fn consumer_head(&mut self, r: &Region) -> Result<u32, Corrupt> {
        let head = r.ctrl(self.ring, Ctrl::Head).load(Ordering::Acquire);
        if head.wrapping_sub(self.head_cache) > self.next.wrapping_sub(self.head_cache) {
            return Err(Corrupt);
        }
        self.head_cache = head;
        Ok(head)
    }

    /// The offset of the ring's `head` word (tests play a hostile consumer there).
    #[cfg(test)]
    pub fn head_offset(&self) -> usize {
        self.base + HEAD
    }

    /// The last release index accepted (tests compare it with their model).
    #[cfg(test)]
    pub fn head_seen(&self) -> u32 {
        self.head_cache
    }

    /// Published items the consumer has not taken yet (what a teardown loses).
    pub fn in_flight(&self, r: &Region) -> u32 {
        let head = r.ctrl(self.ring, Ctrl::Head).load(Ordering::Acquire);
        self.next.wrapping_sub(head).min(self.layout.slots)
    }
}

/// The consuming end of one ring, private state on our side.
#[derive(Debug)]
pub(crate) struct RxRing {
    layout: Layout,
    /// Which of the segment's two rings (0 or 1).
    ring: usize,
    base: usize,
    /// Next index to read (ours alone).
    next: u32,
    /// Last index released to `head`.
    released: u32,
}

/// What one popped slot held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pop {
    /// The item is in the buffer.
    Item,
    /// The slot's length was larger than the slot or the buffer: skipped.
    BadLength,
}

impl RxRing {
    pub fn new(layout: Layout, ring: usize) -> RxRing {
        RxRing {
            layout,
            ring,
            base: layout.ring_off(ring),
            next: 0,
            released: 0,
        }
    }

    /// Published items waiting; an impossible `tail` is corruption.
    pub fn available(&self, r: &Region) -> Result<u32, Corrupt> {
        // Acquire: pairs with the producer's Release store of `tail`, so the slot
        // bytes written before it are visible to our reads below.
        let tail = r.ctrl(self.ring, Ctrl::Tail).load(Ordering::Acquire);
        let n = tail.wrapping_sub(self.next);
        if n > self.layout.slots {
            return Err(Corrupt);
        }
        Ok(n)
    }

    /// Copy the next slot (which [`RxRing::available`] said is published) into `buf`.
    /// The slot is consumed either way; released by [`RxRing::release`].
    #[inline]
    pub fn pop_into(&mut self, r: &Region, buf: &mut PacketBuf) -> Pop {
        let slot = self.layout.slot_off(self.base, self.next);
        // Read the length once: the value we check is the value we use.
        let len = r.slot_len(self.ring, self.next).load(Ordering::Relaxed) as usize;
        self.next = self.next.wrapping_add(1);
        buf.reset();
        if len > self.layout.slot_data as usize || !buf.set_len(len) {
            return Pop::BadLength;
        }
        r.read(slot + SLOT_HDR, &mut buf[..]);
        Pop::Item
    }

    /// Give the consumed slots back to the producer (one Release store per burst).
    pub fn release(&mut self, r: &Region) {
        if self.next != self.released {
            // Release: our reads of the slots happen before the producer reuses them.
            r.ctrl(self.ring, Ctrl::Head)
                .store(self.next, Ordering::Release);
            self.released = self.next;
        }
    }

    /// Before blocking: announce it, then look again. Returns true when items are
    /// waiting (do not block; [`RxRing::wake_up`] clears the flag either way).
    pub fn prepare_sleep(&self, r: &Region) -> bool {
        r.ctrl(self.ring, Ctrl::Sleeping)
            .store(1, Ordering::Relaxed);
        // The consumer half of the Dekker pattern explained in `TxRing::publish`: our
        // `sleeping` store must be visible before we read `tail`.
        fence(Ordering::SeqCst);
        !matches!(self.available(r), Ok(0))
    }

    /// After a wait: the CPU of the producer's last ring since the previous look
    /// ([`TxRing::note_ring`]), if it rang. The peer writes the word: any value may
    /// come, and is only compared.
    pub fn take_ring(&self, r: &Region) -> Option<u32> {
        let cpu = r.ctrl(self.ring, Ctrl::RingCpu).swap(0, Ordering::Acquire);
        (cpu != 0).then(|| cpu - 1)
    }

    /// After a wait: busy again, no notifications needed.
    pub fn wake_up(&self, r: &Region) {
        r.ctrl(self.ring, Ctrl::Sleeping)
            .store(0, Ordering::Relaxed);
    }

    /// The slot offset of index `i` (tests write garbage there).
    #[cfg(test)]
    pub fn slot_offset(&self, i: u32) -> usize {
        self.layout.slot_off(self.base, i)
    }

    /// The offset of the ring's `tail` word (tests write garbage there).
    #[cfg(test)]
    pub fn tail_offset(&self) -> usize {
        self.base + TAIL
    }

    /// The offset of the ring's `RingCpu` word (tests play the ringing peer there).
    #[cfg(test)]
    pub fn ring_cpu_offset(&self) -> usize {
        self.base + Ctrl::RingCpu as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BufferPool;

    fn setup(slots: u32) -> (Region, TxRing, RxRing, BufferPool) {
        let l = Layout::new(slots, 256).unwrap();
        let (r, _fd) = Region::create(l).unwrap();
        (
            r,
            TxRing::new(l, 0),
            RxRing::new(l, 0),
            BufferPool::new(64, 512),
        )
    }

    #[test]
    fn layouts_are_validated() {
        assert!(Layout::new(3, 256).is_none());
        assert!(Layout::new(1 << 17, 256).is_none());
        assert!(Layout::new(256, 10).is_none());
        assert!(Layout::new(1 << 16, 1 << 20).is_none(), "64 GiB segment");
        let l = Layout::new(256, 4164).unwrap();
        assert_eq!(l.stride(), 4224);
        assert!(l.ring_off(1) >= l.ring_off(0) + 256 * 4224);
    }

    #[test]
    fn items_cross_after_publish_and_the_ring_fills_and_drains() {
        let (r, mut tx, mut rx, pool) = setup(4);
        for i in 0..4u8 {
            assert_eq!(tx.push(&r, &[i; 100]), Ok(Push::Written));
        }
        assert_eq!(tx.push(&r, &[9; 100]), Ok(Push::Full));
        assert_eq!(tx.push(&r, &[9; 300]), Ok(Push::TooBig));
        assert_eq!(rx.available(&r), Ok(0), "nothing before publish");
        assert!(!tx.publish(&r), "nobody sleeping");
        assert_eq!(rx.available(&r), Ok(4));
        let mut b = pool.alloc().unwrap();
        for i in 0..4u8 {
            assert_eq!(rx.pop_into(&r, &mut b), Pop::Item);
            assert_eq!(&b[..], &[i; 100][..]);
        }
        assert_eq!(tx.push(&r, &[7; 10]), Ok(Push::Full), "not released yet");
        rx.release(&r);
        assert_eq!(tx.in_flight(&r), 0);
        assert_eq!(tx.push(&r, &[7; 10]), Ok(Push::Written));
    }

    #[test]
    fn a_sleeping_consumer_is_reported_to_the_producer() {
        let (r, mut tx, rx, _) = setup(4);
        assert!(!rx.prepare_sleep(&r), "empty: may block");
        tx.push(&r, b"x").unwrap();
        assert!(tx.publish(&r), "consumer announced sleep: notify");
        assert!(rx.prepare_sleep(&r), "data now waiting: do not block");
        rx.wake_up(&r);
        tx.push(&r, b"y").unwrap();
        assert!(!tx.publish(&r));
    }

    #[test]
    fn a_ring_says_which_cpu_rang_once() {
        let (r, tx, rx, _) = setup(4);
        assert_eq!(rx.take_ring(&r), None, "never rung");
        tx.note_ring(&r, 1);
        tx.note_ring(&r, 0);
        assert_eq!(rx.take_ring(&r), Some(0), "the last ring");
        assert_eq!(rx.take_ring(&r), None, "taken");
        // The peer writes the word: any value comes back as written, without a
        // panic (CPU u32::MAX - 1 is the largest a ring can carry: 0 means none).
        tx.note_ring(&r, u32::MAX - 1);
        assert_eq!(rx.take_ring(&r), Some(u32::MAX - 1));
    }

    #[test]
    fn hostile_lengths_and_indices_are_caught() {
        let (r, mut tx, mut rx, pool) = setup(4);
        tx.push(&r, &[1; 50]).unwrap();
        tx.push(&r, &[2; 50]).unwrap();
        tx.publish(&r);
        r.poke_u32(rx.slot_offset(0), u32::MAX);
        let mut b = pool.alloc().unwrap();
        assert_eq!(rx.pop_into(&r, &mut b), Pop::BadLength);
        assert_eq!(rx.pop_into(&r, &mut b), Pop::Item);
        assert_eq!(&b[..], &[2; 50][..]);
        r.poke_u32(rx.tail_offset(), 1000);
        assert_eq!(rx.available(&r), Err(Corrupt));
        // A head beyond what was written.
        let (r, mut tx, _rx, _) = setup(4);
        for _ in 0..4 {
            tx.push(&r, b"z").unwrap();
        }
        r.poke_u32(tx.base + HEAD, 77);
        assert_eq!(tx.push(&r, b"z"), Err(Corrupt));
        // A head that moves backwards, even within a ring of what was written.
        let (r, mut tx, mut rx, pool) = setup(4);
        for _ in 0..4 {
            tx.push(&r, b"z").unwrap();
        }
        tx.publish(&r);
        let mut b = pool.alloc().unwrap();
        for _ in 0..3 {
            assert_eq!(rx.pop_into(&r, &mut b), Pop::Item);
        }
        rx.release(&r);
        assert_eq!(tx.consumer_head(&r), Ok(3));
        assert_eq!(tx.next_index(), 4);
        r.poke_u32(tx.head_offset(), 2);
        assert_eq!(tx.consumer_head(&r), Err(Corrupt), "backwards");
        assert_eq!(tx.push(&r, b"z"), Ok(Push::Written), "not full: not read");
        r.poke_u32(tx.head_offset(), 1);
        // Written up to a ring past the last head seen (3), where the push reads it.
        for _ in 0..2 {
            assert_eq!(tx.push(&r, b"z"), Ok(Push::Written));
        }
        assert_eq!(
            tx.push(&r, b"z"),
            Err(Corrupt),
            "backwards, seen by a full push"
        );
        r.poke_u32(tx.head_offset(), 5);
        assert_eq!(tx.consumer_head(&r), Ok(5), "up to what was written");
    }

    proptest::proptest! {
        /// Whatever the peer writes as its release index between pushes, the
        /// producer accepts exactly the values between the last one it accepted and
        /// what it wrote (a consumer's only honest moves; modelled in unwrapped
        /// indices), never another, and no push writes over a slot the last accepted
        /// index has not given back.
        #[test]
        fn only_an_honest_release_index_is_accepted(
            steps in proptest::collection::vec((0u32..6, proptest::num::u32::ANY), 1..60)
        ) {
            let (r, mut tx, _rx, _) = setup(4);
            // The model: what was written and what was accepted, never wrapping.
            let (mut next, mut seen) = (0u64, 0u64);
            for (pushes, head) in steps {
                for _ in 0..pushes {
                    match tx.push(&r, b"p") {
                        Ok(Push::Written) => {
                            seen += u64::from(tx.head_seen().wrapping_sub(seen as u32));
                            proptest::prop_assert!(next - seen < 4, "wrote over a slot");
                            next += 1;
                        }
                        Ok(Push::Full) => {
                            seen += u64::from(tx.head_seen().wrapping_sub(seen as u32));
                            proptest::prop_assert_eq!(next - seen, 4);
                        }
                        other => proptest::prop_assert!(false, "{:?}", other),
                    }
                    proptest::prop_assert_eq!(u64::from(tx.next_index()), next);
                }
                // Half the time an honest value, a quarter near the honest ones
                // (behind, ahead), a quarter whatever the peer likes.
                let v = match head % 4 {
                    0 | 2 => (seen + u64::from(head) % (next - seen + 1)) as u32,
                    1 => (next as u32).wrapping_add((head >> 2) % 13).wrapping_sub(6),
                    _ => head,
                };
                r.poke_u32(tx.head_offset(), v);
                let honest = (seen..=next).find(|&x| x as u32 == v);
                proptest::prop_assert_eq!(tx.consumer_head(&r).ok(), honest.map(|x| x as u32));
                match honest {
                    Some(x) => seen = x,
                    // Put the last honest value back: a lie left there ends the ring.
                    None => r.poke_u32(tx.head_offset(), seen as u32),
                }
            }
        }
    }

    #[test]
    fn a_segment_without_seals_or_too_small_is_refused() {
        let l = Layout::new(4, 256).unwrap();
        // A file of the right size that carries no seals.
        let path = std::env::temp_dir().join(format!("weft-shm-unsealed-{}", std::process::id()));
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(l.total() as u64).unwrap();
        let _ = std::fs::remove_file(&path);
        let fd = OwnedFd::from(file);
        assert!(Region::open(&fd, l).is_err(), "no seals");
        let (_, fd) = Region::create(l).unwrap();
        assert!(Region::open(&fd, l).is_ok());
        assert!(
            Region::open(&fd, Layout::new(64, 256).unwrap()).is_err(),
            "too small"
        );
    }
}
