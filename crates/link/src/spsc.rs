//! A bounded single-producer single-consumer descriptor ring with batched doorbells —
//! the software form of the per-(ingress, egress) descriptor ring of the P2PNIC paper
//! (§3.3: "the ring buffer is a data structure for a single reader and a single
//! writer").
//!
//! The producer fills slots with [`Producer::push`]; nothing is visible to the
//! consumer until [`Producer::doorbell`] publishes the tail, once per burst. The
//! consumer takes a burst with [`Consumer::pop_burst`] and publishes its head once
//! (the completion that frees the slots). Dropping the producer rings the doorbell, so
//! no written slot is lost; items left in the ring are dropped with it.

use std::cell::UnsafeCell;
use std::fmt;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Keeps the producer's and the consumer's index on separate cache lines.
#[repr(align(128))]
struct CachePadded<T>(T);

struct Ring<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: usize,
    /// Next slot the consumer reads; written by the consumer only.
    head: CachePadded<AtomicUsize>,
    /// One past the last slot published by the producer; written by the producer only.
    tail: CachePadded<AtomicUsize>,
}

// SAFETY: a slot is accessed by exactly one side at a time. The producer writes slot
// `i` only while `i - head < capacity` (the consumer has released it, observed with
// Acquire on `head`), and the consumer reads slot `i` only while `i < tail` (the
// producer has published it, observed with Acquire on `tail`). Each side publishes
// with Release after its access, so the accesses are ordered and never concurrent.
// `T: Send` because items cross from the producer's thread to the consumer's.
unsafe impl<T: Send> Sync for Ring<T> {}
// SAFETY: as above; the ring owns its items, which are `Send`.
unsafe impl<T: Send> Send for Ring<T> {}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        let head = *self.head.0.get_mut();
        let tail = *self.tail.0.get_mut();
        let mut i = head;
        while i != tail {
            let slot = self.slots[i & self.mask].get_mut();
            // SAFETY: slots in head..tail were written and published by the producer
            // and not yet read by the consumer; both ends are gone (we hold `&mut`), so
            // each is dropped exactly once here.
            unsafe { slot.assume_init_drop() };
            i = i.wrapping_add(1);
        }
    }
}

/// A ring of `capacity` slots, rounded up to a power of two (at least 2).
pub fn ring<T: Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let cap = capacity.max(2).next_power_of_two();
    let slots = (0..cap)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect();
    let ring = Arc::new(Ring {
        slots,
        mask: cap - 1,
        head: CachePadded(AtomicUsize::new(0)),
        tail: CachePadded(AtomicUsize::new(0)),
    });
    (
        Producer {
            ring: Arc::clone(&ring),
            next: 0,
            head_cache: 0,
        },
        Consumer {
            ring,
            next: 0,
            tail_cache: 0,
        },
    )
}

/// The writing end.
pub struct Producer<T: Send> {
    ring: Arc<Ring<T>>,
    /// Next slot to write (published or not).
    next: usize,
    /// Last head seen; refreshed only when the ring looks full.
    head_cache: usize,
}

impl<T: Send> fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.capacity())
            .field("next", &self.next)
            .finish()
    }
}

impl<T: Send> Producer<T> {
    /// Slots in the ring.
    pub fn capacity(&self) -> usize {
        self.ring.mask + 1
    }

    /// Write `item` into the next slot, unpublished until [`Producer::doorbell`].
    /// Gives the item back when the ring is full.
    pub fn push(&mut self, item: T) -> Result<(), T> {
        let cap = self.capacity();
        if self.next.wrapping_sub(self.head_cache) >= cap {
            self.head_cache = self.ring.head.0.load(Ordering::Acquire);
            if self.next.wrapping_sub(self.head_cache) >= cap {
                return Err(item);
            }
        }
        let slot = self.ring.slots[self.next & self.ring.mask].get();
        // SAFETY: `next - head < capacity`, so the consumer has released this slot
        // (its Release store of `head` happened before our Acquire load) and will not
        // read it until we publish a tail beyond it. Writing does not drop the old
        // contents, which the consumer moved out.
        unsafe { (*slot).write(item) };
        self.next = self.next.wrapping_add(1);
        Ok(())
    }

    /// Items written but not yet published.
    pub fn pending(&self) -> usize {
        self.next
            .wrapping_sub(self.ring.tail.0.load(Ordering::Relaxed))
    }

    /// Publish every written slot to the consumer (one Release store per burst).
    pub fn doorbell(&mut self) {
        self.ring.tail.0.store(self.next, Ordering::Release);
    }

    /// True when the consumer has taken every item written so far (published or
    /// not): nothing of ours waits in the ring. A producer that wrote nothing since it
    /// last saw the ring drained knows the answer without reading the consumer's
    /// index: a ring that is never used (a QP whose posts all take the doorbell path)
    /// costs its poster no cache line.
    pub fn is_drained(&mut self) -> bool {
        if self.head_cache == self.next {
            return true;
        }
        self.head_cache = self.ring.head.0.load(Ordering::Acquire);
        self.head_cache == self.next
    }

    /// Free slots as last seen (a lower bound).
    pub fn free_slots(&mut self) -> usize {
        self.head_cache = self.ring.head.0.load(Ordering::Acquire);
        self.capacity() - self.next.wrapping_sub(self.head_cache)
    }
}

impl<T: Send> Drop for Producer<T> {
    fn drop(&mut self) {
        self.doorbell();
    }
}

/// The reading end.
pub struct Consumer<T: Send> {
    ring: Arc<Ring<T>>,
    /// Next slot to read.
    next: usize,
    /// Last tail seen.
    tail_cache: usize,
}

impl<T: Send> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &(self.ring.mask + 1))
            .field("next", &self.next)
            .finish()
    }
}

impl<T: Send> Consumer<T> {
    /// Move up to `max` published items to `out`, then release their slots with one
    /// Release store. Returns how many.
    pub fn pop_burst(&mut self, out: &mut Vec<T>, max: usize) -> usize {
        self.pop_burst_with(max, |t| out.push(t))
    }

    /// Hand up to `max` published items to `f` in order, straight from their slots,
    /// then release the slots with one Release store. Returns how many. The consumer
    /// of large descriptors uses this to avoid copying each into a scratch vector.
    pub fn pop_burst_with(&mut self, max: usize, mut f: impl FnMut(T)) -> usize {
        if self.tail_cache.wrapping_sub(self.next) < max {
            self.tail_cache = self.ring.tail.0.load(Ordering::Acquire);
        }
        let n = self.tail_cache.wrapping_sub(self.next).min(max);
        for _ in 0..n {
            let slot = self.ring.slots[self.next & self.ring.mask].get();
            // SAFETY: `next < tail`, and the producer's Release store of `tail` happened
            // before our Acquire load, so the slot holds an initialised item the
            // producer will not touch until we publish a head beyond it. Reading moves
            // the item out; the slot is then logically uninitialised, and `next` moves
            // past it before `f` runs, so a panic in `f` cannot cause a second read.
            let item = unsafe { (*slot).assume_init_read() };
            self.next = self.next.wrapping_add(1);
            f(item);
        }
        if n > 0 {
            self.ring.head.0.store(self.next, Ordering::Release);
        }
        n
    }

    /// One item, if any is published.
    pub fn pop(&mut self) -> Option<T> {
        let mut one = None;
        self.pop_burst_with(1, |t| one = Some(t));
        one
    }

    /// True when nothing published is waiting.
    pub fn is_empty(&mut self) -> bool {
        self.tail_cache = self.ring.tail.0.load(Ordering::Acquire);
        self.next == self.tail_cache
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_visible_before_the_doorbell() {
        let (mut p, mut c) = ring::<u32>(4);
        p.push(1).expect("room");
        p.push(2).expect("room");
        let mut out = Vec::new();
        assert_eq!(c.pop_burst(&mut out, 8), 0);
        assert_eq!(p.pending(), 2);
        p.doorbell();
        assert_eq!(c.pop_burst(&mut out, 8), 2);
        assert_eq!(out, vec![1, 2]);
    }

    #[test]
    fn drained_only_once_the_consumer_took_every_written_item() {
        let (mut p, mut c) = ring::<u32>(4);
        assert!(p.is_drained());
        p.push(1).expect("room");
        // Written but unpublished counts as waiting.
        assert!(!p.is_drained());
        p.push(2).expect("room");
        p.doorbell();
        assert_eq!(c.pop(), Some(1));
        assert!(!p.is_drained());
        assert_eq!(c.pop(), Some(2));
        assert!(p.is_drained());
        // Seen drained, then written again (across the wrap): waiting once more,
        // though the producer's cached view of the consumer said drained.
        for k in 0..9 {
            p.push(k).expect("room");
            assert!(!p.is_drained());
            p.doorbell();
            assert_eq!(c.pop(), Some(k));
            assert!(p.is_drained());
            assert!(p.is_drained());
        }
    }

    #[test]
    fn a_full_ring_gives_the_item_back_and_frees_after_a_pop() {
        let (mut p, mut c) = ring::<u32>(2);
        p.push(1).expect("room");
        p.push(2).expect("room");
        assert_eq!(p.push(3), Err(3));
        p.doorbell();
        assert_eq!(c.pop(), Some(1));
        p.push(3).expect("a slot was freed");
        p.doorbell();
        let mut out = Vec::new();
        c.pop_burst(&mut out, 10);
        assert_eq!(out, vec![2, 3]);
        assert!(c.is_empty());
    }

    #[test]
    fn items_left_in_the_ring_are_dropped_once() {
        let marker = Arc::new(());
        {
            let (mut p, _c) = ring::<Arc<()>>(8);
            for _ in 0..5 {
                p.push(Arc::clone(&marker)).expect("room");
            }
            // not published: dropping the producer rings the doorbell
        }
        assert_eq!(Arc::strong_count(&marker), 1);
    }

    #[test]
    fn items_cross_threads_in_order_and_intact() {
        let (mut p, mut c) = ring::<u64>(64);
        const N: u64 = 200_000;
        let t = std::thread::spawn(move || {
            let mut i = 0;
            while i < N {
                while i < N && p.push(i).is_ok() {
                    i += 1;
                    if i % 16 == 0 {
                        p.doorbell();
                    }
                }
                p.doorbell();
                std::thread::yield_now();
            }
        });
        let mut expect = 0;
        let mut out = Vec::new();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while expect < N && std::time::Instant::now() < deadline {
            out.clear();
            if c.pop_burst(&mut out, 32) == 0 {
                std::thread::yield_now();
            }
            for v in &out {
                assert_eq!(*v, expect);
                expect += 1;
            }
        }
        t.join().expect("producer");
        assert_eq!(expect, N);
    }
}
