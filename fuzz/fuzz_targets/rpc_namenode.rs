//! Arbitrary bytes as a sequence of calls to the namenode example service (method
//! byte, length byte, serde-codec arguments): decoding what a client sent and
//! running the handlers must never panic, and the namespace must stay a tree. The
//! checks are `weft_rpc::fuzzing::namenode`, which the stable test
//! `crates/rpc/tests/hostile_input.rs` runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_rpc::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::namenode(data);
});
