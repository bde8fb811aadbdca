//! Pooled packet buffers: a fixed number of equal-size buffers, the fixed slots of
//! ONE allocation (the arena), handed out as [`PacketBuf`]s and given back to the
//! pool when a `PacketBuf` is dropped, on whichever thread drops it. Nothing is
//! allocated per packet: when the pool is empty, [`BufferPool::alloc`] says so and
//! the caller counts a drop.
//!
//! One arena with a stable address is what lets the verbs engine read packets in
//! place: weft-verbs registers the whole arena once
//! (`ProtectionDomain::register_pool`) and a buffer's scatter-gather entry is the
//! arena's key and [`PacketBuf::arena_offset`] — the router's interconnect gathers
//! a batch that way with no copy.
//!
//! # Why this is sound
//!
//! The arena is allocated once, zeroed, never moved or resized, and freed only when
//! the last handle to the pool (every [`BufferPool`] clone, every [`PacketBuf`], and
//! a registration's clone) is gone. Its bytes are reached only through the raw base
//! pointer. The free list holds each slot index at most once, and a slot is out of
//! the free list exactly while one `PacketBuf` holds it; so the `&`/`&mut` slices a
//! `PacketBuf` hands out (for as long as it is borrowed, never longer) cover bytes
//! nothing else in this process references. A reader outside Rust's references —
//! the verbs engine gathering a SEND — reads a slot by raw copy only while the
//! `PacketBuf` that holds it is parked, unborrowed, in the sender's hands until the
//! send completed (weft-verbs' memory regions follow the same contract: shared bytes
//! by raw copies, never a reference held across the transport); a registration of
//! the arena grants the engine no write access. A sender that breaks that contract
//! (posts a buffer and goes on writing it) races the engine's read: a data race, as
//! with any registered memory written under an in-flight SEND; weft-verbs'
//! `PoolRegion` doc says so too.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Default size of one buffer: a 1518-byte frame with room to spare, a power of two.
pub const DEFAULT_BUF_SIZE: usize = 2048;

/// Default bytes kept free in front of a fresh buffer, so a protocol layer can
/// prepend a header ([`PacketBuf::prepend`]) without moving the payload.
pub const DEFAULT_HEADROOM: usize = 128;

/// Alignment of the arena (and of every slot whose size is a multiple of it): a
/// cache line.
const ARENA_ALIGN: usize = 64;

/// The one allocation every buffer of a pool is a slot of.
struct Arena {
    base: NonNull<u8>,
    /// `None` for an empty arena (nothing was allocated).
    layout: Option<Layout>,
}

// SAFETY: the arena is plain bytes owned by the pool; the pointer is only
// dereferenced by `PacketBuf` for the slot it holds (see the module doc), so sharing
// or sending the arena between threads shares an address, not access to the bytes.
unsafe impl Send for Arena {}
// SAFETY: as above; the `Arena` itself is never mutated after creation.
unsafe impl Sync for Arena {}

impl Arena {
    /// `len` zeroed bytes, cache-line aligned. Panics when `len` overflows a layout
    /// (a pool of more than `isize::MAX` bytes), as `vec!` does.
    fn new(len: usize) -> Arena {
        if len == 0 {
            return Arena {
                base: NonNull::dangling(),
                layout: None,
            };
        }
        let layout = match Layout::from_size_align(len, ARENA_ALIGN) {
            Ok(l) => l,
            Err(_) => panic!("a buffer pool of {len} bytes does not fit the address space"),
        };
        // SAFETY: `layout` has a non-zero size.
        let p = unsafe { alloc::alloc_zeroed(layout) };
        let Some(base) = NonNull::new(p) else {
            alloc::handle_alloc_error(layout)
        };
        Arena {
            base,
            layout: Some(layout),
        }
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        if let Some(layout) = self.layout {
            // SAFETY: `base` came from `alloc_zeroed(layout)` and is freed once, here,
            // when the last handle to the pool is gone (no `PacketBuf` and no
            // registration can outlive it: each holds an `Arc` of the pool).
            unsafe { alloc::dealloc(self.base.as_ptr(), layout) };
        }
    }
}

struct PoolInner {
    arena: Arena,
    /// Indices of the free slots; each index is here at most once, and not here
    /// exactly while one `PacketBuf` holds it.
    free: Mutex<Vec<u32>>,
    buf_size: usize,
    headroom: usize,
    capacity: usize,
    exhausted: AtomicU64,
}

impl PoolInner {
    fn give_back(&self, slot: u32) {
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(slot);
    }

    /// The first byte of slot `i`.
    fn slot_ptr(&self, i: u32) -> *mut u8 {
        // In bounds: `i < capacity` (only such indices are ever in the free list), so
        // `i * buf_size + buf_size <= capacity * buf_size`, the arena's length.
        self.arena
            .base
            .as_ptr()
            .wrapping_add(i as usize * self.buf_size)
    }
}

/// A shared pool of packet buffers; cloning shares the same pool.
#[derive(Clone)]
pub struct BufferPool {
    inner: Arc<PoolInner>,
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferPool")
            .field("capacity", &self.inner.capacity)
            .field("buf_size", &self.inner.buf_size)
            .field("available", &self.available())
            .finish()
    }
}

impl BufferPool {
    /// A pool of `count` buffers of `buf_size` bytes with [`DEFAULT_HEADROOM`].
    pub fn new(count: usize, buf_size: usize) -> BufferPool {
        BufferPool::with_headroom(count, buf_size, DEFAULT_HEADROOM.min(buf_size / 2))
    }

    /// A pool of `count` buffers of `buf_size` bytes; a fresh buffer starts `headroom`
    /// bytes in. `headroom` is clamped to `buf_size`. `count` is clamped to
    /// `u32::MAX` slots. Panics when `count × buf_size` bytes do not fit the address
    /// space (as `vec!` does).
    pub fn with_headroom(count: usize, buf_size: usize, headroom: usize) -> BufferPool {
        let count = count.min(u32::MAX as usize);
        let Some(len) = count.checked_mul(buf_size) else {
            panic!("a buffer pool of {count} × {buf_size} bytes does not fit the address space");
        };
        // Handed out from the end, so the first buffers come from the arena's start.
        let free = (0..count as u32).rev().collect();
        BufferPool {
            inner: Arc::new(PoolInner {
                arena: Arena::new(len),
                free: Mutex::new(free),
                buf_size,
                headroom: headroom.min(buf_size),
                capacity: count,
                exhausted: AtomicU64::new(0),
            }),
        }
    }

    /// An empty buffer (length 0, headroom in front), or `None` when all are in use.
    pub fn alloc(&self) -> Option<PacketBuf> {
        let slot = self
            .inner
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match slot {
            Some(slot) => Some(self.wrap(slot)),
            None => {
                self.inner.exhausted.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Up to `n` empty buffers appended to `out` under one lock; returns how many.
    pub fn alloc_burst(&self, n: usize, out: &mut Vec<PacketBuf>) -> usize {
        let target = out.len() + n;
        self.refill(target, target, out)
    }

    /// Top `out` up towards `want` buffers under one lock, taking what the pool has;
    /// returns how many it took. Counts as exhausted only when `out` still holds fewer
    /// than `need`: a receive path that keeps a few spare buffers asks for more than
    /// it needs, so that one lock serves many receives.
    pub fn refill(&self, want: usize, need: usize, out: &mut Vec<PacketBuf>) -> usize {
        if out.len() >= want {
            return 0;
        }
        let mut free = self
            .inner
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let got = (want - out.len()).min(free.len());
        for _ in 0..got {
            if let Some(slot) = free.pop() {
                out.push(self.wrap(slot));
            }
        }
        drop(free);
        if out.len() < need {
            self.inner.exhausted.fetch_add(1, Ordering::Relaxed);
        }
        got
    }

    /// Give many buffers back under one lock (a transmit completion). Buffers of
    /// another pool go back to theirs one by one, after this pool's lock is released.
    pub fn free_burst(&self, bufs: impl IntoIterator<Item = PacketBuf>) {
        // Never hold two pools' locks at once: two threads each giving the other's
        // buffers back while holding their own lock would deadlock (two devices on the
        // simulated fabric did exactly that). Foreign buffers wait in `foreign`, which
        // allocates only when there is one.
        let mut foreign: Vec<PacketBuf> = Vec::new();
        let mut free = self
            .inner
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for mut b in bufs {
            if Arc::ptr_eq(&b.pool, &self.inner) {
                if let Some(slot) = b.slot.take() {
                    free.push(slot);
                }
            } else {
                foreign.push(b);
            }
        }
        drop(free);
        drop(foreign);
    }

    fn wrap(&self, slot: u32) -> PacketBuf {
        PacketBuf {
            slot: Some(slot),
            start: self.inner.headroom,
            len: 0,
            pool: Arc::clone(&self.inner),
        }
    }

    /// Buffers currently free.
    pub fn available(&self) -> usize {
        self.inner
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Buffers in the pool, free or not.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// Size of each buffer in bytes, headroom included.
    pub fn buf_size(&self) -> usize {
        self.inner.buf_size
    }

    /// How many allocations found the pool empty.
    pub fn exhausted(&self) -> u64 {
        self.inner.exhausted.load(Ordering::Relaxed)
    }

    /// True when `buf` is one of this pool's buffers (a slot of its arena).
    pub fn owns(&self, buf: &PacketBuf) -> bool {
        Arc::ptr_eq(&buf.pool, &self.inner)
    }

    /// The first byte of the arena: buffer `b` of this pool starts at
    /// `arena_ptr() + b.arena_offset()` and the arena is [`BufferPool::arena_len`]
    /// bytes. The address is stable for as long as any clone of the pool (or any of
    /// its buffers) lives. Dereferencing it is the caller's `unsafe` business: the
    /// module doc says which bytes may be read when.
    pub fn arena_ptr(&self) -> *mut u8 {
        self.inner.arena.base.as_ptr()
    }

    /// Bytes of the arena: capacity × buffer size.
    pub fn arena_len(&self) -> usize {
        self.inner.capacity * self.inner.buf_size
    }
}

/// One frame in a pooled buffer: the bytes `start..start + len` of the buffer are the
/// frame. Dereferences to those bytes. Returned to its pool on drop.
pub struct PacketBuf {
    // `Some` until drop (or `free_burst`) takes it back to the pool.
    slot: Option<u32>,
    start: usize,
    len: usize,
    pool: Arc<PoolInner>,
}

impl fmt::Debug for PacketBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketBuf")
            .field("slot", &self.slot)
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

impl PacketBuf {
    fn mem(&self) -> &[u8] {
        let Some(i) = self.slot else { return &[] };
        // SAFETY: this `PacketBuf` holds slot `i` (out of the free list until it is
        // dropped), so the `buf_size` bytes at `slot_ptr(i)` lie inside the live arena
        // (kept alive by `self.pool`) and no other `PacketBuf` reaches them; the slice
        // lives no longer than `&self`, during which `mem_mut` cannot be called (the
        // module doc covers readers outside Rust's references).
        unsafe { std::slice::from_raw_parts(self.pool.slot_ptr(i), self.pool.buf_size) }
    }

    fn mem_mut(&mut self) -> &mut [u8] {
        let Some(i) = self.slot else { return &mut [] };
        // SAFETY: as in `mem`; `&mut self` makes this the only slice of the slot for
        // its lifetime.
        unsafe { std::slice::from_raw_parts_mut(self.pool.slot_ptr(i), self.pool.buf_size) }
    }

    /// Frame length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the frame is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most the frame can grow to without moving its start.
    pub fn capacity(&self) -> usize {
        self.pool.buf_size - self.start
    }

    /// Bytes free in front of the frame.
    pub fn headroom(&self) -> usize {
        self.start
    }

    /// Where the frame starts, in bytes from the start of its pool's arena
    /// ([`BufferPool::arena_ptr`]): what a registration of the arena turns into a
    /// scatter-gather entry.
    pub fn arena_offset(&self) -> usize {
        self.slot.map_or(0, |i| i as usize * self.pool.buf_size) + self.start
    }

    /// Set the frame length; bytes past the old length keep whatever the buffer held.
    /// Returns false (and changes nothing) when `len` exceeds [`PacketBuf::capacity`].
    #[must_use]
    pub fn set_len(&mut self, len: usize) -> bool {
        if len > self.capacity() {
            return false;
        }
        self.len = len;
        true
    }

    /// The whole writable area from the frame start to the end of the buffer, for
    /// writing a frame before [`PacketBuf::set_len`].
    pub fn spare_mut(&mut self) -> &mut [u8] {
        let s = self.start;
        &mut self.mem_mut()[s..]
    }

    /// Replace the frame with `bytes`. False (nothing changed) when they do not fit.
    #[must_use]
    pub fn copy_from(&mut self, bytes: &[u8]) -> bool {
        if bytes.len() > self.capacity() {
            return false;
        }
        self.spare_mut()[..bytes.len()].copy_from_slice(bytes);
        self.len = bytes.len();
        true
    }

    /// Grow the frame by `n` bytes at the front (into the headroom). False (nothing
    /// changed) when the headroom is smaller than `n`.
    #[must_use]
    pub fn prepend(&mut self, n: usize) -> bool {
        if n > self.start {
            return false;
        }
        self.start -= n;
        self.len += n;
        true
    }

    /// Remove `n` bytes from the front of the frame. False when the frame is shorter.
    #[must_use]
    pub fn trim_front(&mut self, n: usize) -> bool {
        if n > self.len {
            return false;
        }
        self.start += n;
        self.len -= n;
        true
    }

    /// Empty the frame and restore the pool's headroom, for reuse.
    pub fn reset(&mut self) {
        self.start = self.pool.headroom;
        self.len = 0;
    }
}
impl Deref for PacketBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        let (s, l) = (self.start, self.len);
        &self.mem()[s..s + l]
    }
}

impl DerefMut for PacketBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        let (s, l) = (self.start, self.len);
        &mut self.mem_mut()[s..s + l]
    }
}

impl AsRef<[u8]> for PacketBuf {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl AsMut<[u8]> for PacketBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        self
    }
}

impl Drop for PacketBuf {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.pool.give_back(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_threads_returning_each_others_buffers_do_not_deadlock() {
        // Thread 1 frees pool B's buffers through pool A and thread 2 the reverse,
        // as two devices on one simulated fabric do. A watchdog turns a deadlock
        // into a failure instead of a hung test.
        let (a, b) = (BufferPool::new(64, 64), BufferPool::new(64, 64));
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        for (mine, theirs) in [(a.clone(), b.clone()), (b.clone(), a.clone())] {
            let done = done_tx.clone();
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    let mut bufs = Vec::new();
                    theirs.alloc_burst(8, &mut bufs);
                    mine.alloc_burst(8, &mut bufs);
                    mine.free_burst(bufs);
                }
                let _ = done.send(());
            });
        }
        for _ in 0..2 {
            let r = done_rx.recv_timeout(std::time::Duration::from_secs(60));
            assert!(r.is_ok(), "free_burst deadlocked (or took over 60 s)");
        }
        assert_eq!(
            (a.available(), b.available()),
            (64, 64),
            "every buffer came home"
        );
    }

    #[test]
    fn buffers_come_back_on_drop_and_the_pool_never_grows() {
        let pool = BufferPool::new(4, 256);
        let mut held = Vec::new();
        assert_eq!(pool.alloc_burst(8, &mut held), 4);
        assert!(pool.alloc().is_none());
        assert_eq!(pool.exhausted(), 2);
        held.pop();
        assert_eq!(pool.available(), 1);
        let b = pool.alloc().expect("one was returned");
        drop(held);
        drop(b);
        assert_eq!(pool.available(), 4);
    }

    #[test]
    fn lengths_are_checked_not_trusted() {
        let pool = BufferPool::with_headroom(1, 64, 16);
        let mut b = pool.alloc().expect("fresh pool");
        assert_eq!(b.capacity(), 48);
        assert!(!b.set_len(49));
        assert!(b.copy_from(&[1, 2, 3]));
        assert!(b.prepend(2));
        assert_eq!(b.len(), 5);
        assert!(!b.prepend(15));
        assert!(b.trim_front(2));
        assert_eq!(&b[..], &[1, 2, 3]);
        assert!(!b.trim_front(4));
        assert!(!b.copy_from(&[0; 49]));
        b.reset();
        assert!(b.is_empty());
        assert_eq!(b.headroom(), 16);
    }

    #[test]
    fn free_burst_returns_each_buffer_to_its_own_pool() {
        let (a, b) = (BufferPool::new(4, 128), BufferPool::new(4, 128));
        let mut v = Vec::new();
        a.alloc_burst(3, &mut v);
        b.alloc_burst(2, &mut v);
        a.free_burst(v.drain(..));
        assert_eq!((a.available(), b.available()), (4, 4));
    }

    #[test]
    fn buffers_are_disjoint_slots_of_one_arena() {
        let pool = BufferPool::with_headroom(8, 256, 32);
        assert_eq!(pool.arena_len(), 8 * 256);
        let mut v = Vec::new();
        assert_eq!(pool.alloc_burst(8, &mut v), 8);
        let mut offsets: Vec<usize> = v.iter().map(PacketBuf::arena_offset).collect();
        offsets.sort_unstable();
        for (k, o) in offsets.iter().enumerate() {
            assert_eq!(*o, k * 256 + 32, "slot k, headroom in front");
        }
        for (i, b) in v.iter_mut().enumerate() {
            assert!(b.copy_from(&[i as u8; 224]), "fills the slot to its end");
            assert!(b.prepend(4));
            assert_eq!(b.arena_offset() % 256, 28);
        }
        for (i, b) in v.iter().enumerate() {
            assert!(
                b[4..].iter().all(|&x| x == i as u8),
                "no slot overlaps another"
            );
            assert!(pool.owns(b));
        }
        let other = BufferPool::new(1, 256);
        let foreign = other.alloc().expect("fresh pool");
        assert!(!pool.owns(&foreign));
        // The bytes at arena_ptr + arena_offset are the frame's.
        let b = &v[3];
        let mut seen = vec![0u8; b.len()];
        // SAFETY: a test reading its own buffer's bytes through the arena pointer
        // while only shared references to that buffer exist: `[offset, offset+len)`
        // lies inside the arena, which `pool` keeps alive.
        unsafe {
            std::ptr::copy_nonoverlapping(
                pool.arena_ptr().add(b.arena_offset()),
                seen.as_mut_ptr(),
                b.len(),
            );
        }
        assert_eq!(&seen[..], &b[..]);
        drop(v);
        assert_eq!(pool.available(), 8);
        let empty = BufferPool::new(0, 2048);
        assert!(empty.alloc().is_none());
        assert_eq!(empty.arena_len(), 0);
    }

    #[test]
    fn a_buffer_dropped_on_another_thread_returns_to_the_pool() {
        let pool = BufferPool::new(2, 128);
        let b = pool.alloc().expect("fresh pool");
        std::thread::spawn(move || drop(b)).join().expect("thread");
        assert_eq!(pool.available(), 2);
    }
}
