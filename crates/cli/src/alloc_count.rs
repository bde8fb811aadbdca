//! A global allocator that counts live heap bytes, so `weft lpm-bench` can report
//! the memory of every LPM implementation the same way (bytes requested from the
//! allocator and still held after the build; allocator per-block overhead is not
//! included, for any of them).
//!
//! This is the only `unsafe` in the `weft` binary: `GlobalAlloc` is an unsafe
//! trait. Every method forwards to [`System`] unchanged and only adds or subtracts
//! the size in an atomic counter.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Counts bytes allocated and not yet freed through the global allocator.
#[derive(Debug)]
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

/// Heap bytes currently allocated by the whole process.
pub fn live_bytes() -> usize {
    LIVE.load(Relaxed)
}

// SAFETY: every method forwards to `System`, which upholds the `GlobalAlloc`
// contract; the counter does not influence what is returned.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as ours: `layout` has non-zero size (caller's duty).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size(), Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller passes a block this allocator (i.e. `System`) returned
        // with this layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `ptr`/`layout` came from this allocator and
        // `new_size` is valid for `layout.align()`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Relaxed);
            LIVE.fetch_add(new_size, Relaxed);
        }
        p
    }
}
