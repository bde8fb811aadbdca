//! Arbitrary bytes as an shm ring-mode descriptor: the parser must never panic, and
//! whatever parses must emit back to the same bytes. The checks are
//! `weft_wire::fuzzing::ring_descriptor`, which the stable test
//! `tests/hostile_input.rs` runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::ring_descriptor(data);
    // Again with the marker and the operation set, so the checks behind them are
    // reached.
    let mut fixed = data.to_vec();
    fuzzing::fix_ring_descriptor(&mut fixed);
    fuzzing::ring_descriptor(&fixed);
});
