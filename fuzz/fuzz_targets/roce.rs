//! Arbitrary bytes as an IB transport packet (a RoCEv2 UDP payload): the checked view and the Repr must never panic, and
//! whatever parses must re-emit to an equal Repr. The checks are
//! `weft_wire::fuzzing::roce`, which the stable test `tests/hostile_input.rs` runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::roce(data);
});
