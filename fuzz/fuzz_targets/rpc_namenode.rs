//! Arbitrary bytes as a sequence of calls to the namenode example service (method
//! byte, length byte, serde-codec arguments): decoding what a client sent and
//! running the handlers must never panic, and the namespace must stay a tree. The
//! checks are the example's `fuzz_calls`, which the stable test
//! `crates/rpc/tests/hostile_input.rs` runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;
#[path = "../../crates/rpc/examples/namenode/service.rs"]
#[allow(dead_code)] // the example service (not weft-rpc's library); only fuzz_calls is used
mod namenode;

fuzz_target!(|data: &[u8]| {
    namenode::fuzz_calls(data);
});
