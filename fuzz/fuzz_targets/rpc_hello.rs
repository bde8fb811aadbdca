//! Arbitrary bytes as the weft-rpc handshake (the connection manager's private
//! data): the decoder must never panic, and what decodes must encode back. The
//! checks are `weft_rpc::fuzzing::hello`, which the stable test
//! `crates/rpc/tests/hostile_input.rs` runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_rpc::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::hello(data);
});
