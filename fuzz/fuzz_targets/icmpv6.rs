//! Arbitrary bytes as an ICMPv6 message (echo, errors, neighbour discovery): the checked view and the Repr must never panic, and
//! whatever parses must re-emit to an equal Repr. The checks are
//! `weft_wire::fuzzing::icmpv6`, which the stable test `tests/hostile_input.rs` runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::icmpv6(data);
    // Again with the checksum refilled, so the checks behind it are reached.
    let mut fixed = data.to_vec();
    fuzzing::fix_icmpv6(&mut fixed);
    fuzzing::icmpv6(&fixed);
});
