//! Arbitrary bytes as an Ethernet frame that may carry RoCEv2; what parses must rebuild with a good ICRC: the checked view and the Repr must never panic, and
//! whatever parses must re-emit to an equal Repr. The checks are
//! `weft_wire::fuzzing::frame`, which the stable test `tests/hostile_input.rs` runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::frame(data);
    // Again with the checksum refilled, so the checks behind it are reached.
    let mut fixed = data.to_vec();
    fuzzing::fix_frame(&mut fixed);
    fuzzing::frame(&fixed);
});
