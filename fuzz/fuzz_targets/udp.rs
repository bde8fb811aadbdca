//! Arbitrary bytes as a UDP datagram, checksummed over IPv4 and IPv6 pseudo-headers: the checked view and the Repr must never panic, and
//! whatever parses must re-emit to an equal Repr. The checks are
//! `weft_wire::fuzzing::udp`, which the stable test `tests/hostile_input.rs` runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::udp(data);
    // Again with the checksum refilled, so the checks behind it are reached.
    let mut fixed = data.to_vec();
    fuzzing::fix_udp(&mut fixed);
    fuzzing::udp(&fixed);
});
