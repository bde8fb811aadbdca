//! Arbitrary bytes as an IPv6 packet and its extension-header walk: the checked view and the Repr must never panic, and
//! whatever parses must re-emit to an equal Repr. The checks are
//! `weft_wire::fuzzing::ipv6`, which the stable test `tests/hostile_input.rs` runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_wire::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::ipv6(data);
});
