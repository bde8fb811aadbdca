//! Live heap bytes of the whole process, so `weft lpm-bench` can report the memory of
//! every LPM implementation the same way (bytes requested from the allocator and still
//! held after the build; allocator per-block overhead is not included, for any of them).
//!
//! The counting allocator is `stats_alloc`'s instrumented wrapper around the system
//! allocator: the `unsafe impl GlobalAlloc` lives in that crate, so the `weft` binary
//! keeps `#![forbid(unsafe_code)]` (weft's own unsafe is confined to link backends and
//! memory-region code).

use stats_alloc::{StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

/// The process's global allocator: the system allocator, counted.
pub static ALLOC: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Heap bytes currently allocated by the whole process.
pub fn live_bytes() -> usize {
    // stats_alloc books a growing realloc in bytes_allocated and a shrinking one in
    // bytes_deallocated (bytes_reallocated repeats the net change), so live bytes are
    // the difference of the first two.
    let s = ALLOC.stats();
    s.bytes_allocated.saturating_sub(s.bytes_deallocated)
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_a_live_allocation() {
        let before = super::live_bytes();
        let v: Vec<u8> = Vec::with_capacity(1 << 20);
        let during = super::live_bytes();
        drop(v);
        // Other test threads allocate too; a megabyte stands out from them.
        assert!(
            during >= before + (1 << 20) - (64 << 10),
            "{before} -> {during}"
        );
    }
}
