//! Arbitrary bytes as a WFCM v2 connection-manager handshake body: `Hello::decode`
//! must never panic, and what decodes must encode and decode again to the same
//! value. The check is `weft_verbs::cm::fuzzing::hello`, which the stable test
//! `crates/verbs/tests/hostile_handshake.rs` runs too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_verbs::cm::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::hello(data);
});
