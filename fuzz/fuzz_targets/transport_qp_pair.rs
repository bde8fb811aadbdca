//! Arbitrary bytes as a sequence of operations on a connected QP pair: posts of every
//! kind (valid or with bad keys, bounds, alignment), crafted packets with valid ICRCs,
//! raw garbage, state changes, time jumps and network steps. The driver
//! (`weft_transport::sim::fuzz_qp_pair`) asserts that nothing outside a registered
//! region is ever written; libFuzzer catches panics and hangs.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    weft_transport::sim::fuzz_qp_pair(data);
});
