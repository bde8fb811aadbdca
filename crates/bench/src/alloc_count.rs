//! Heap accounting for memory measurements: `weft lpm-bench` reports the memory of
//! every LPM implementation the same way (bytes requested from the allocator and still
//! held after the build; allocator per-block overhead is not included, for any of
//! them), and `weft router bench` counts the pipeline's heap allocations per packet.
//!
//! Why a switch: a counting global allocator sits under every allocation of the
//! process, and the `weft` binary runs the router and the RPC and gRPC benchmarks too.
//! `stats_alloc`, used before, paid two SeqCst read-modify-writes on every allocation
//! and free, always. [`CountingAlloc`] pays one Relaxed load of a flag unless a
//! [`Measurement`] is running; only then does it count (Relaxed read-modify-writes:
//! the numbers are read by the thread that measures, after the work it measured).
//! The `weft` binary installs it only with its `bench` feature; the user's tool
//! (`--no-default-features`) keeps the system allocator untouched.
//!
//! A measurement's numbers are the allocations and frees made while it runs, so its
//! net bytes are exactly what the old always-on before/after difference of live bytes
//! was. What counts: the measuring thread and threads it starts; another thread's
//! allocations count from when it observes the flag (a Relaxed load), which is why
//! the benchmarks measure with nothing else running.
//!
//! This module is the crate's only unsafe code: implementing `GlobalAlloc` is unsafe
//! by definition, and every method only forwards to the system allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Measurements running now; the allocator counts while this is not zero.
static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Bytes allocated while counting (a realloc books its new size here).
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
/// Bytes freed while counting (a realloc books its old size here).
static FREED: AtomicU64 = AtomicU64::new(0);
/// Allocation and reallocation calls while counting.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counted while a [`Measurement`] runs. Install it with
/// `#[global_allocator] static A: CountingAlloc = CountingAlloc;` (the `weft`
/// binary's `bench` feature does).
#[derive(Debug, Clone, Copy, Default)]
pub struct CountingAlloc;

#[inline]
fn counting() -> bool {
    ACTIVE.load(Relaxed) != 0
}

#[cold]
fn count_alloc(bytes: usize) {
    ALLOCATED.fetch_add(bytes as u64, Relaxed);
    CALLS.fetch_add(1, Relaxed);
}

#[cold]
fn count_free(bytes: usize) {
    FREED.fetch_add(bytes as u64, Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's pointer and layout
// unchanged, so `System`'s guarantees are ours; the counting touches only atomics
// and never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counting() {
            count_alloc(layout.size());
        }
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract; passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if counting() {
            count_alloc(layout.size());
        }
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if counting() {
            count_free(layout.size());
        }
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if counting() {
            count_free(layout.size());
            count_alloc(new_size);
        }
        // SAFETY: `ptr` came from `System` with `layout`; the caller upholds the rest.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The process's global allocator is not [`CountingAlloc`], so a measurement would
/// read zero whatever happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotInstalled;

impl std::fmt::Display for NotInstalled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "the counting allocator is not this process's global allocator \
             (the weft binary installs it with its `bench` feature)",
        )
    }
}

impl std::error::Error for NotInstalled {}

/// A running measurement: the allocator counts from [`Measurement::start`] until the
/// last running measurement is dropped.
#[derive(Debug)]
pub struct Measurement {
    allocated: u64,
    freed: u64,
    calls: u64,
}

impl Measurement {
    /// Switches counting on and takes the starting point. Fails when the counting
    /// allocator is not installed: it allocates a probe and sees whether it was
    /// counted, so a benchmark cannot report zero bytes or zero allocations because
    /// nothing was counting.
    pub fn start() -> Result<Self, NotInstalled> {
        ACTIVE.fetch_add(1, Relaxed);
        let before = ALLOCATED.load(Relaxed);
        drop(std::hint::black_box(Box::new([0u8; 64])));
        if ALLOCATED.load(Relaxed) == before {
            ACTIVE.fetch_sub(1, Relaxed);
            return Err(NotInstalled);
        }
        Ok(Measurement {
            allocated: ALLOCATED.load(Relaxed),
            freed: FREED.load(Relaxed),
            calls: CALLS.load(Relaxed),
        })
    }

    /// Heap bytes allocated and not freed since the start (negative when more was
    /// freed than allocated).
    pub fn net_bytes(&self) -> i64 {
        let allocated = ALLOCATED.load(Relaxed) - self.allocated;
        let freed = FREED.load(Relaxed) - self.freed;
        allocated as i64 - freed as i64
    }

    /// Allocation and reallocation calls since the start.
    pub fn allocations(&self) -> u64 {
        CALLS.load(Relaxed) - self.calls
    }
}

impl Drop for Measurement {
    fn drop(&mut self) {
        ACTIVE.fetch_sub(1, Relaxed);
    }
}

/// The unit tests' own process gets the counting allocator, as the `weft` binary does
/// (the router benchmark's tests measure). The allocator's own test is an integration
/// test, `tests/alloc_count.rs`, alone in its process: other tests measuring on other
/// threads would switch counting on under its checks.
#[cfg(test)]
#[global_allocator]
static TEST_ALLOC: CountingAlloc = CountingAlloc;
