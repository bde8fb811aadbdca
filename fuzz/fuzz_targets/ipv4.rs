//! Arbitrary bytes as an IPv4 packet; TTL decrement and CE marking must keep a valid checksum valid: the checked view and the Repr must never panic, and
//! whatever parses must re-emit to an equal Repr. The checks are
//! `weft_wire::fuzzing::ipv4`, which the stable test `tests/hostile_input.rs` runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::ipv4(data);
    // Again with the checksum refilled, so the checks behind it are reached.
    let mut fixed = data.to_vec();
    fuzzing::fix_ipv4(&mut fixed);
    fuzzing::ipv4(&fixed);
});
