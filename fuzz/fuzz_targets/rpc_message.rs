//! Arbitrary bytes as one weft-rpc SEND message: the frame parser, the rendezvous
//! descriptor and the server's message check must never panic, and whatever parses
//! must re-emit to the same bytes. The checks are `weft_rpc::fuzzing::message`,
//! which the stable test `crates/rpc/tests/hostile_input.rs` runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_rpc::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::message(data);
});
