//! Pooled packet buffers: a fixed number of equal-size buffers allocated once, handed
//! out as [`PacketBuf`]s and given back to the pool when a `PacketBuf` is dropped, on
//! whichever thread drops it. Nothing is allocated per packet: when the pool is empty,
//! [`BufferPool::alloc`] says so and the caller counts a drop.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Default size of one buffer: a 1518-byte frame with room to spare, a power of two.
pub const DEFAULT_BUF_SIZE: usize = 2048;

/// Default bytes kept free in front of a fresh buffer, so a protocol layer can
/// prepend a header ([`PacketBuf::prepend`]) without moving the payload.
pub const DEFAULT_HEADROOM: usize = 128;

struct PoolInner {
    free: Mutex<Vec<Box<[u8]>>>,
    buf_size: usize,
    headroom: usize,
    capacity: usize,
    exhausted: AtomicU64,
}

impl PoolInner {
    fn give_back(&self, mem: Box<[u8]>) {
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(mem);
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
    /// bytes in. `headroom` is clamped to `buf_size`.
    pub fn with_headroom(count: usize, buf_size: usize, headroom: usize) -> BufferPool {
        let free = (0..count)
            .map(|_| vec![0u8; buf_size].into_boxed_slice())
            .collect();
        BufferPool {
            inner: Arc::new(PoolInner {
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
        let mem = self
            .inner
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match mem {
            Some(mem) => Some(self.wrap(mem)),
            None => {
                self.inner.exhausted.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Up to `n` empty buffers appended to `out` under one lock; returns how many.
    pub fn alloc_burst(&self, n: usize, out: &mut Vec<PacketBuf>) -> usize {
        let mut free = self
            .inner
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let got = n.min(free.len());
        for _ in 0..got {
            if let Some(mem) = free.pop() {
                out.push(self.wrap(mem));
            }
        }
        drop(free);
        if got < n {
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
                if let Some(mem) = b.mem.take() {
                    free.push(mem);
                }
            } else {
                foreign.push(b);
            }
        }
        drop(free);
        drop(foreign);
    }

    fn wrap(&self, mem: Box<[u8]>) -> PacketBuf {
        PacketBuf {
            mem: Some(mem),
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
}

/// One frame in a pooled buffer: the bytes `start..start + len` of the buffer are the
/// frame. Dereferences to those bytes. Returned to its pool on drop.
pub struct PacketBuf {
    // `Some` until drop takes it back to the pool.
    mem: Option<Box<[u8]>>,
    start: usize,
    len: usize,
    pool: Arc<PoolInner>,
}

impl fmt::Debug for PacketBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PacketBuf")
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

impl PacketBuf {
    fn mem(&self) -> &[u8] {
        self.mem.as_deref().unwrap_or(&[])
    }

    fn mem_mut(&mut self) -> &mut [u8] {
        self.mem.as_deref_mut().unwrap_or(&mut [])
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
        self.mem().len() - self.start
    }

    /// Bytes free in front of the frame.
    pub fn headroom(&self) -> usize {
        self.start
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
        if let Some(mem) = self.mem.take() {
            self.pool.give_back(mem);
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
    fn a_buffer_dropped_on_another_thread_returns_to_the_pool() {
        let pool = BufferPool::new(2, 128);
        let b = pool.alloc().expect("fresh pool");
        std::thread::spawn(move || drop(b)).join().expect("thread");
        assert_eq!(pool.available(), 2);
    }
}
